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
	// Deprecated is when the version was (or will be) announced as
	// deprecated; zero when it is not.
	Deprecated time.Time
	// Sunset is when the version retires; zero when no date is set.
	Sunset time.Time
}

// Retired reports whether v is retired at now: its sunset has come.
func (v Version) Retired(now time.Time) bool {
	return !v.Sunset.IsZero() && !now.Before(v.Sunset)
}

// Versions are the versions the partner API serves, oldest first.
type Versions []Version

// NewVersions combines the versions the API serves (oldest first) with
// the deprecation and sunset dates of the configuration
// (GATEHOUSE_API_DEPRECATED, GATEHOUSE_API_SUNSET), and refuses, naming
// every problem at once: a version that is not served, a sunset without a
// deprecation, a sunset less than MinDeprecationNotice after its
// deprecation, and a sunset for every version (callers of a retired
// version are pointed to one that stays).
func NewVersions(served []string, deprecated, sunset map[string]time.Time) (Versions, error) {
	var problems []error
	known := strings.Join(served, ", ")
	for _, setting := range []struct {
		name  string
		dates map[string]time.Time
	}{{"GATEHOUSE_API_DEPRECATED", deprecated}, {"GATEHOUSE_API_SUNSET", sunset}} {
		for _, v := range sortedKeys(setting.dates) {
			if !slices.Contains(served, v) {
				problems = append(problems, fmt.Errorf("%s: unknown API version %s (this build serves %s)", setting.name, v, known))
			}
		}
	}
	vs := make(Versions, len(served))
	withSunset := 0
	for i, name := range served {
		v := Version{Name: name, Deprecated: deprecated[name], Sunset: sunset[name]}
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
