// Package proc runs the harness's child processes (gatehouse, the baselines,
// the floors) on loopback and reads what they cost: start-up time, peak
// RSS, CPU time, and the whole machine's busy time.
package proc

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
var serving sync.Map // host:port → *Proc

// Proc is a child process serving HTTP on loopback.
type Proc struct {
	name    string
	cmd     *exec.Cmd
	Base    string        // http://127.0.0.1:port
	Startup time.Duration // exec to the first healthy reply
	logPath string
	done    chan error
}

// FreeAddr returns a loopback address with a port that was free a moment ago.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Start runs bin with args and env (added to this process's), its
// output in logDir, and waits until GET base+"/healthz" answers 200.
func Start(ctx context.Context, name, bin string, args, env []string, addr, logDir string) (*Proc, error) {
	logPath := logDir + "/" + strings.ReplaceAll(name, " ", "-") + ".log"
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	p := &Proc{name: name, cmd: cmd, Base: "http://" + addr, logPath: logPath, done: make(chan error, 1)}
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
			return nil, fmt.Errorf("%s exited during start-up (%v); log: %s", name, err, Tail(logPath))
		default:
		}
		if resp, err := c.Get(p.Base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				p.Startup = time.Since(t0)
				serving.Store(addr, p)
				return p, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.Stop()
			return nil, fmt.Errorf("%s did not become healthy; log: %s", name, Tail(logPath))
		}
		time.Sleep(2 * time.Millisecond) // start-up resolution
	}
}

// PeakRSS returns the process's peak resident set size (VmHWM) in bytes.
func (p *Proc) PeakRSS() (int64, error) {
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
func (p *Proc) cpuTime() (time.Duration, error) { return CPU(p.cmd.Process.Pid) }

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// CPU is the CPU time (user + system) process pid has used so far,
// from /proc/<pid>/stat, in clock ticks of 10 ms (USER_HZ 100 on Linux).
func CPU(pid int) (time.Duration, error) {
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

// MachineBusy is the CPU time all CPUs have spent busy so far (user,
// nice, system, irq, softirq, steal from the first line of /proc/stat;
// idle and iowait left out), in clock ticks of 10 ms.
func MachineBusy() (time.Duration, error) { return busyOf("cpu") }

// CPUBusy is MachineBusy for CPU n alone (its line cpu<n> of /proc/stat).
func CPUBusy(n int) (time.Duration, error) { return busyOf("cpu" + strconv.Itoa(n)) }

func busyOf(name string) (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != name {
			continue
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
	return 0, fmt.Errorf("no line %q in /proc/stat", name)
}

// CPUSnapshot is the CPU time of every serving child at one moment.
func CPUSnapshot() map[string]time.Duration {
	m := map[string]time.Duration{}
	serving.Range(func(k, v any) bool {
		if t, err := v.(*Proc).cpuTime(); err == nil {
			m[k.(string)] = t
		}
		return true
	})
	return m
}

// Stop sends SIGTERM and waits (at most 25 s, then kills).
func (p *Proc) Stop() error {
	serving.Delete(strings.TrimPrefix(p.Base, "http://"))
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		return err
	case <-time.After(25 * time.Second):
		_ = p.cmd.Process.Kill()
		return fmt.Errorf("%s did not stop within 25 s", p.name)
	}
}

// Tail is the end of the log at path, for an error message.
func Tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
