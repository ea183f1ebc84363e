package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerclient"
)

// privateRedis is a redis-server child process on its own port.
type privateRedis struct {
	port int
	cmd  *exec.Cmd
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (r *privateRedis) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

// start runs redis-server on r.port and waits until it answers.
func (r *privateRedis) start(t *testing.T) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if testenv.Required() {
			t.Fatal("redis-server is not installed")
		}
		t.Skip("redis-server is not installed")
	}
	r.cmd = exec.Command(bin, "--port", fmt.Sprint(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.port)})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("private redis-server did not come up")
		}
		time.Sleep(20 * time.Millisecond) // polling a child process coming up
	}
}

// stop kills the server and waits for it to exit.
func (r *privateRedis) stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		r.cmd = nil
	}
}

// TestRedisOutage: with Redis stopped under a running service, signed
// partner calls answer 503/6000 quickly (never a hang, never an unchecked
// request), tickets keep working, readiness reports the outage; when Redis
// returns, everything recovers without restarting gatehouse.
func TestRedisOutage(t *testing.T) {
	rd := &privateRedis{port: freePort(t)}
	rd.start(t)
	t.Cleanup(rd.stop)
	b := testenv.Backend{Name: "postgres", DatabaseURL: testenv.PostgresURL(t), RedisURL: rd.url(), KeyPrefix: testenv.KeyPrefix(t)}
	e := apptest.Start(t, b)
	ctx := context.Background()

	app, sec, err := e.App.Partners.Create(ctx, partner.CreateInput{AppName: "Resilient"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.App.Orders.Create(ctx, order.CreateInput{AppID: app.ID, OrderNo: "R-1", Amount: "1.00"}); err != nil {
		t.Fatal(err)
	}
	client := partnerclient.New(e.PublicURL, app.AppKey, sec.AppSecret)
	if _, err := client.OrderV1(ctx, "R-1"); err != nil {
		t.Fatalf("before the outage: %v", err)
	}

	rd.stop()

	// Signed calls fail closed, fast, in the envelope; measured in parallel
	// so that one slow answer cannot hide behind another.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var slowest time.Duration
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_, err := client.OrderV1(ctx, "R-1")
			took := time.Since(start)
			var apiErr *partnerclient.APIError
			if !errors.As(err, &apiErr) || apiErr.HTTPStatus != http.StatusServiceUnavailable || apiErr.Code != 6000 {
				t.Errorf("signed call with Redis down: %v, want HTTP 503 code 6000", err)
			}
			mu.Lock()
			slowest = max(slowest, took)
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("slowest signed answer with Redis down: %v", slowest)
	// A bound against hanging, not a speed claim: the store's own deadline
	// is 1 s; a loaded CI machine gets headroom.
	if slowest > 3*time.Second {
		t.Fatalf("signed calls took up to %v with Redis down", slowest)
	}

	// Tickets do not depend on Redis.
	r := e.Do(t, "POST", e.PublicURL+"/api/tickets", `{"title":"still works"}`, apptest.JSONBody...)
	if r.Status != http.StatusCreated {
		t.Fatalf("ticket create with Redis down: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "GET", e.PublicURL+"/readyz", ""); r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), `"kv":"unavailable"`) {
		t.Fatalf("readyz with Redis down: %d %s", r.Status, r.Body)
	}

	// Redis comes back on the same address: recovery without a restart.
	rd.start(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := client.OrderV1(ctx, "R-1")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("signed calls did not recover after Redis returned: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // polling for recovery
	}
	if r := e.Do(t, "GET", e.PublicURL+"/readyz", ""); r.Status != http.StatusOK {
		t.Fatalf("readyz after recovery: %d %s", r.Status, r.Body)
	}
}
