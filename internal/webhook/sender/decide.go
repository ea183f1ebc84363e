package sender

import (
	"net/http"
	"strconv"
	"time"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/redact"
)

// Verdict is what an attempt's outcome does to its delivery.
type Verdict struct {
	Status webhookdelivery.Status
	// RetryCount is the delivery's count after this attempt.
	RetryCount int
	// NextAttemptAt is when to try again (RETRYING only).
	NextAttemptAt time.Time
	// LastError is the failure to remember; empty on SUCCESS (cleared).
	LastError string
	// Alert: retries are exhausted, raise the alert.
	Alert bool
}

// Decide is the delivery rule, without storage or clock: a 2xx reply is
// SUCCESS; any other reply or a transport failure is RETRYING, with the
// count up by one and the next attempt after retryDelay(count), while
// retryCount is below maxRetry, and FAILED (with the alert) once it has
// reached it. errText describes the failure (see FailureText).
func Decide(success bool, errText string, retryCount, maxRetry int, now time.Time, retryDelay func(n int) time.Duration) Verdict {
	switch {
	case success:
		return Verdict{Status: webhookdelivery.StatusSUCCESS, RetryCount: retryCount}
	case retryCount < maxRetry:
		return Verdict{
			Status:        webhookdelivery.StatusRETRYING,
			RetryCount:    retryCount + 1,
			NextAttemptAt: now.Add(retryDelay(retryCount + 1)),
			LastError:     errText,
		}
	default:
		return Verdict{Status: webhookdelivery.StatusFAILED, RetryCount: retryCount, LastError: errText, Alert: true}
	}
}

// FailureText says why an attempt failed, for the delivery log: the
// transport error (with the callback URL, which may carry a token in its
// query, redacted) or the HTTP status; empty for a 2xx.
func FailureText(o *Outcome, callbackURL string) string {
	switch {
	case o.Err != nil:
		return redact.Text(o.Err.Error(), callbackURL)
	case !o.Success():
		return "HTTP " + strconv.Itoa(o.Status) + " " + http.StatusText(o.Status)
	}
	return ""
}
