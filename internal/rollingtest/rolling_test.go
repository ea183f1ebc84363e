// Package rollingtest_test restarts gatehouse replicas behind HAProxy
// under load. It builds the binary and starts processes, so it is a
// package of its own: `make test` runs it in parallel with the rest.
package rollingtest_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/fleet"
	"gatehouse/rest/partnerclient"
)

// TestRollingRestartLosesNothing: two gatehouse processes on Postgres (a
// fresh database) and a private Redis, behind HAProxy checking /readyz,
// serve a steady signed load (the partner order query) while each is
// stopped with SIGTERM and started again in turn, with the default drain.
// Every request succeeds, and each process exits 0.
func TestRollingRestartLosesNothing(t *testing.T) {
	t.Parallel()
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		if testenv.Required() {
			t.Fatalf("haproxy is not installed (required in CI; apt-get install haproxy): %v", err)
		}
		t.Skipf("haproxy is not installed: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "gatehouse")
	if out, err := exec.Command("go", "build", "-o", bin, "gatehouse/cmd/gatehouse").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	redis := fleet.StartRedis(t)
	b := testenv.Backend{Name: "postgres", DatabaseURL: testenv.PostgresURL(t), RedisURL: redis.URL(), KeyPrefix: "rolling:"}
	masterKey := base64.StdEncoding.EncodeToString(secret.RandomBytes(32))
	jwtSecret := base64.StdEncoding.EncodeToString(secret.RandomBytes(32))

	// The partner app and its order, made in-process on the same storage.
	e := apptest.Start(t, b, func(c *config.Config) { c.Auth.MasterKeyB64, c.Auth.JWTSecretRaw = masterKey, jwtSecret })
	ctx := context.Background()
	pa, sec, err := e.App.Partners.Create(ctx, partner.CreateInput{AppName: "rolling"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.App.Orders.Create(ctx, order.CreateInput{AppID: pa.ID, OrderNo: "SO-ROLL", Amount: "9.99"}); err != nil {
		t.Fatal(err)
	}

	env := append(os.Environ(), "GATEHOUSE_DATABASE_URL="+b.DatabaseURL, "GATEHOUSE_REDIS_URL="+b.RedisURL,
		"GATEHOUSE_REDIS_PREFIX="+b.KeyPrefix, "GATEHOUSE_MASTER_KEY="+masterKey, "GATEHOUSE_JWT_SECRET="+jwtSecret,
		"GATEHOUSE_LOG_LEVEL=info", "GATEHOUSE_SHUTDOWN_DRAIN=") // the default drain
	replicas := []*replica{{addr: freeAddr(t)}, {addr: freeAddr(t)}}
	for _, r := range replicas {
		r.start(t, bin, env)
	}
	for _, r := range replicas {
		r.waitReady(t)
	}

	lb := startHAProxy(t, haproxy, replicas)
	lb.waitUp(t, 2)

	// Steady signed load through the balancer.
	var ok, failed atomic.Int64
	var failures sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second}
	for range 4 {
		wg.Go(func() {
			for i := 0; i < 100_000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				q, err := partnerclient.Signer{AppKey: pa.AppKey, AppSecret: sec.AppSecret}.Sign(url.Values{"order_no": {"SO-ROLL"}})
				if err != nil {
					t.Error(err)
					return
				}
				resp, err := client.Get(lb.url + "/api/v1/orders/query?" + q.Encode())
				if err != nil {
					failed.Add(1)
					failures.Store(err.Error(), true)
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "SO-ROLL") {
					failed.Add(1)
					failures.Store(fmt.Sprintf("%d %.200s", resp.StatusCode, body), true)
					continue
				}
				ok.Add(1)
				time.Sleep(5 * time.Millisecond) // a steady rate, not a flood
			}
		})
	}
	waitCount := func(n int64) {
		deadline := time.Now().Add(30 * time.Second)
		for ok.Load() < n && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitCount(50)
	for i, r := range replicas {
		before := ok.Load()
		if code := r.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("replica %d exited %d after SIGTERM:\n%s", i, code, r.logs())
		}
		r.start(t, bin, env)
		r.waitReady(t)
		lb.waitUp(t, 2)
		waitCount(before + 50)
	}
	close(stop)
	wg.Wait()
	t.Logf("%d requests served, %d failed through two rolling restarts", ok.Load(), failed.Load())
	if failed.Load() != 0 {
		var msgs []string
		failures.Range(func(k, _ any) bool { msgs = append(msgs, k.(string)); return true })
		t.Fatalf("%d of %d requests failed during the rolling restart: %s", failed.Load(), failed.Load()+ok.Load(), strings.Join(msgs, "; "))
	}
	if ok.Load() < 150 {
		t.Fatalf("only %d requests served: the load did not run through the restarts", ok.Load())
	}
}

// replica is one gatehouse process.
type replica struct {
	addr string // public listener

	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  strings.Builder
	code int
}

func (r *replica) start(t *testing.T, bin string, env []string) {
	t.Helper()
	r.cmd = exec.Command(bin, "serve")
	r.cmd.Env = append(env, "GATEHOUSE_ADDR="+r.addr, "GATEHOUSE_ADMIN_ADDR=127.0.0.1:0")
	pipe, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.cmd.Stderr = r.cmd.Stdout
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	r.done = done
	cmd := r.cmd
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			r.mu.Lock()
			r.out.WriteString(sc.Text() + "\n")
			r.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pipe)
		_ = cmd.Wait()
		r.mu.Lock()
		r.code = cmd.ProcessState.ExitCode()
		r.mu.Unlock()
		close(done)
	}()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	})
}

