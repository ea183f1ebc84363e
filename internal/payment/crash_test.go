package payment_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/order"
	"gatehouse/internal/payment/paymenttest"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
)

// TestProcessKilledBetweenYesAndCommit kills a real gatehouse process
// (SIGKILL) after the provider said yes and while its commit waits for a
// row lock the test holds, then starts a new process and refunds again.
//
// On Postgres + Redis the stored yes survives the process: the refund
// completes without a second call. In embedded mode the in-process store
// dies with the process: the second refundOrder calls again, with the same
// Idempotency-Key, so that the provider does not refund twice (the
// documented limit of a single process without Redis).
func TestProcessKilledBetweenYesAndCommit(t *testing.T) {
	bin := buildGatehouse(t)
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		dataDir := t.TempDir()
		dbURL := b.DatabaseURL
		if b.Embedded() {
			dbURL = "sqlite:" + filepath.Join(dataDir, "gatehouse.db")
		}
		db := storetest.OpenURL(t, dbURL)
		app := db.PartnerApp.Create().SetAppName("shop").SetAppKey("shop").SetSecret([]byte{1}).SaveX(ctx)
		o, err := order.NewService(db).Create(ctx, order.CreateInput{AppID: app.ID, OrderNo: "KILL-1", Amount: "12.34", Status: order.Paid})
		if err != nil {
			t.Fatal(err)
		}
		provider := paymenttest.New(t)
		const adminKey = "crash-test-admin-key-0123456789"
		env := append(os.Environ(),
			"GATEHOUSE_DATABASE_URL="+dbURL,
			"GATEHOUSE_REDIS_URL="+b.RedisURL,
			"GATEHOUSE_REDIS_PREFIX="+b.KeyPrefix,
			"GATEHOUSE_MASTER_KEY="+base64.StdEncoding.EncodeToString(secret.RandomBytes(32)),
			"GATEHOUSE_JWT_SECRET="+base64.StdEncoding.EncodeToString(secret.RandomBytes(32)),
			"GATEHOUSE_ADDR=127.0.0.1:0",
			"GATEHOUSE_ADMIN_ADDR=127.0.0.1:0",
			"GATEHOUSE_DATA_DIR="+dataDir,
			"GATEHOUSE_BOOTSTRAP_API_KEY="+adminKey,
			"GATEHOUSE_PAYMENT_URL="+provider.URL,
			"GATEHOUSE_PAYMENT_API_KEY="+provider.APIKey,
			"GATEHOUSE_PAYMENT_SECRET="+provider.Secret,
			"GATEHOUSE_LOG_LEVEL=info",
		)

		first := startProcess(t, bin, env)
		unlock := lockOrderRow(t, db, o.OrderNo, b.Embedded())
		done := make(chan struct{})
		go func() {
			defer close(done)
			// The answer never comes: the process is killed.
			_, _ = refundOverHTTP(first.adminURL, adminKey, o.OrderNo)
		}()
		eventually(t, "the provider's yes reached gatehouse", func() bool {
			return strings.Contains(first.logs.String(), "the provider accepted the refund")
		})
		if !b.Embedded() {
			// The yes is stored (Redis) and the commit waits for our lock.
			eventually(t, "the commit waits for the row lock", func() bool {
				var n int
				_ = db.SQL.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE 'UPDATE%orders%'`).Scan(&n)
				return n == 1
			})
		}
		first.kill()
		<-done
		unlock()
		if st := orderStatus(t, db, o.OrderNo); st != order.Paid {
			t.Fatalf("order %s after the kill: the commit went through", st)
		}

		second := startProcess(t, bin, env)
		got, err := refundOverHTTP(second.adminURL, adminKey, o.OrderNo)
		if err != nil || !strings.Contains(got, `"status":"REFUNDED"`) {
			t.Fatalf("refund after the restart: %s %v", got, err)
		}
		calls := provider.Calls()
		want := 1
		if b.Embedded() {
			want = 2
		}
		if len(calls) != want {
			t.Fatalf("%d provider calls, want %d", len(calls), want)
		}
		for _, c := range calls {
			if c.IdempotencyKey != "refund-KILL-1" || c.Amount != "12.34" {
				t.Errorf("call %+v", c)
			}
		}
		for _, p := range provider.Problems() {
			t.Error(p)
		}
	})
}

// lockOrderRow holds a lock that makes gatehouse's update of the order wait:
// the row lock on Postgres, the write lock of the SQLite file.
func lockOrderRow(t *testing.T, db *store.DB, orderNo string, embedded bool) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lock := `BEGIN`
	if embedded {
		lock = `BEGIN IMMEDIATE`
	}
	if _, err := conn.ExecContext(ctx, lock); err != nil {
		t.Fatal(err)
	}
	if !embedded {
		var id int
		if err := conn.QueryRowContext(ctx, `SELECT id FROM orders WHERE order_no = $1 FOR UPDATE`, orderNo).Scan(&id); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		_, _ = conn.ExecContext(ctx, `ROLLBACK`)
		_ = conn.Close()
	}
}

func orderStatus(t *testing.T, db *store.DB, orderNo string) order.Status {
	t.Helper()
	o, err := order.NewService(db).Get(context.Background(), orderNo)
	if err != nil {
		t.Fatal(err)
	}
	return o.Status
}

func refundOverHTTP(adminURL, key, orderNo string) (string, error) {
	body, _ := json.Marshal(map[string]any{
		"query":     `mutation($no: String!) { refundOrder(orderNo: $no) { orderNo status } }`,
		"variables": map[string]any{"no": orderNo},
	})
	req, _ := http.NewRequest(http.MethodPost, adminURL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// process is a gatehouse serve child process.
type process struct {
	cmd      *exec.Cmd
	logs     *apptest.SyncBuffer
	adminURL string
}

var adminAddrRE = regexp.MustCompile(`msg=listening .*admin=(127\.0\.0\.1:\d+)`)

func startProcess(t *testing.T, bin string, env []string) *process {
	t.Helper()
	p := &process{logs: &apptest.SyncBuffer{}}
	p.cmd = exec.Command(bin, "serve")
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill() })
	eventually(t, "gatehouse is listening", func() bool { return adminAddrRE.MatchString(p.logs.String()) })
	p.adminURL = "http://" + adminAddrRE.FindStringSubmatch(p.logs.String())[1]
	return p
}

func (p *process) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// eventually polls cond until it holds, for at most 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// buildGatehouse compiles the gatehouse binary into a temp dir.
func buildGatehouse(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gatehouse")
	if out, err := exec.Command("go", "build", "-o", bin, "gatehouse/cmd/gatehouse").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
