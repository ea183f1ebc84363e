package outbound

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestDefaultConfigIsTheSpecification(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if c.ConnectTimeout != 3*time.Second || c.ReadTimeout != 5*time.Second ||
		c.MaxConns != 200 || c.MaxConnsPerHost != 50 ||
		c.RetryAttempts != 3 || !slices.Equal(c.RetryWaits, []time.Duration{time.Second, 2 * time.Second}) ||
		c.BreakerWindow != 10 || c.BreakerFailureRatio != 0.5 || c.BreakerOpenWait != 30*time.Second ||
		c.BreakerHalfOpenTrials != 5 {
		t.Errorf("DefaultConfig() = %+v", c)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	err := Config{MaxConns: 1, MaxConnsPerHost: 2, RetryAttempts: 3, RetryWaits: []time.Duration{-1}, BreakerFailureRatio: 2}.Validate()
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("error %v is not a joined error", err)
	}
	// connect, read, open wait, per host > total, negative wait, window, ratio, trials
	if n := len(joined.Unwrap()); n != 8 {
		t.Errorf("%d problems reported, want 8:\n%v", n, err)
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New accepted an invalid config")
	}
}
