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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

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
// fresh database) and a private Redis, behind HAProxy running compose.yaml's
// configuration (GET /readyz every second; retries off), serve a steady
// signed load (the partner order query) while each is stopped with SIGTERM
// and started again in turn, with the default drain. Every request
// succeeds, and each process exits 0.
func TestRollingRestartLosesNothing(t *testing.T) {
	t.Parallel()
	haproxy := haproxyBinary(t)
	bin := gatehouseBinary(t)
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
	replicas := []*replica{{addr: freeAddr(t), admin: freeAddr(t)}, {addr: freeAddr(t), admin: freeAddr(t)}}
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

// binary is the gatehouse command, built once for the package's tests
// (they only run it, so they share it).
var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// gatehouseBinary builds cmd/gatehouse on first use and returns its path.
func gatehouseBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		if binary.dir, binary.err = os.MkdirTemp("", "rollingtest-bin-"); binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "gatehouse")
		if out, err := exec.Command("go", "build", "-o", binary.path, "gatehouse/cmd/gatehouse").CombinedOutput(); err != nil {
			binary.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
	os.Exit(code)
}

// haproxyBinary is haproxy's path, or skips (fails in CI) without it.
func haproxyBinary(t *testing.T) string {
	t.Helper()
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		if testenv.Required() {
			t.Fatalf("haproxy is not installed (required in CI; apt-get install haproxy): %v", err)
		}
		t.Skipf("haproxy is not installed: %v", err)
	}
	return haproxy
}

// replica is one gatehouse process.
type replica struct {
	addr, admin string // public and admin listeners

	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  strings.Builder
	code int
}

func (r *replica) start(t *testing.T, bin string, env []string) {
	t.Helper()
	r.cmd = exec.Command(bin, "serve")
	r.cmd.Env = append(env, "GATEHOUSE_ADDR="+r.addr, "GATEHOUSE_ADMIN_ADDR="+r.admin)
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
	url, admin, stats string
}

// composePath is the compose file whose HAProxy configuration the test runs.
const composePath = "../../compose.yaml"

// composeHAProxy is the HAProxy configuration compose.yaml ships (the one
// docs/deploy.md shows), made to run here and to hide nothing:
//
//   - the frontends bind free loopback ports, and each server line names
//     its replica's address instead of the compose service (the Docker
//     DNS resolvers section goes with it);
//   - `retries 0` instead of compose's `retries 2` + `option redispatch`:
//     a request a replica refused fails instead of being sent to the
//     other, so the drain alone must keep every request whole;
//   - a stats frontend, for waitUp.
//
// The health check (`option httpchk GET /readyz`, `inter 1s fall 2 rise
// 2`) is compose's, unchanged. Every rewrite must apply: a compose file
// changed beyond them fails the test, which then needs a look.
func composeHAProxy(t *testing.T, rs []*replica, public, admin, stats string) string {
	t.Helper()
	raw, err := os.ReadFile(composePath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Configs map[string]struct {
			Content string `yaml:"content"`
		} `yaml:"configs"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	cfg := doc.Configs["haproxy"].Content
	if !strings.Contains(cfg, "option httpchk GET /readyz") {
		t.Fatalf("compose.yaml's HAProxy configuration does not check /readyz:\n%s", cfg)
	}
	applied := map[string]int{}
	var out []string
	inResolvers := false
	for _, line := range strings.Split(cfg, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "resolvers":
			inResolvers = true
			applied["resolvers"]++
			continue
		case inResolvers && (len(f) == 0 || line[0] != ' '):
			inResolvers = false
		case inResolvers:
			continue
		}
		switch {
		case len(f) == 2 && f[0] == "bind" && f[1] == ":8080":
			line = "  bind " + public
			applied["bind public"]++
		case len(f) == 2 && f[0] == "bind" && f[1] == ":8081":
			line = "  bind " + admin
			applied["bind admin"]++
		case len(f) == 2 && f[0] == "retries":
			line = "  retries 0"
			applied["retries"]++
		case len(f) == 2 && f[0] == "option" && f[1] == "redispatch":
			applied["redispatch"]++
			continue
		case len(f) > 0 && f[0] == "default-server":
			line = strings.Replace(line, " resolvers docker", "", 1)
		case len(f) >= 4 && f[0] == "server":
			n, err := strconv.Atoi(strings.TrimPrefix(f[1], "gatehouse"))
			if err != nil || n < 1 || n > len(rs) {
				t.Fatalf("compose.yaml's HAProxy names server %s, which the test does not run", f[1])
			}
			r := rs[n-1]
			switch f[2] {
			case f[1] + ":8080":
				f[2] = r.addr
				applied["public servers"]++
			case f[1] + ":8081":
				f[2] = r.admin
				if j := slices.Index(f, "port"); j > 0 && j+1 < len(f) {
					_, port, _ := net.SplitHostPort(r.addr)
					f[j+1] = port
				}
				applied["admin servers"]++
			default:
				t.Fatalf("compose.yaml's HAProxy server line %q: unexpected address", line)
			}
			line = "  " + strings.Join(f, " ")
		}
		out = append(out, line)
	}
	for what, want := range map[string]int{"resolvers": 1, "bind public": 1, "bind admin": 1, "retries": 1, "redispatch": 1, "public servers": len(rs), "admin servers": len(rs)} {
		if applied[what] != want {
			t.Fatalf("compose.yaml's HAProxy configuration changed: rewrite %q applied %d times, want %d:\n%s", what, applied[what], want, cfg)
		}
	}
	out = append(out, "frontend stats", "  bind "+stats, "  stats enable", "  stats uri /stats", "")
	return strings.Join(out, "\n")
}

// startHAProxy runs haproxy with compose.yaml's configuration
// (composeHAProxy) in front of the replicas.
func startHAProxy(t *testing.T, bin string, rs []*replica) *balancer {
	t.Helper()
	front, admin, stats := freeAddr(t), freeAddr(t), freeAddr(t)
	cfg := composeHAProxy(t, rs, front, admin, stats)
	dir := t.TempDir()
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s\n%s", err, out, cfg)
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
	return &balancer{url: "http://" + front, admin: "http://" + admin, stats: "http://" + stats + "/stats;csv"}
}

// waitUp waits until haproxy counts n servers UP.
func (b *balancer) waitUp(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		up, last, err := b.up()
		if up >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy does not see %d servers UP within 60 s: %v\n%s", n, err, last)
		}
		time.Sleep(50 * time.Millisecond) // waiting for haproxy's health checks
	}
}

// upCount is the number of public servers haproxy counts UP now.
func (b *balancer) upCount(t *testing.T) int {
	t.Helper()
	up, last, err := b.up()
	if err != nil {
		t.Fatalf("haproxy stats: %v\n%s", err, last)
	}
	return up
}

// up reads haproxy's stats: the public servers UP, and the stats text.
func (b *balancer) up() (int, string, error) {
	resp, err := http.Get(b.stats)
	if err != nil {
		return 0, "", err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	last := string(body)
	up := 0
	lines := strings.Split(last, "\n")
	head := strings.Split(strings.TrimPrefix(lines[0], "# "), ",")
	col := slices.Index(head, "status")
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if col >= 0 && len(f) > col && f[0] == "gatehouse_public" && strings.HasPrefix(f[1], "gatehouse") && f[col] == "UP" {
			up++
		}
	}
	return up, last, nil
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