func (r *replica) logs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// waitReady waits until the process's own /readyz answers 200.
func (r *replica) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-r.done:
			t.Fatalf("gatehouse exited at start:\n%s", r.logs())
		default:
		}
		resp, err := http.Get("http://" + r.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("gatehouse on %s not ready within 90 s:\n%s", r.addr, r.logs())
		}
		time.Sleep(50 * time.Millisecond) // waiting for a child process to start
	}
}

// stop signals the process and returns its exit code.
func (r *replica) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	_ = r.cmd.Process.Signal(sig)
	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("gatehouse did not exit within 60 s of %s:\n%s", sig, r.logs())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.code
}

// balancer is a haproxy process of the test.
type balancer struct {
	url, stats string
}

// startHAProxy runs haproxy in front of the replicas: round robin,
// `option httpchk GET /readyz` every 200 ms, down after 2 failures, up
// after 2 successes; no retries (retries would hide the requests a replica
// refused).
func startHAProxy(t *testing.T, bin string, rs []*replica) *balancer {
	t.Helper()
	front, stats := freeAddr(t), freeAddr(t)
	var servers strings.Builder
	for i, r := range rs {
		fmt.Fprintf(&servers, "  server g%d %s check\n", i+1, r.addr)
	}
	cfg := fmt.Sprintf(`global
  maxconn 2000
defaults
  mode http
  retries 0
  timeout connect 2s
  timeout client 30s
  timeout server 30s
frontend public
  bind %s
  default_backend gatehouse
frontend stats
  bind %s
  stats enable
  stats uri /stats
backend gatehouse
  balance roundrobin
  option httpchk GET /readyz
  http-check expect status 200
  default-server inter 200ms fall 2 rise 2
%s`, front, stats, servers.String())
	dir := t.TempDir()
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-f", path, "-db")
	logf, err := os.Create(filepath.Join(dir, "haproxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	return &balancer{url: "http://" + front, stats: "http://" + stats + "/stats;csv"}
}

// waitUp waits until haproxy counts n servers UP.
func (b *balancer) waitUp(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	last := ""
	for {
		resp, err := http.Get(b.stats)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = string(body)
			up := 0
			lines := strings.Split(last, "\n")
			if len(lines) > 0 {
				head := strings.Split(strings.TrimPrefix(lines[0], "# "), ",")
				col := -1
				for i, h := range head {
					if h == "status" {
						col = i
					}
				}
				for _, l := range lines[1:] {
					f := strings.Split(l, ",")
					if col >= 0 && len(f) > col && f[0] == "gatehouse" && strings.HasPrefix(f[1], "g") && f[col] == "UP" {
						up++
					}
				}
			}
			if up >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy does not see %d servers UP within 60 s: %v\n%s", n, err, last)
		}
		time.Sleep(50 * time.Millisecond) // waiting for haproxy's health checks
	}
}

// freeAddr is a loopback host:port that was free just now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
