package sender

import (
	"net/http"
	"strconv"
	"time"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/redact"
)

// verdict is what an attempt's outcome does to its delivery.
type verdict struct {
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

// decide is the delivery rule, without storage or clock: a 2xx reply is
// SUCCESS; any other reply or a transport failure is RETRYING, with the
// count up by one and the next attempt after retryDelay(count), while
// retryCount is below maxRetry, and FAILED (with the alert) once it has
// reached it. errText describes the failure (see failureText).
func decide(success bool, errText string, retryCount, maxRetry int, now time.Time, retryDelay func(n int) time.Duration) verdict {
	switch {
	case success:
		return verdict{Status: StatusSuccess, RetryCount: retryCount}
	case retryCount < maxRetry:
		return verdict{
			Status:        StatusRetrying,
			RetryCount:    retryCount + 1,
			NextAttemptAt: now.Add(retryDelay(retryCount + 1)),
			LastError:     errText,
		}
	default:
		return verdict{Status: StatusFailed, RetryCount: retryCount, LastError: errText, Alert: true}
	}
}

// failureText says why an attempt failed, for the delivery log: the
// transport error (with the callback URL, which may carry a token in its
// query, redacted) or the HTTP status; empty for a 2xx.
func failureText(o *outcome, callbackURL string) string {
	switch {
	case o.err != nil:
		return redact.Text(o.err.Error(), callbackURL)
	case !o.success():
		return "HTTP " + strconv.Itoa(o.status) + " " + http.StatusText(o.status)
	}
	return ""
}
