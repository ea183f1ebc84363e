// Package report prints each figure of a run on one line with its ratio to
// its baseline, and writes all of them to a JSON file.
package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"gatehouse/cmd/gatehouse-bench/internal/costs"
	"gatehouse/cmd/gatehouse-bench/internal/load"
	"gatehouse/cmd/gatehouse-bench/internal/overload"
	"gatehouse/internal/partner/admitstore"
)

// Figure is one measured figure and its baseline from the same run.
type Figure struct {
	Name          string       `json:"name"`
	Value         float64      `json:"value"`
	Unit          string       `json:"unit"`
	Load          *load.Result `json:"load,omitempty"`
	Baseline      string       `json:"baseline,omitempty"`
	BaselineValue float64      `json:"baseline_value,omitempty"`
	// Ratio is Value / BaselineValue: for throughput, the fraction of the
	// baseline's requests per second; for time and memory, how many times
	// the baseline's.
	Ratio float64 `json:"ratio,omitempty"`
	// CPURatio is the baseline's server CPU per request divided by
	// gatehouse's (throughput figures whose both sides could be read).
	CPURatio float64 `json:"cpu_ratio,omitempty"`
	// MachineCPURatio is the same with the whole machine's CPU per
	// request (Postgres, Redis and the load generator included).
	MachineCPURatio float64 `json:"machine_cpu_ratio,omitempty"`
}

// Report is everything one run measured.
type Report struct {
	Time      time.Time              `json:"time"`
	Machine   map[string]any         `json:"machine"`
	Figures   []Figure               `json:"figures"`
	Baselines map[string]load.Result `json:"baselines"`
	Skipped   map[string]string      `json:"skipped,omitempty"`
	Checks    map[string]string      `json:"checks,omitempty"`
	// Costs are what one request cost Redis and Postgres (package costs).
	Costs []costs.Figure `json:"costs,omitempty"`
	// Overload are the overload phases (package overload).
	Overload []overload.Figures `json:"overload,omitempty"`
	Elapsed  string             `json:"elapsed"`
}

// New starts a report and prints its first line.
func New() *Report {
	r := &Report{Time: time.Now().UTC(), Baselines: map[string]load.Result{}, Skipped: map[string]string{}, Checks: map[string]string{}}
	r.Machine = map[string]any{"goos": runtime.GOOS, "goarch": runtime.GOARCH, "cpus": runtime.NumCPU(), "go": runtime.Version(), "cpu_model": cpuModel()}
	fmt.Printf("# gatehouse-bench %s, %d CPUs (%s), %s; every ratio is to a baseline measured in this run\n",
		runtime.Version(), runtime.NumCPU(), cpuModel(), r.Time.Format(time.RFC3339))
	return r
}

// Add records a throughput figure against its baseline and prints it.
func (r *Report) Add(name string, l load.Result, baseline string, b load.Result) {
	f := Figure{Name: name, Value: l.RPS, Unit: "req/s", Load: &l, Baseline: baseline, BaselineValue: b.RPS}
	if b.RPS > 0 {
		f.Ratio = l.RPS / b.RPS
	}
	line := fmt.Sprintf("%-58s %9.0f req/s  p50 %6.2f ms  p99 %7.2f ms   ratio %.2f of %q (%.0f req/s)",
		name, l.RPS, l.P50Ms, l.P99Ms, f.Ratio, baseline, b.RPS)
	if l.ServerCPUus > 0 && b.ServerCPUus > 0 {
		// The same comparison in server CPU per request: the baseline's
		// cost as a fraction of gatehouse's (1 = no dearer than the floor).
		f.CPURatio = b.ServerCPUus / l.ServerCPUus
		line += fmt.Sprintf("; server CPU %.0f µs/req, floor %.0f µs/req: cpu ratio %.2f", l.ServerCPUus, b.ServerCPUus, f.CPURatio)
	}
	if l.MachineCPUus > 0 && b.MachineCPUus > 0 {
		f.MachineCPURatio = b.MachineCPUus / l.MachineCPUus
		line += fmt.Sprintf("; machine CPU %.0f vs %.0f µs/req: %.2f", l.MachineCPUus, b.MachineCPUus, f.MachineCPURatio)
	}
	r.Figures = append(r.Figures, f)
	if l.Errors > 0 {
		line += fmt.Sprintf("  [%d errors, first: %s]", l.Errors, l.FirstError)
	}
	fmt.Println(line)
}

// Scalar records a non-throughput figure (lower is better) and prints it.
func (r *Report) Scalar(name string, v float64, unit, baseline string, b float64) {
	f := Figure{Name: name, Value: v, Unit: unit, Baseline: baseline, BaselineValue: b}
	line := fmt.Sprintf("%-58s %9.1f %s", name, v, unit)
	if b > 0 {
		f.Ratio = v / b
		line += fmt.Sprintf("   ratio %.1fx %q (%.1f %s)", f.Ratio, baseline, b, unit)
	}
	r.Figures = append(r.Figures, f)
	fmt.Println(line)
}

// Skip records and prints a figure that could not be measured, and why.
func (r *Report) Skip(what, why string) {
	r.Skipped[what] = why
	fmt.Printf("%-58s skipped: %s\n", what, why)
}

// Write writes the report as JSON to path.
func (r *Report) Write(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// Check records a passed correctness check of a figure.
func (r *Report) Check(what, result string) {
	r.Checks[what] = result
	fmt.Printf("  check: %s\n", result)
}

// AddNonceFootprint measures the in-process store's heap bytes per
// remembered nonce (1 000 000 of one app, in this process) against the
// figure GATEHOUSE_NONCE_MEMORY_MAX's default is computed from.
func (r *Report) AddNonceFootprint() {
	const n = 1_000_000
	per := admitstore.NonceFootprint(n)
	f := Figure{Name: "in-process replay memory, heap per remembered nonce", Value: per, Unit: "bytes",
		Baseline: "bytes the default GATEHOUSE_NONCE_MEMORY_MAX assumes", BaselineValue: admitstore.NonceBytes, Ratio: per / admitstore.NonceBytes}
	r.Figures = append(r.Figures, f)
	fmt.Printf("%-58s %9.1f bytes                              ratio %.2f of %d (default bound %d nonces = %d MiB at that size)\n",
		f.Name, per, f.Ratio, admitstore.NonceBytes, admitstore.DefaultNonceMemoryMax, admitstore.DefaultNonceMemoryMax*admitstore.NonceBytes>>20)
}

// AddCost records a cost figure (costs.Recorder).
func (r *Report) AddCost(f costs.Figure) { r.Costs = append(r.Costs, f) }

// AddOverload records an overload phase (overload.Recorder).
func (r *Report) AddOverload(f overload.Figures) { r.Overload = append(r.Overload, f) }
