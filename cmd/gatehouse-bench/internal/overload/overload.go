// Package overload measures what the embedded gatehouse serves when offered
// more than it can, on one core, against goals computed from capacities
// measured in the same run; its load generator runs as a child process
// (`gatehouse-bench overload-load …`) pinned to another core.
package overload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"gatehouse/cmd/gatehouse-bench/internal/bench"
	"gatehouse/cmd/gatehouse-bench/internal/gatehouse"
	"gatehouse/cmd/gatehouse-bench/internal/proc"
)

// The goals of the overload phases: at 1.5 × C offered open-loop, 2xx at
// least overloadShare of B per second, p99 of the 2xx and of the refusals
// within these bounds, timeouts and refused connections at most
// overloadLost of the requests, the server's peak RSS at most overloadRSS.
const (
	overloadFactor  = 1.5
	overloadShare   = 0.8
	overloadP99OK   = 250.0 // ms
	overloadP99Ref  = 100.0 // ms
	overloadLost    = 0.001
	overloadRSS     = 256 << 20
	overloadWorkers = 16 // closed-loop clients measuring a capacity
)

// Phases measures what the embedded gatehouse serves when offered
// more than it can: the server on CPU 0 (taskset, GOMAXPROCS=1), the load
// generator a child on CPU 1. C is the closed-loop capacity of the ticket
// page (GET /api/tickets?limit=20), H that of /healthz, k = C / H what a
// refusal costs next to a served request, B = C (1 − 1.5 k) / (1 − k) the
// most one core can serve at 1.5 × C once refusals are paid; then 1.5 × C
// is offered open-loop for -overload-duration. The same for signed v2
// order queries (C measured for them; pre-signed, one nonce each).
func Phases(ctx context.Context, o bench.Options, rep Recorder, self, tmp string) error {
	if runtime.NumCPU() < 2 {
		return errors.New("needs 2 CPUs (server on one, load on the other)")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		return fmt.Errorf("taskset (util-linux) not found: %w", err)
	}
	po := o
	po.PinCPU = "0"
	g, err := gatehouse.Start(ctx, po, "gatehouse overload", tmp, []string{"GATEHOUSE_DATA_DIR=" + tmp + "/data-overload"})
	if err != nil {
		return err
	}
	defer g.Proc.Stop()
	for range 25 { // a full page of 20
		resp, err := http.Post(g.Proc.Base+"/api/tickets", "application/json", strings.NewReader(gatehouse.TicketBody))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
			return fmt.Errorf("seed ticket: HTTP %d", resp.StatusCode)
		}
	}
	load := func(args ...string) (Result, error) {
		return runLoadChild(ctx, self, args)
	}
	health, err := load("-url", g.Proc.Base+"/healthz", "-mode", "closed", "-workers", strconv.Itoa(overloadWorkers))
	if err != nil {
		return err
	}
	H := health.OKPerSec
	for _, t := range []struct {
		name string
		args []string
	}{
		{"ticket page GET /api/tickets?limit=20", []string{"-url", g.Proc.Base + "/api/tickets?limit=20"}},
		{"signed v2 order query", []string{"-url", g.Proc.Base + "/api/v2/orders/query?order_no=" + gatehouse.OrderNo, "-app-key", g.AppKey, "-app-secret", g.Secret}},
	} {
		closed, err := load(append(t.args, "-mode", "closed", "-workers", strconv.Itoa(overloadWorkers))...)
		if err != nil {
			return err
		}
		C := closed.OKPerSec
		if C <= 0 || H <= 0 {
			return fmt.Errorf("%s: no capacity measured (C %.0f/s, H %.0f/s; %s %s)", t.name, C, H, closed.FirstOther, health.FirstOther)
		}
		k := C / H
		B := C * (1 - overloadFactor*k) / (1 - k)
		rate := overloadFactor * C
		open, err := load(append(t.args, "-mode", "open", "-rate", strconv.FormatFloat(rate, 'f', 0, 64), "-duration", o.OverloadFor.String(),
			"-server-pid", strconv.Itoa(g.Proc.Pid()))...)
		if err != nil {
			return err
		}
		rss, _ := g.Proc.PeakRSS()
		if closed.Refused+health.Refused > 0 {
			// A capacity is what is served; refusals in a closed loop of
			// overloadWorkers mean the limit cut below it (a busy machine).
			fmt.Printf("  note: %d refusals while measuring C, %d while measuring H (closed loop, %d clients)\n", closed.Refused, health.Refused, overloadWorkers)
		}
		record(rep, t.name, C, H, B, rate, o.OverloadFor, open, rss)
	}
	return nil
}

