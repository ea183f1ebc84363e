package alerting_test

import (
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/testenv"
)

// series is one selector of an alert's expression: a metric and the
// label values it selects (=, or each alternative of =~ "a|b").
type series struct {
	alert, metric string
	labels        map[string][]string
}

var (
	selectorRe = regexp.MustCompile(`(gatehouse_[a-z0-9_]+)(\{[^}]*\})?`)
	matcherRe  = regexp.MustCompile(`(\w+)\s*(=~|=)\s*"([^"]*)"`)
)

// perEntityGauges appear with the entity they describe (an app's
// webhook endpoint breaker, from its first attempt on this replica); an
// absent series cannot fire their alerts, which compare a present value.
var perEntityGauges = []string{"gatehouse_webhook_breaker_state"}

func alertSeries(t *testing.T) []series {
	t.Helper()
	b, err := os.ReadFile("../../docs/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var out []series
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			sel := selectorRe.FindAllStringSubmatch(r.Expr, -1)
			if len(sel) == 0 {
				t.Errorf("alert %s names no gatehouse_* metric", r.Alert)
			}
			for _, m := range sel {
				s := series{alert: r.Alert, metric: m[1], labels: map[string][]string{}}
				for _, lm := range matcherRe.FindAllStringSubmatch(m[2], -1) {
					vals := []string{lm[3]}
					if lm[2] == "=~" {
						vals = strings.Split(lm[3], "|")
					}
					s.labels[lm[1]] = vals
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// TestAlertMetricsExistAtStart scrapes a freshly started gatehouse on
// each backend. The counters are the process's: they are checked at 0 on
// the process's first scrape (the first backend's), present on the next.
func TestAlertMetricsExistAtStart(t *testing.T) {
	first := true
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		fresh := first
		first = false
		e := apptest.Start(t, b)
		resp, err := http.Get(e.AdminURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.LegacyValidation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range alertSeries(t) {
			f, ok := families[s.metric]
			if !ok || len(f.GetMetric()) == 0 {
				if !slices.Contains(perEntityGauges, s.metric) {
					t.Errorf("alert %s: %s is not exported at start", s.alert, s.metric)
				}
				continue
			}
			counter := f.GetType() == dto.MetricType_COUNTER
			if strings.HasSuffix(s.metric, "_total") && !counter {
				t.Errorf("%s is a %s, not a counter", s.metric, f.GetType())
			}
			for name, vals := range s.labels {
				for _, v := range vals {
					if !hasLabel(f, name, v) {
						t.Errorf("alert %s: %s{%s=%q} is not exported at start", s.alert, s.metric, name, v)
					}
				}
			}
			if !counter || !fresh {
				continue
			}
			for _, m := range f.GetMetric() {
				if v := m.GetCounter().GetValue(); v != 0 {
					t.Errorf("%s%v = %v at start, want 0", s.metric, m.GetLabel(), v)
				}
			}
		}
	})
}

func hasLabel(f *dto.MetricFamily, name, value string) bool {
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == name && l.GetValue() == value {
				return true
			}
		}
	}
	return false
}
