// Package resilience holds black-box tests of gatehouse under faults of
// the services it depends on. They start their own Redis server (never the
// shared one other tests use) and stop and restart it under the running
// service.
package resilience
