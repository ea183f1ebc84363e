package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// serving maps the host:port of every running child to its process, so
// that a load phase can charge the CPU time of the processes it loaded.
var serving sync.Map // host:port → *proc

// proc is a child process serving HTTP on loopback.
type proc struct {
	name    string
	cmd     *exec.Cmd
	base    string        // http://127.0.0.1:port
	startup time.Duration // exec to the first healthy reply
	logPath string
	done    chan error
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startProc runs bin with args and env (added to this process's), its
// output in logDir, and waits until GET base+"/healthz" answers 200.
func startProc(ctx context.Context, name, bin string, args, env []string, addr, logDir string) (*proc, error) {
	logPath := logDir + "/" + strings.ReplaceAll(name, " ", "-") + ".log"
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	p := &proc{name: name, cmd: cmd, base: "http://" + addr, logPath: logPath, done: make(chan error, 1)}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { p.done <- cmd.Wait() }()
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-p.done:
			return nil, fmt.Errorf("%s exited during start-up (%v); log: %s", name, err, tail(logPath))
		default:
		}
		if resp, err := c.Get(p.base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				p.startup = time.Since(t0)
				serving.Store(addr, p)
				return p, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return nil, fmt.Errorf("%s did not become healthy; log: %s", name, tail(logPath))
		}
		time.Sleep(2 * time.Millisecond) // start-up resolution
	}
}

// peakRSS returns the process's peak resident set size (VmHWM) in bytes.
func (p *proc) peakRSS() (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}

// cpuTime is the CPU time (user + system) the process has used so far.
func (p *proc) cpuTime() (time.Duration, error) { return procCPU(p.cmd.Process.Pid) }

// procCPU is the CPU time (user + system) process pid has used so far,
// from /proc/<pid>/stat, in clock ticks of 10 ms (USER_HZ 100 on Linux).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after it don't.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, errors.New("unexpected /proc stat format")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// machineBusy is the CPU time all CPUs have spent busy so far (user,
// nice, system, irq, softirq, steal from the first line of /proc/stat;
// idle and iowait left out), in clock ticks of 10 ms.
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, errors.New("unexpected /proc/stat format")
	}
	var busy int64
	for i, v := range f[1:9] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, err
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return time.Duration(busy) * 10 * time.Millisecond, nil
}

// cpuSnapshot is the CPU time of every serving child at one moment.
func cpuSnapshot() map[string]time.Duration {
	m := map[string]time.Duration{}
	serving.Range(func(k, v any) bool {
		if t, err := v.(*proc).cpuTime(); err == nil {
			m[k.(string)] = t
		}
		return true
	})
	return m
}

// stop sends SIGTERM and waits (at most 25 s, then kills).
func (p *proc) stop() error {
	serving.Delete(strings.TrimPrefix(p.base, "http://"))
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		return err
	case <-time.After(25 * time.Second):
		_ = p.cmd.Process.Kill()
		return fmt.Errorf("%s did not stop within 25 s", p.name)
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
