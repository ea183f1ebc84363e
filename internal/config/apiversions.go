package config

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

var apiVersion = regexp.MustCompile(`^v[0-9]+$`)

// ParseVersionDates reads GATEHOUSE_API_DEPRECATED / GATEHOUSE_API_SUNSET:
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