// runLoadChild runs `gatehouse-bench overload-load args…` on CPU 1 and
// reads its result.
func runLoadChild(ctx context.Context, self string, args []string) (Result, error) {
	cmd := exec.CommandContext(ctx, "taskset", append([]string{"-c", "1", self, "overload-load"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return Result{}, fmt.Errorf("load generator: %w: %s", err, strings.TrimSpace(errb.String()))
	}
	var r Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return Result{}, fmt.Errorf("load generator output %q: %w", out.String(), err)
	}
	return r, nil
}

// Recorder keeps the figures of the overload phases (the run's report).
type Recorder interface{ AddOverload(Figures) }

// Figures is one overload phase in the JSON report.
type Figures struct {
	Name           string  `json:"name"`
	C              float64 `json:"c_per_sec"`
	H              float64 `json:"h_per_sec"`
	K              float64 `json:"k"`
	B              float64 `json:"b_per_sec"`
	Offered        float64 `json:"offered_per_sec"`
	Seconds        float64 `json:"seconds"`
	Result         Result  `json:"result"`
	PeakRSSMiB     float64 `json:"peak_rss_mib"`
	OKShareOfGoal  float64 `json:"ok_share_of_0_8_b"`
	LostPercent    float64 `json:"lost_percent"`
	GoalsMet       bool    `json:"goals_met"`
	GoalsNotMetWhy string  `json:"goals_not_met,omitempty"`
}

// record prints the two lines of an overload phase and records it in r.
func record(r Recorder, name string, C, H, B, rate float64, d time.Duration, res Result, rss int64) {
	f := Figures{Name: name, C: C, H: H, K: C / H, B: B, Offered: rate, Seconds: d.Seconds(), Result: res,
		PeakRSSMiB: float64(rss) / (1 << 20)}
	if B > 0 {
		f.OKShareOfGoal = res.OKPerSec / (overloadShare * B)
	}
	if res.Sent > 0 {
		f.LostPercent = 100 * float64(res.Timeouts+res.ConnErrors) / float64(res.Sent)
	}
	var missed []string
	if f.OKShareOfGoal < 1 {
		missed = append(missed, "2xx/s")
	}
	if res.P99OKMs > overloadP99OK {
		missed = append(missed, "p99 2xx")
	}
	if res.P99RefMs > overloadP99Ref {
		missed = append(missed, "p99 refusals")
	}
	if f.LostPercent > 100*overloadLost {
		missed = append(missed, "timeouts")
	}
	if rss > overloadRSS {
		missed = append(missed, "RSS")
	}
	f.GoalsMet, f.GoalsNotMetWhy = len(missed) == 0, strings.Join(missed, ", ")
	r.AddOverload(f)
	fmt.Printf("overload, %s: C %.0f/s closed-loop, H %.0f/s (/healthz), k %.3f, B %.0f/s (server on CPU 0, GOMAXPROCS=1)\n",
		name, C, H, f.K, B)
	line := fmt.Sprintf("overload, %s at %.1f × C = %.0f/s open-loop (%d clients) for %s: 2xx %.0f/s = %.2f of 0.8 B (goal ≥ 1); p99 2xx %.1f ms (≤ %.0f); p99 refusals %.1f ms (≤ %.0f), %d refused; timeouts + refused connections %.3f %% (≤ %.1f); peak RSS %.0f MiB (≤ %d)",
		name, overloadFactor, rate, res.Conns, d, res.OKPerSec, f.OKShareOfGoal, res.P99OKMs, overloadP99OK, res.P99RefMs, overloadP99Ref, res.Refused,
		f.LostPercent, 100*overloadLost, f.PeakRSSMiB, overloadRSS>>20)
	if res.Other > 0 {
		line += fmt.Sprintf("  [%d other answers, first: %s]", res.Other, res.FirstOther)
	}
	if !f.GoalsMet {
		line += "  [goals missed: " + f.GoalsNotMetWhy + "]"
	}
	if c := res.CPU; c != nil {
		// Who used the two CPUs: a server short of its core's time (or a
		// generator busy to the full) measures the machine, not the server.
		line += fmt.Sprintf("  [CPU 0: server %.0f %%, all %.0f %%; CPU 1 all %.0f %%]", 100*c.Server, 100*c.CPU0, 100*c.CPU1)
	}
	if res.LagP99Ms > 5 {
		// The generator could not keep its schedule: its CPU was short
		// (a busy machine), and part of the latencies is its own.
		line += fmt.Sprintf("  [generator late: p99 %.0f ms behind schedule]", res.LagP99Ms)
	}
	fmt.Println(line)
}

// CPUShares is how busy the CPUs were during an open-loop run, each a
// share of the run's wall time: the server process (on CPU 0), and CPU 0
// and CPU 1 whole (the generator and whatever else ran there).
type CPUShares struct {
	Server float64 `json:"server"`
	CPU0   float64 `json:"cpu0"`
	CPU1   float64 `json:"cpu1"`
}

type cpuStart struct {
	pid         int
	at          time.Time
	srv, c0, c1 time.Duration
}

func startCPU(pid int) cpuStart {
	s := cpuStart{pid: pid, at: time.Now()}
	s.srv, _ = proc.CPU(pid)
	s.c0, _ = proc.CPUBusy(0)
	s.c1, _ = proc.CPUBusy(1)
	return s
}

// shares are the CPU shares since s (nil when /proc could not be read).
func (s cpuStart) shares() *CPUShares {
	srv, err1 := proc.CPU(s.pid)
	c0, err2 := proc.CPUBusy(0)
	c1, err3 := proc.CPUBusy(1)
	if errors.Join(err1, err2, err3) != nil {
		return nil
	}
	wall := time.Since(s.at).Seconds()
	return &CPUShares{Server: (srv - s.srv).Seconds() / wall, CPU0: (c0 - s.c0).Seconds() / wall, CPU1: (c1 - s.c1).Seconds() / wall}
}
