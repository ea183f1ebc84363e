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
	served := []Served{{Name: "v1"}, {Name: "v2"}}
	vs, err := NewVersions(served, Lifecycle{Deprecated: map[string]time.Time{"v1": d("2026-01-01")}, Sunset: map[string]time.Time{"v1": d("2026-04-01")}})
	if err != nil || len(vs) != 2 || vs[0].Name != "v1" || !vs[0].Sunset.Equal(d("2026-04-01")) || !vs[1].Sunset.IsZero() {
		t.Fatalf("90 days exactly: %+v %v", vs, err)
	}
	if vs, err := NewVersions(served, Lifecycle{}); err != nil || len(vs) != 2 {
		t.Fatalf("no dates: %+v %v", vs, err)
	}

	// Every problem at once.
	_, err = NewVersions(served, Lifecycle{
		Deprecated: map[string]time.Time{"v3": d("2026-01-01"), "v2": d("2026-01-01")},
		Sunset:     map[string]time.Time{"v9": d("2026-12-01"), "v1": d("2026-12-01"), "v2": d("2026-03-31")},
		Released:   map[string]time.Time{"v5": d("2026-01-01")},
	})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"GATEHOUSE_API_DEPRECATED: unknown API version v3 (this build serves v1, v2)",
		"GATEHOUSE_API_RELEASED: unknown API version v5",
		"GATEHOUSE_API_SUNSET: unknown API version v9",
		"GATEHOUSE_API_SUNSET: v1 has a sunset (2026-12-01) but no deprecation",
		"GATEHOUSE_API_SUNSET: v2 retires on 2026-03-31, 89 days after its deprecation on 2026-01-01; callers must be told at least 90 days before",
		"every version has a sunset",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	_, err = NewVersions(append(served, Served{Name: "v3", Removes: []string{"customer_info"}}), Lifecycle{})
	if err == nil || err.Error() != "v3 removes customer_info but has no release date; set it in GATEHOUSE_API_RELEASED" {
		t.Fatalf("removal without a release date: %v", err)
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

// TestRemovedFields: a version carries the fields it removes for 6 months
// from its release (the table's date, or the configuration's), with the
// Deprecated-Fields header; from the removal date on, neither.
func TestRemovedFields(t *testing.T) {
	table := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	served := []Served{{Name: "v2"}, {Name: "v3", Released: table, Removes: []string{"customer_info", "pay_time"}}}
	vs, err := NewVersions(served, Lifecycle{})
	if err != nil {
		t.Fatal(err)
	}
	v3, _ := vs.Get("v3")
	removal := time.Date(2027, 5, 27, 0, 0, 0, 0, time.UTC)
	if !v3.Released.Equal(table) || len(v3.Removed) != 2 || !v3.Removed[0].Removal.Equal(removal) {
		t.Fatalf("v3 %+v", v3)
	}
	before := removal.Add(-time.Nanosecond)
	if !v3.Carries("customer_info", before) || v3.Carries("customer_info", removal) || !v3.Carries("order_no", removal) {
		t.Fatal("customer_info is not carried exactly until the removal date")
	}
	if got := v3.DeprecatedFields(before); got != `customer_info; removal="2027-05-27", pay_time; removal="2027-05-27"` {
		t.Fatalf("Deprecated-Fields %q", got)
	}
	if got := v3.DeprecatedFields(removal); got != "" {
		t.Fatalf("Deprecated-Fields after the removal %q", got)
	}
	v2, _ := vs.Get("v2")
	if v2.DeprecatedFields(before) != "" || !v2.Released.IsZero() {
		t.Fatalf("v2 %+v", v2)
	}

	// The configuration moves the release, and the removal with it.
	vs, err = NewVersions(served, Lifecycle{Released: map[string]time.Time{"v3": time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}})
	if err != nil {
		t.Fatal(err)
	}
	v3, _ = vs.Get("v3")
	if got := v3.DeprecatedFields(removal); got != `customer_info; removal="2027-06-01", pay_time; removal="2027-06-01"` {
		t.Fatalf("released 2026-12-01: %q", got)
	}
}
