package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// APIVersions sets the lifecycle dates of partner API versions: release,
// deprecation, retirement.
type APIVersions struct {
	Released   string `flag:"api-released" usage:"release days of partner API versions, replacing the version table's: v3=2026-12-01,…" doc:"release days of partner API versions, v3=2026-12-01,…, replacing those of the version table: the fields a version removes stay in its replies for 6 months from its release (see [versioning](versioning.md))"`
	Deprecated string `flag:"api-deprecated" usage:"partner API versions announced as deprecated: v1=2026-06-30,… (Deprecation header)" doc:"partner API versions announced as deprecated, v1=2026-06-30,… (date or RFC 3339): their replies carry Deprecation: @<unix>"`
	Sunset     string `flag:"api-sunset" usage:"retirement dates of partner API versions: v1=2026-12-31,… (Sunset header)" doc:"retirement dates, v1=2026-12-31,…: their replies carry Sunset: <HTTP-date>; from that instant the version answers 410 (at least 90 days after its deprecation; see [versioning](versioning.md))"`
}

// Validate checks the form of both lists (the 90-day rule is checked at
// start, see package partner).
func (a *APIVersions) Validate() error {
	var errs []error
	if _, err := ParseVersionDates(a.Released); err != nil {
		errs = append(errs, invalidf(a, &a.Released, "%w", err))
	}
	if _, err := ParseVersionDates(a.Deprecated); err != nil {
		errs = append(errs, invalidf(a, &a.Deprecated, "%w", err))
	}
	if _, err := ParseVersionDates(a.Sunset); err != nil {
		errs = append(errs, invalidf(a, &a.Sunset, "%w", err))
	}
	return errors.Join(errs...)
}

var apiVersion = regexp.MustCompile(`^v[0-9]+$`)

// ParseVersionDates reads GATEHOUSE_API_RELEASED, GATEHOUSE_API_DEPRECATED
// and GATEHOUSE_API_SUNSET:
// comma-separated VERSION=WHEN entries such as "v1=2026-06-30", where WHEN
// is a date (midnight UTC) or an RFC 3339 time. Empty: no entries.
func ParseVersionDates(s string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		v, when, ok := strings.Cut(entry, "=")
		v, when = strings.TrimSpace(v), strings.TrimSpace(when)
		if !ok || !apiVersion.MatchString(v) {
			return nil, fmt.Errorf("%q is not VERSION=DATE (e.g. v1=2026-06-30)", entry)
		}
		if _, dup := out[v]; dup {
			return nil, fmt.Errorf("version %s is given twice", v)
		}
		t, err := time.Parse(time.DateOnly, when)
		if err != nil {
			if t, err = time.Parse(time.RFC3339, when); err != nil {
				return nil, fmt.Errorf("%q: the date must be YYYY-MM-DD or RFC 3339", entry)
			}
		}
		out[v] = t.UTC()
	}
	return out, nil
}
