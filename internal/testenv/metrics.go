package testenv

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric returns the value of the counter or gauge name whose label
// has value in the process's default registry (served at /metrics), and
// whether it is there.
func Metric(t testing.TB, name, label, value string) (float64, bool) {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					if m.GetCounter() != nil {
						return m.GetCounter().GetValue(), true
					}
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}
