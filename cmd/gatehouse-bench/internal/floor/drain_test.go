package floor

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
)

// The drain floors deliver every message once to the sink: the bare
// client's and the minimal outbox loop's on SQLite.
func TestDrainDeliversEveryMessage(t *testing.T) {
	for _, mode := range []string{"post", "outbox-sqlite"} {
		t.Run(mode, func(t *testing.T) {
			var got atomic.Int64
			sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				got.Add(1)
				w.WriteHeader(http.StatusNoContent)
			}))
			defer sink.Close()
			const n = 37 // not a multiple of the claim's batch
			args := []string{"-mode", mode, "-sink", sink.URL, "-n", strconv.Itoa(n), "-workers", "3", "-sqlite", filepath.Join(t.TempDir(), "o.db")}
			if err := RunDrain(context.Background(), args); err != nil {
				t.Fatal(err)
			}
			if got.Load() != n {
				t.Fatalf("the sink received %d messages, want %d", got.Load(), n)
			}
		})
	}
}
