package partner

import (
	"strings"
	"testing"
	"time"
)

func TestNewVersions(t *testing.T) {
	d := func(s string) time.Time {
		t, err := time.Parse(time.DateOnly, s)
		if err != nil {
			panic(err)
		}
		return t
	}
	served := []string{"v1", "v2"}
	vs, err := NewVersions(served, map[string]time.Time{"v1": d("2026-01-01")}, map[string]time.Time{"v1": d("2026-04-01")})
	if err != nil || len(vs) != 2 || vs[0].Name != "v1" || !vs[0].Sunset.Equal(d("2026-04-01")) || !vs[1].Sunset.IsZero() {
		t.Fatalf("90 days exactly: %+v %v", vs, err)
	}
	if vs, err := NewVersions(served, nil, nil); err != nil || len(vs) != 2 {
		t.Fatalf("no dates: %+v %v", vs, err)
	}

	// Every problem at once.
	_, err = NewVersions(served,
		map[string]time.Time{"v3": d("2026-01-01"), "v2": d("2026-01-01")},
		map[string]time.Time{"v9": d("2026-12-01"), "v1": d("2026-12-01"), "v2": d("2026-03-31")})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"GATEHOUSE_API_DEPRECATED: unknown API version v3 (this build serves v1, v2)",
		"GATEHOUSE_API_SUNSET: unknown API version v9",
		"GATEHOUSE_API_SUNSET: v1 has a sunset (2026-12-01) but no deprecation",
		"GATEHOUSE_API_SUNSET: v2 retires on 2026-03-31, 89 days after its deprecation on 2026-01-01; callers must be told at least 90 days before",
		"every version has a sunset",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestVersionRetirement(t *testing.T) {
	sunset := time.Date(2026, 12, 31, 12, 0, 0, 0, time.UTC)
	vs := Versions{{Name: "v1", Deprecated: sunset.AddDate(0, -6, 0), Sunset: sunset}, {Name: "v2"}, {Name: "v3", Deprecated: sunset.AddDate(0, -6, 0), Sunset: sunset.AddDate(0, 1, 0)}}
	v1, _ := vs.Get("v1")
	if v1.Retired(sunset.Add(-time.Nanosecond)) || !v1.Retired(sunset) {
		t.Fatal("retirement is not at the sunset instant")
	}
	// v3 still runs: it is the one to use; once it retires too, v2.
	if got := vs.RetiredMessage(v1, sunset); got != "API version v1 was retired on 2026-12-31; use v3" {
		t.Fatalf("%q", got)
	}
	if got := vs.Current(sunset.AddDate(0, 2, 0)); got != "v2" {
		t.Fatalf("current after v3's sunset: %q", got)
	}
	if _, ok := vs.Get("v4"); ok {
		t.Fatal("v4 found")
	}
}
