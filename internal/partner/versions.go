package partner

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// MinDeprecationNotice is the shortest time between announcing that a
// version is deprecated and retiring it: callers are told three months
// (90 days) ahead.
const MinDeprecationNotice = 90 * 24 * time.Hour

// Version is a version of the partner API and where it stands in its
// lifecycle: served, deprecated (still served, replies say so), retired
// (every call answers 410).
type Version struct {
	Name string
	// Released is the day the version shipped (the version table's date,
	// or GATEHOUSE_API_RELEASED); zero when not recorded.
	Released time.Time
	// Deprecated is when the version was (or will be) announced as
	// deprecated; zero when it is not.
	Deprecated time.Time
	// Sunset is when the version retires; zero when no date is set.
	Sunset time.Time
	// Removed are the fields of the previous version this one removes,
	// each with the day it leaves the replies (6 months after
	// Released, see RemovalDate); until then the version still carries it.
	Removed []RemovedField
}

// RemovalDate is when a field removed by a version released on released
// leaves its replies: the transition period is 6 months from the release.
func RemovalDate(released time.Time) time.Time { return released.AddDate(0, 6, 0) }

// RemovedField is a field a version removes and when it goes.
type RemovedField struct {
	Name    string
	Removal time.Time
}

// Carries reports whether v's replies at now still include field: any
// field v does not remove, and a removed one before its removal date.
func (v Version) Carries(field string, now time.Time) bool {
	for _, r := range v.Removed {
		if r.Name == field {
			return now.Before(r.Removal)
		}
	}
	return true
}

// DeprecatedFields is the value of the Deprecated-Fields header of v's
// replies at now: every removed field still carried, with its removal
// date (`customer_info; removal="2027-05-27"`); empty when there is none.
func (v Version) DeprecatedFields(now time.Time) string {
	var parts []string
	for _, r := range v.Removed {
		if now.Before(r.Removal) {
			parts = append(parts, r.Name+`; removal="`+day(r.Removal)+`"`)
		}
	}
	return strings.Join(parts, ", ")
}

// Served is a version as this build's version table declares it.
type Served struct {
	Name string
	// Released is the day the version ships; zero when not recorded.
	Released time.Time
	// Removes names the fields of the previous version this one removes.
	Removes []string
}

// Lifecycle are the lifecycle dates of the configuration, per version:
// GATEHOUSE_API_DEPRECATED, GATEHOUSE_API_SUNSET, GATEHOUSE_API_RELEASED.
type Lifecycle struct {
	Deprecated, Sunset, Released map[string]time.Time
}

// Retired reports whether v is retired at now: its sunset has come.
func (v Version) Retired(now time.Time) bool {
	return !v.Sunset.IsZero() && !now.Before(v.Sunset)
}

// Versions are the versions the partner API serves, oldest first.
type Versions []Version

// NewVersions combines the versions the API serves (oldest first) with
// the lifecycle dates of the configuration, and refuses, naming every
// problem at once: a version that is not served, a sunset without a
// deprecation, a sunset less than MinDeprecationNotice after its
// deprecation, a sunset for every version (callers of a retired version
// are pointed to one that stays), and a version that removes fields
// without a release date (the transition period counts from it).
// A release date of the configuration replaces the table's.
func NewVersions(served []Served, l Lifecycle) (Versions, error) {
	var problems []error
	names := make([]string, len(served))
	for i, s := range served {
		names[i] = s.Name
	}
	known := strings.Join(names, ", ")
	for _, setting := range []struct {
		name  string
		dates map[string]time.Time
	}{{"GATEHOUSE_API_DEPRECATED", l.Deprecated}, {"GATEHOUSE_API_SUNSET", l.Sunset}, {"GATEHOUSE_API_RELEASED", l.Released}} {
		for _, v := range sortedKeys(setting.dates) {
			if !slices.Contains(names, v) {
				problems = append(problems, fmt.Errorf("%s: unknown API version %s (this build serves %s)", setting.name, v, known))
			}
		}
	}
	vs := make(Versions, len(served))
	withSunset := 0
	for i, s := range served {
		name := s.Name
		v := Version{Name: name, Released: s.Released, Deprecated: l.Deprecated[name], Sunset: l.Sunset[name]}
		if r, ok := l.Released[name]; ok {
			v.Released = r
		}
		if len(s.Removes) > 0 && v.Released.IsZero() {
			problems = append(problems, fmt.Errorf("%s removes %s but has no release date; set it in GATEHOUSE_API_RELEASED", name, strings.Join(s.Removes, ", ")))
		}
		for _, f := range s.Removes {
			v.Removed = append(v.Removed, RemovedField{Name: f, Removal: RemovalDate(v.Released)})
		}
		vs[i] = v
		if v.Sunset.IsZero() {
			continue
		}
		withSunset++
		switch {
		case v.Deprecated.IsZero():
			problems = append(problems, fmt.Errorf("GATEHOUSE_API_SUNSET: %s has a sunset (%s) but no deprecation; announce it in GATEHOUSE_API_DEPRECATED at least 90 days before",
				name, day(v.Sunset)))
		case v.Sunset.Sub(v.Deprecated) < MinDeprecationNotice:
			problems = append(problems, fmt.Errorf("GATEHOUSE_API_SUNSET: %s retires on %s, %d days after its deprecation on %s; callers must be told at least 90 days before",
				name, day(v.Sunset), int(v.Sunset.Sub(v.Deprecated).Hours()/24), day(v.Deprecated)))
		}
	}
	if len(served) > 0 && withSunset == len(served) {
		problems = append(problems, errors.New("GATEHOUSE_API_SUNSET: every version has a sunset; leave at least one without, for callers of the retired ones to move to"))
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return vs, nil
}

// Get returns the version called name.
func (vs Versions) Get(name string) (Version, bool) {
	for _, v := range vs {
		if v.Name == name {
			return v, true
		}
	}
	return Version{}, false
}

// Current is the newest version not retired at now: the one callers of a
// retired version are told to use.
func (vs Versions) Current(now time.Time) string {
	for i := len(vs) - 1; i >= 0; i-- {
		if !vs[i].Retired(now) {
			return vs[i].Name
		}
	}
	return ""
}

// RetiredMessage is the detail of the 410 a retired version answers with:
// "API version v1 was retired on 2026-12-31; use v2".
func (vs Versions) RetiredMessage(v Version, now time.Time) string {
	return fmt.Sprintf("API version %s was retired on %s; use %s", v.Name, day(v.Sunset), vs.Current(now))
}

func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

func sortedKeys(m map[string]time.Time) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
