package fleettest_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gatehouse/internal/app"
	"gatehouse/internal/demo"
	"gatehouse/rest/partnerclient"
)

// TestEmbeddedRestart runs the gatehouse binary on its embedded store and
// stops it twice: gracefully (SIGTERM), after which the used signed URL is
// still a duplicate (4004: the nonces were saved and loaded, and the
// replay memory's start carried over), then with kill -9, after which the
// same URL is refused as signed before the replay memory started (4003),
// while a new request is served.
func TestEmbeddedRestart(t *testing.T) {
	t.Parallel()
	bin := gatehouseBinary(t)
	dataDir := t.TempDir()
	signed := func() string {
		q, err := partnerclient.Signer{AppKey: demo.DemoAppKey, AppSecret: demo.DemoAppSecret}.Sign(url.Values{"order_no": {"SO1001"}})
		if err != nil {
			t.Fatal(err)
		}
		return "/api/v1/orders/query?" + q.Encode()
	}

	p := startProcess(t, bin, dataDir)
	used := signed()
	if r := p.get(t, used); r.status != 200 {
		t.Fatalf("first use: %s", r)
	}
	start1 := p.readyz(t)["replay_memory_start"]

	// Graceful stop: the nonces are saved, the next start loads them.
	p.stop(t, syscall.SIGTERM)
	if _, err := os.Stat(filepath.Join(dataDir, app.ReplayFile)); err != nil {
		t.Fatalf("no replay memory saved at SIGTERM: %v", err)
	}
	p = startProcess(t, bin, dataDir)
	if r := p.get(t, used); r.status != 401 || r.code != 4004 {
		t.Fatalf("used URL after a graceful restart: %s, want 401/4004", r)
	}
	if start2 := p.readyz(t)["replay_memory_start"]; start2 != start1 {
		t.Fatalf("replay memory start %s after a graceful restart, want %s (carried over)", start2, start1)
	}
	if _, err := os.Stat(filepath.Join(dataDir, app.ReplayFile)); !os.IsNotExist(err) {
		t.Fatalf("the loaded replay file is still there (a later kill -9 would reuse it): %v", err)
	}

	// kill -9: nothing saved; the memory starts at the next start.
	p.stop(t, syscall.SIGKILL)
	p = startProcess(t, bin, dataDir)
	r := p.get(t, used)
	if r.status != 401 || r.code != 4003 || !strings.Contains(r.message, "replay memory") {
		t.Fatalf("used URL after kill -9: %s, want 401/4003 (signed before the replay memory started)", r)
	}
	if r := p.get(t, signed()); r.status != 200 {
		t.Fatalf("a new request after kill -9: %s", r)
	}
	if start3 := p.readyz(t)["replay_memory_start"]; start3 <= start1 {
		t.Fatalf("replay memory start %s after kill -9, want later than %s", start3, start1)
	}
	p.stop(t, syscall.SIGTERM)
}

// process is a running gatehouse binary.
type process struct {
	cmd    *exec.Cmd
	base   string
	admin  string // base URL of the admin listener
	done   chan struct{}
	mu     sync.Mutex
	output strings.Builder
}

var listening = regexp.MustCompile(`public=(127\.0\.0\.1:\d+) admin=(127\.0\.0\.1:\d+)`)

// startProcess runs `gatehouse serve --demo` on dataDir (embedded) with
// free ports and waits for its listening line.
func startProcess(t *testing.T, bin, dataDir string) *process {
	t.Helper()
	p := &process{done: make(chan struct{})}
	p.cmd = exec.Command(bin, "serve", "--demo")
	p.cmd.Env = append(os.Environ(),
		"GATEHOUSE_DATA_DIR="+dataDir, "GATEHOUSE_ADDR=127.0.0.1:0", "GATEHOUSE_ADMIN_ADDR=127.0.0.1:0",
		"GATEHOUSE_LOG_LEVEL=info", "GATEHOUSE_REDIS_URL=", "GATEHOUSE_DATABASE_URL=")
	return p.start(t)
}

// start runs p.cmd and waits for its listening line.
func (p *process) start(t *testing.T) *process {
	t.Helper()
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p.cmd.Stdout
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	addr := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.output.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil && strings.Contains(line, "listening") {
				select {
				case addr <- m[1:]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = p.cmd.Wait()
		close(p.done)
	}()
	select {
	case a := <-addr:
		p.base, p.admin = "http://"+a[0], "http://"+a[1]
	case <-p.done:
		t.Fatalf("gatehouse exited at start:\n%s", p.logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("gatehouse did not listen within 60 s:\n%s", p.logs())
	}
	return p
}

func (p *process) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

// stop sends sig and waits for the exit (0 after SIGTERM).
func (p *process) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("gatehouse did not exit 30 s after %v:\n%s", sig, p.logs())
	}
	if sig == syscall.SIGTERM && p.cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("exit code %d after SIGTERM:\n%s", p.cmd.ProcessState.ExitCode(), p.logs())
	}
}

func (p *process) get(t *testing.T, path string) result {
	t.Helper()
	res, err := http.Get(p.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var env struct {
		Code    int
		Message string
	}
	_ = json.NewDecoder(res.Body).Decode(&env)
	return result{status: res.StatusCode, code: env.Code, message: env.Message}
}

func (p *process) readyz(t *testing.T) map[string]string {
	t.Helper()
	res, err := http.Get(p.base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]string
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil || res.StatusCode != 200 {
		t.Fatalf("readyz: %d %v %v", res.StatusCode, m, err)
	}
	return m
}
