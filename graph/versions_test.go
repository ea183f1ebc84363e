package graph_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"gatehouse/graph/graphtest"
	"gatehouse/graph/scalar"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerapi"
)

// TestAPIVersions: every version of the partner API with its deprecation,
// sunset, retirement and calls of the last 30 UTC days (today included).
func TestAPIVersions(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		today := time.Now().UTC().Truncate(24 * time.Hour)
		deprecated, sunset := today.AddDate(0, 0, -120), today.AddDate(0, 0, -1)
		a := graphtest.StartAdmin(t, b, func(c *config.Config) {
			c.API.Deprecated = "v1=" + deprecated.Format(time.DateOnly)
			c.API.Sunset = "v1=" + sunset.Format(time.DateOnly)
			c.API.Released = "v3=2026-12-01"
		})
		ctx := context.Background()
		db := a.App.DB
		app1 := db.PartnerApp.Create().SetAppName("a").SetAppKey("a").SetSecret([]byte{1}).SaveX(ctx)
		app2 := db.PartnerApp.Create().SetAppName("b").SetAppKey("b").SetSecret([]byte{1}).SaveX(ctx)
		day := func(ago int) string { return today.AddDate(0, 0, -ago).Format(time.DateOnly) }
		for _, u := range []struct {
			app     int
			version string
			ago     int
			count   int64
		}{
			{app1.ID, "v1", 0, 3}, {app2.ID, "v1", 0, 4}, {app1.ID, "v1", 29, 2}, {app1.ID, "v1", 30, 100},
			{app2.ID, "v2", 1, 5},
		} {
			db.APIUsage.Create().SetAppID(u.app).SetVersion(u.version).SetDay(day(u.ago)).SetCount(u.count).ExecX(ctx)
		}
		res := a.GQL(t, `{ apiVersions { name released removedFields { name removal } deprecation sunset retired callCountLast30Days } }`, nil)
		if len(res.Errors) > 0 {
			t.Fatalf("%s", res.Body)
		}
		got, _ := res.Data["apiVersions"].([]any)
		if len(got) != len(partnerapi.PartnerAPI) {
			t.Fatalf("%d versions, want %d: %s", len(got), len(partnerapi.PartnerAPI), res.Body)
		}
		want := map[string]map[string]any{
			"v1": {"deprecation": deprecated.Format(scalar.TimeFormat), "sunset": sunset.Format(scalar.TimeFormat), "retired": true, "callCountLast30Days": "9", "released": "2026-11-22T00:00:00.000Z"},
			"v2": {"deprecation": nil, "sunset": nil, "retired": false, "callCountLast30Days": "5", "released": "2026-11-22T00:00:00.000Z"},
			"v3": {"deprecation": nil, "sunset": nil, "retired": false, "callCountLast30Days": "0", "released": "2026-12-01T00:00:00.000Z"},
		}
		removed := map[string]string{"v1": "[]", "v2": "[]", "v3": `[{"name":"customer_info","removal":"2027-06-01T00:00:00.000Z"}]`}
		for i, v := range partnerapi.PartnerAPI {
			row := got[i].(map[string]any)
			if row["name"] != v.Name {
				t.Fatalf("version %d is %v, want %s", i, row["name"], v.Name)
			}
			if b, _ := json.Marshal(row["removedFields"]); string(b) != removed[v.Name] {
				t.Errorf("%s.removedFields = %s, want %s", v.Name, b, removed[v.Name])
			}
			for k, w := range want[v.Name] {
				if row[k] != w {
					t.Errorf("%s.%s = %v, want %v", v.Name, k, row[k], w)
				}
			}
		}
	})
}
