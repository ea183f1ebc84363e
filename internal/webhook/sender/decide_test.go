package sender

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestDecide: the delivery rule on its own — no database, no clock.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	delay := func(n int) time.Duration { return time.Second << (n - 1) } // 1, 2, 4, 8, 16 s
	cases := []struct {
		name       string
		success    bool
		retryCount int
		want       verdict
	}{
		{"first attempt succeeds", true, 0, verdict{Status: StatusSuccess, RetryCount: 0}},
		{"a retry succeeds, error cleared", true, 3, verdict{Status: StatusSuccess, RetryCount: 3}},
		{"first failure", false, 0, verdict{Status: StatusRetrying, RetryCount: 1, NextAttemptAt: now.Add(time.Second), LastError: "boom"}},
		{"fourth failure", false, 3, verdict{Status: StatusRetrying, RetryCount: 4, NextAttemptAt: now.Add(8 * time.Second), LastError: "boom"}},
		{"fifth failure: last retry in 16 s", false, 4, verdict{Status: StatusRetrying, RetryCount: 5, NextAttemptAt: now.Add(16 * time.Second), LastError: "boom"}},
		{"sixth failure: FAILED with the alert", false, 5, verdict{Status: StatusFailed, RetryCount: 5, LastError: "boom", Alert: true}},
		{"past maxRetry (lowered): FAILED", false, 7, verdict{Status: StatusFailed, RetryCount: 7, LastError: "boom", Alert: true}},
	}
	for _, c := range cases {
		errText := ""
		if !c.success {
			errText = "boom"
		}
		if got := decide(c.success, errText, c.retryCount, MaxRetry, now, delay); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	// Six attempts in all: five retries after the first, then FAILED.
	v, attempts := verdict{}, 0
	for v.Status != StatusFailed {
		v = decide(false, "x", v.RetryCount, MaxRetry, now, delay)
		attempts++
	}
	if attempts != 6 {
		t.Fatalf("%d attempts before FAILED, want 6", attempts)
	}
}

func TestFailureText(t *testing.T) {
	cb := "https://hooks.example.com/cb?token=s3cret"
	for _, c := range []struct {
		o    outcome
		want string
	}{
		{outcome{status: 204}, ""},
		{outcome{status: 503}, "HTTP 503 Service Unavailable"},
		{outcome{status: 302}, "HTTP 302 Found"},
		{outcome{err: errors.New(`Post "` + cb + `": dial tcp: connection refused`)}, "connection refused"},
	} {
		got := failureText(&c.o, cb)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) || strings.Contains(got, "s3cret") {
			t.Errorf("%+v: %q, want %q without the token", c.o, got, c.want)
		}
	}
}
