package sender

import (
	"errors"
	"strings"
	"testing"
	"time"

	"gatehouse/ent/webhookdelivery"
)

// maxRetry is the default schedule's (five retries after the first attempt).
const maxRetry = 5

// TestDecide: the delivery rule on its own — no database, no clock.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	delay := func(n int) time.Duration { return time.Second << (n - 1) } // 1, 2, 4, 8, 16 s
	cases := []struct {
		name       string
		success    bool
		retryCount int
		want       Verdict
	}{
		{"first attempt succeeds", true, 0, Verdict{Status: webhookdelivery.StatusSUCCESS, RetryCount: 0}},
		{"a retry succeeds, error cleared", true, 3, Verdict{Status: webhookdelivery.StatusSUCCESS, RetryCount: 3}},
		{"first failure", false, 0, Verdict{Status: webhookdelivery.StatusRETRYING, RetryCount: 1, NextAttemptAt: now.Add(time.Second), LastError: "boom"}},
		{"fourth failure", false, 3, Verdict{Status: webhookdelivery.StatusRETRYING, RetryCount: 4, NextAttemptAt: now.Add(8 * time.Second), LastError: "boom"}},
		{"fifth failure: last retry in 16 s", false, 4, Verdict{Status: webhookdelivery.StatusRETRYING, RetryCount: 5, NextAttemptAt: now.Add(16 * time.Second), LastError: "boom"}},
		{"sixth failure: FAILED with the alert", false, 5, Verdict{Status: webhookdelivery.StatusFAILED, RetryCount: 5, LastError: "boom", Alert: true}},
		{"past maxRetry (lowered): FAILED", false, 7, Verdict{Status: webhookdelivery.StatusFAILED, RetryCount: 7, LastError: "boom", Alert: true}},
	}
	for _, c := range cases {
		errText := ""
		if !c.success {
			errText = "boom"
		}
		if got := Decide(c.success, errText, c.retryCount, maxRetry, now, delay); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	// Six attempts in all: five retries after the first, then FAILED.
	v, attempts := Verdict{}, 0
	for v.Status != webhookdelivery.StatusFAILED {
		v = Decide(false, "x", v.RetryCount, maxRetry, now, delay)
		attempts++
	}
	if attempts != 6 {
		t.Fatalf("%d attempts before FAILED, want 6", attempts)
	}
}

func TestFailureText(t *testing.T) {
	cb := "https://hooks.example.com/cb?token=s3cret"
	for _, c := range []struct {
		o    Outcome
		want string
	}{
		{Outcome{Status: 204}, ""},
		{Outcome{Status: 503}, "HTTP 503 Service Unavailable"},
		{Outcome{Status: 302}, "HTTP 302 Found"},
		{Outcome{Err: errors.New(`Post "` + cb + `": dial tcp: connection refused`)}, "connection refused"},
	} {
		got := FailureText(&c.o, cb)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) || strings.Contains(got, "s3cret") {
			t.Errorf("%+v: %q, want %q without the token", c.o, got, c.want)
		}
	}
}
