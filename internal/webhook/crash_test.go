package webhook_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/partner"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
)

// The crash test: 500 deliveries queued, the server killed with SIGKILL
// while attempts are in flight, restarted: every event arrives at least
// once. Attempts in flight at the kill are taken over when their leases
// run out (30 s).
func TestCrashAndRestartDeliversEverything(t *testing.T) {
	const (
		total     = 500
		killAfter = 150 // requests answered before the receiver starts holding them
	)
	pgURL := testenv.PostgresURL(t)
	bin := buildGatehouse(t)
	ctx := context.Background()

	// The receiver answers 200, except that after killAfter requests it
	// holds every request until the server has been killed: those
	// attempts are in flight when the process dies.
	var (
		mu       sync.Mutex
		seen     = map[string]int{}
		answered atomic.Int64
		held     atomic.Int64
		holding  atomic.Bool
	)
	release := make(chan struct{})
	holding.Store(true)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("webhook-id")
		if holding.Load() && answered.Load() >= killAfter {
			held.Add(1)
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return // the sender is dead: this attempt never completed
		}
		mu.Lock()
		seen[id]++
		mu.Unlock()
		answered.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	defer close(release)

	db, env := queueDeliveries(t, pgURL, rcv.URL+"/hook", total)
	succeeded := func() int { return countStatus(t, db, dispatch.StatusSuccess) }

	// First run: killed with SIGKILL mid-way.
	first := startServer(t, bin, env)
	waitFor(t, 60*time.Second, func() bool { return held.Load() >= 4 }, func() string {
		return fmt.Sprintf("answered %d, held %d: the server did not get mid-way\n%s", answered.Load(), held.Load(), first.logs.String())
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	holding.Store(false)
	done := succeeded()
	t.Logf("killed with %d deliveries succeeded, %d attempts in flight", done, held.Load())
	if done >= total {
		t.Fatalf("all %d deliveries succeeded before the kill: nothing was tested", done)
	}
	leased, err := db.WebhookDelivery.Query().Where(webhookdelivery.LeaseUntilNotNil(),
		webhookdelivery.StatusIn(dispatch.StatusPending, dispatch.StatusRetrying)).Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if leased == 0 {
		t.Fatal("no delivery was leased at the kill: nothing was in flight")
	}

	// Second run: everything is delivered, including the attempts the
	// dead process held leases for.
	second := startServer(t, bin, env)
	restart := time.Now()
	waitFor(t, 90*time.Second, func() bool { return succeeded() == total }, func() string {
		return fmt.Sprintf("%d of %d succeeded after the restart\n%s", succeeded(), total, second.logs.String())
	})
	t.Logf("all %d delivered %s after the restart (%d leased at the kill)", total, time.Since(restart).Round(time.Millisecond), leased)
	mu.Lock()
	distinct := len(seen)
	mu.Unlock()
	if distinct != total {
		t.Errorf("receiver saw %d distinct events, want %d", distinct, total)
	}

	// A graceful stop exits 0.
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- second.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("gatehouse after SIGTERM: %v\n%s", err, second.logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("gatehouse did not stop within 30 s of SIGTERM")
	}
}

// queueDeliveries migrates the database at pgURL, creates one app calling
// back callback, queues total deliveries for it, and returns the database
// and the environment a gatehouse process needs to deliver them.
func queueDeliveries(t *testing.T, pgURL, callback string, total int) (*store.DB, []string) {
	t.Helper()
	ctx := context.Background()
	masterKey := secret.RandomBytes(32)
	db, err := store.Open(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ps, err := partner.NewService(db.Client, masterKey)
	if err != nil {
		t.Fatal(err)
	}
	app, _, err := ps.Create(ctx, partner.CreateInput{AppName: "crash receiver", CallbackURL: callback})
	if err != nil {
		t.Fatal(err)
	}
	err = store.WithTx(ctx, db.Client, func(tx *ent.Tx) error {
		for i := range total {
			if _, err := webhook.Fanout(ctx, tx.Client(), webhook.Event{AppID: app.ID, Type: "test.crash", BizData: fmt.Appendf(nil, `{"n":%d}`, i)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"GATEHOUSE_DATABASE_URL="+pgURL,
		"GATEHOUSE_MASTER_KEY="+base64.StdEncoding.EncodeToString(masterKey),
		"GATEHOUSE_JWT_SECRET="+base64.StdEncoding.EncodeToString(secret.RandomBytes(32)),
		"GATEHOUSE_ADDR=127.0.0.1:0",
		"GATEHOUSE_ADMIN_ADDR=127.0.0.1:0",
		"GATEHOUSE_DATA_DIR="+t.TempDir(),
		"GATEHOUSE_REDIS_URL=",
		"GATEHOUSE_WEBHOOK_ALLOW_PRIVATE=true",
		"GATEHOUSE_LOG_LEVEL=info",
	)
	return db, env
}

// countStatus counts deliveries in status st.
func countStatus(t *testing.T, db *store.DB, st webhookdelivery.Status) int {
	t.Helper()
	n, err := db.WebhookDelivery.Query().Where(webhookdelivery.StatusEQ(st)).Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

type server struct {
	cmd  *exec.Cmd
	logs *syncBuffer
}

func startServer(t *testing.T, bin string, env []string) *server {
	t.Helper()
	s := &server{logs: &syncBuffer{}}
	s.cmd = exec.Command(bin, "serve")
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	})
	return s
}

// buildGatehouse compiles the gatehouse binary into a temp dir.
func buildGatehouse(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gatehouse")
	cmd := exec.Command("go", "build", "-o", bin, "gatehouse/cmd/gatehouse")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
