package app_test

import (
	"context"
	"testing"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
)

// The server's SQLite connections run with GATEHOUSE_SQLITE_SYNC: FULL (2)
// unless it says normal (1).
func TestServerSQLiteSync(t *testing.T) {
	for _, tc := range []struct {
		setting string
		want    int
	}{{"", 2}, {"full", 2}, {"normal", 1}} {
		t.Run("setting="+tc.setting, func(t *testing.T) {
			e := apptest.Start(t, testenv.Backend{Name: "sqlite"}, func(c *config.Config) {
				if tc.setting != "" {
					c.Database.SQLiteSync = tc.setting
				}
			})
			var got int
			if err := e.App.DB.SQL.QueryRowContext(context.Background(), "PRAGMA synchronous").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("PRAGMA synchronous = %d, want %d", got, tc.want)
			}
		})
	}
}
