// Package alerting holds the test that ties docs/alerts.yaml to the
// metrics gatehouse exports: every gatehouse_* series an alert names is
// on /metrics as soon as a replica starts, each counter at 0 for every
// label value the alert selects, so that a rate or increase has a
// starting point and a missing series never hides a problem. It has no
// code of its own: its test runs in a process of its own, so the
// counters it reads are those of a fresh start.
package alerting
