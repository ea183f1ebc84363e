package phases

import (
	"context"
	"path/filepath"
	"testing"

	"gatehouse/cmd/gatehouse-bench/internal/bench"
)

// The harness's second writer on gatehouse's SQLite database opens it with
// the synchronous setting gatehouse runs with (the floors' own openers are
// checked in package floor).
func TestSecondWriterUsesTheServersSync(t *testing.T) {
	for sync, want := range map[string]int{bench.DefaultSQLiteSync: 2, "normal": 1} {
		t.Run(sync, func(t *testing.T) {
			db, dialect, err := openOutbox("sqlite:"+filepath.Join(t.TempDir(), "w.db"), sync)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var got int
			if err := db.QueryRowContext(context.Background(), "PRAGMA synchronous").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if dialect != "sqlite" || got != want {
				t.Fatalf("dialect %q, PRAGMA synchronous = %d, want sqlite and %d", dialect, got, want)
			}
		})
	}
}
