// Package fleet starts private Redis deployments for tests: a single
// server, a Sentinel group (one master, one replica, three sentinels) and a
// Cluster of masters, each a redis-server child process of the test on
// free loopback ports chosen at run time, in the test's temp dirs, stopped
// by PID when the test ends. Helpers restart a server empty, flush it and
// fail a Sentinel group over, so tests can do to Redis what an operator or
// an outage does, without touching the shared server.
//
// It is for tests only. A missing redis-server skips the test, or fails it
// in CI (testenv.Required).
package fleet

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"gatehouse/internal/testenv"
)

// Redis is one redis-server process of the test (a master, a replica, a
// cluster node or a sentinel).
type Redis struct {
	t    testing.TB
	Port int
	Dir  string
	conf string // config file, for a sentinel
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// serverBin is redis-server's path, or skips (fails in CI) without it.
func serverBin(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if testenv.Required() {
			t.Fatalf("redis-server is not installed (required in CI): %v", err)
		}
		t.Skipf("redis-server is not installed: %v", err)
	}
	return bin
}

// StartRedis starts a redis-server without persistence on a free port in a
// new temp dir; args are added to its command line (--maxmemory 64mb …).
func StartRedis(t testing.TB, args ...string) *Redis {
	t.Helper()
	return startIn(t, t.TempDir(), "", append([]string{"--save", "", "--appendonly", "no"}, args...))
}

// startIn starts a redis-server in dir (with config file conf, if not
// empty) on a free port, whose cluster bus port is free too, retrying with
// another port when the chosen one was taken meanwhile by another process.
func startIn(t testing.TB, dir, conf string, args []string) *Redis {
	t.Helper()
	bin := serverBin(t)
	var lastErr error
	for range 5 {
		r := &Redis{t: t, Port: freePort(t), Dir: dir, conf: conf, args: args}
		if lastErr = r.start(bin); lastErr == nil {
			t.Cleanup(r.Kill)
			return r
		}
	}
	t.Fatalf("redis-server did not start: %v", lastErr)
	return nil
}

func (r *Redis) start(bin string) error {
	var args []string
	if r.conf != "" {
		// redis-server reads a config file only as its first argument.
		args = append(args, r.conf)
	}
	args = append(args, "--port", strconv.Itoa(r.Port), "--bind", "127.0.0.1", "--dir", r.Dir)
	cmd := exec.Command(bin, append(args, r.args...)...)
	log, err := os.OpenFile(filepath.Join(r.Dir, "redis-"+strconv.Itoa(r.Port)+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	r.mu.Lock()
	r.cmd, r.done = cmd, done
	r.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("redis-server on port %d exited at start (see %s)", r.Port, log.Name())
		default:
		}
		c := redis.NewClient(&redis.Options{Addr: r.Addr(), DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
		err := c.Ping(context.Background()).Err()
		c.Close()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			r.Kill()
			return fmt.Errorf("redis-server on port %d did not answer: %w", r.Port, err)
		}
		time.Sleep(10 * time.Millisecond) // waiting for a child process to listen
	}
}

// Addr is the server's host:port.
func (r *Redis) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.Port) }

// URL is a redis:// URL of the server, database 0.
func (r *Redis) URL() string { return "redis://" + r.Addr() + "/0" }

// Client is a go-redis client of this server alone, closed with the test.
func (r *Redis) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
	r.t.Cleanup(func() { c.Close() })
	return c
}

// Kill ends the server by its own PID (SIGKILL: nothing saved) and waits.
func (r *Redis) Kill() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // in case it was frozen
	_ = cmd.Process.Kill()
	<-done
}

// Freeze stops the process (SIGSTOP): its connections hang.
func (r *Redis) Freeze() { r.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen process.
func (r *Redis) Thaw() { r.signal(syscall.SIGCONT) }

func (r *Redis) signal(s syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		_ = r.cmd.Process.Signal(s)
	}
}

// RestartEmpty kills the server and starts it again on the same port with
// the same arguments: without persistence, it comes back empty.
func (r *Redis) RestartEmpty(t testing.TB) {
	t.Helper()
	r.Kill()
	if err := r.start(serverBin(t)); err != nil {
		t.Fatal(err)
	}
}

// Flush empties every database of this private server (FLUSHALL).
func (r *Redis) Flush(t testing.TB) {
	t.Helper()
	c := r.Client()
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		t.Fatalf("FLUSHALL on %s: %v", r.Addr(), err)
	}
}

// freePort returns a loopback port that was free just now, with port+10000
// (a cluster node's bus port) free too.
func freePort(t testing.TB) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		if p+10000 > 65535 {
			l.Close()
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		l.Close()
		if err != nil {
			continue
		}
		bus.Close()
		return p
	}
	t.Fatal("no free port pair found")
	return 0
}
