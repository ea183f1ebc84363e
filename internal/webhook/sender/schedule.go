package sender

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"gatehouse/internal/errs"
	"gatehouse/internal/redact"
)

// Limits of an endpoint's retry schedule.
const (
	// MaxAttempts is the most attempts one delivery may get: the first
	// and at most MaxAttempts-1 retries.
	MaxAttempts = 20
	// MaxScheduleSpan bounds the sum of a schedule's waits: the last
	// retry comes at most this long after the first attempt (breaker and
	// rate-limit waits, and Retry-After, aside).
	MaxScheduleSpan = 30 * 24 * time.Hour
	// RetryAfterFactor bounds how far a receiver's Retry-After may push
	// the next attempt: at most this many times the scheduled wait.
	RetryAfterFactor = 4
)

// RetryPreset names a retry schedule the admin API accepts instead of
// the list of waits.
type RetryPreset string

// The presets.
const (
	// PresetDefault is the default schedule: 1, 2, 4, 8, 16 s (× the
	// retry base, GATEHOUSE_WEBHOOK_RETRY_BASE), 6 attempts over ~31 s.
	// It is stored as no schedule (null), so it follows the retry base.
	PresetDefault RetryPreset = "DEFAULT"
	// PresetLong is LongSchedule.
	PresetLong RetryPreset = "LONG"
)

// LongSchedule is the preset LONG, Svix's schedule: retries 5 s, 5 min,
// 30 min, 2 h, 5 h, 10 h and 10 h apart, 8 attempts over about 27.6 h. A
// receiver down for a deploy or a night still gets its deliveries.
var LongSchedule = []int{5, 300, 1800, 7200, 18000, 36000, 36000}

// PresetSchedule returns the waits of preset p (nil for PresetDefault:
// the endpoint keeps no schedule of its own).
func PresetSchedule(p RetryPreset) ([]int, error) {
	switch p {
	case PresetDefault:
		return nil, nil
	case PresetLong:
		return append([]int(nil), LongSchedule...), nil
	}
	return nil, errs.Invalid("retryPreset", "must be DEFAULT or LONG, not %s", redact.Echo(string(p)))
}

// CheckSchedule checks an endpoint's retry schedule: the waits in seconds
// before each retry, none negative, at most MaxAttempts-1 of them (the
// first attempt is not in the list), summing to at most MaxScheduleSpan.
// An empty schedule is allowed: one attempt, then FAILED.
func CheckSchedule(waits []int) error {
	if len(waits) > MaxAttempts-1 {
		return errs.Invalid("retrySchedule", "has %d waits: at most %d (a delivery gets at most %d attempts, the first one and a retry after each wait)",
			len(waits), MaxAttempts-1, MaxAttempts)
	}
	var span int64
	for i, w := range waits {
		if w < 0 {
			return errs.Invalid("retrySchedule", "wait %d is %d: waits are seconds, 0 or more", i+1, w)
		}
		span += int64(w)
		if span > int64(MaxScheduleSpan/time.Second) {
			return errs.Invalid("retrySchedule", "spans more than 30 days (%d s): the waits may sum to at most %d s",
				sum(waits), int64(MaxScheduleSpan/time.Second))
		}
	}
	return nil
}

func sum(xs []int) int64 {
	var n int64
	for _, x := range xs {
		n += int64(x)
	}
	return n
}

// MaxRetry is the message's maxRetry on the default schedule: retries
// after the first attempt (an endpoint's retry schedule has its own, see
// MaxRetryOf).
const MaxRetry = 5

// MaxRetryOf is the number of retries of a delivery to an endpoint with
// retry schedule waits (nil: the default schedule's MaxRetry): the
// message's maxRetry.
func MaxRetryOf(waits []int) int {
	if waits == nil {
		return MaxRetry
	}
	return len(waits)
}

// RetryDelayOf returns the wait before retry n (n ≥ 1) of a delivery to
// an endpoint with retry schedule waits: its n-th wait, or def for the
// default schedule (nil).
func RetryDelayOf(waits []int, def func(n int) time.Duration) func(n int) time.Duration {
	if waits == nil {
		return def
	}
	return func(n int) time.Duration {
		if n < 1 || n > len(waits) {
			return 0
		}
		return time.Duration(waits[n-1]) * time.Second
	}
}

// WithRetryAfter returns delay, except that when the reply (status and
// headers h) was a 429 or 503 with a Retry-After, the wait becomes what
// the receiver asked for, but never shorter than the schedule's and at
// most RetryAfterFactor times it: a receiver can slow its retries down,
// not speed them up nor push them out of the schedule's reach.
func WithRetryAfter(delay func(n int) time.Duration, status int, h http.Header, now time.Time) func(n int) time.Duration {
	asked, ok := retryAfter(status, h, now)
	if !ok {
		return delay
	}
	return func(n int) time.Duration {
		d := delay(n)
		return max(d, min(asked, RetryAfterFactor*d))
	}
}

// retryAfter reads the Retry-After of a 429 or 503 reply: a number of
// seconds or an HTTP date (measured from now, the wall clock).
func retryAfter(status int, h http.Header, now time.Time) (time.Duration, bool) {
	if status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
		return 0, false
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		// Beyond the cap anyway: keep the multiplication from overflowing.
		return time.Duration(min(secs, int64(MaxScheduleSpan/time.Second))) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}
