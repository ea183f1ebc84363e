package partner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gatehouse/internal/errs"
)

// ErrNonceMemoryFull refuses a signed request when the memory store's
// replay memory holds GATEHOUSE_NONCE_MEMORY_MAX nonces: refusing is the
// only safe answer (forgetting a nonce early would let its request be
// replayed), until entries expire. It is a dependency failure (503); the
// store logs it, rate-limited.
var ErrNonceMemoryFull = fmt.Errorf("%w: admit: the replay memory is full (GATEHOUSE_NONCE_MEMORY_MAX)", errs.Unavailable)

// Admitter is the gate's admission store: the nonces, the sliding-window
// rate limit and the replay memory's start, in one round trip. Its memory
// and Redis implementations are in internal/partner/admitstore.
type Admitter interface {
	// Admit is the signed-request gate in ONE round trip. When SignedAt is
	// set and earlier than the replay memory's start, it reports
	// BeforeStart and does nothing else. Otherwise it reports whether Nonce was already
	// seen for App within NonceTTL. When Verified is true (the signature checked out) and the
	// nonce is new, it atomically records the nonce (TTL NonceTTL) and applies the sliding-window
	// rate limit: if the number of admitted requests of App in the last Window is already >= Limit,
	// the request is refused (Limited) and NOT counted; otherwise it is counted.
	// When Verified is false it only reports DuplicateNonce and records nothing.
	// The nonce is recorded even when the request is then rate-limited (it was a verified request).
	// A store that cannot answer fails with errs.Unavailable.
	Admit(ctx context.Context, r AdmitRequest) (Admission, error)
}

// AdmitRequest is one signed request presented to [Admitter.Admit].
type AdmitRequest struct {
	App      string        // rate-limit and nonce namespace (the app key)
	Nonce    string        // the request's nonce, unique per App within NonceTTL
	NonceTTL time.Duration // 5 minutes in production
	Verified bool          // the signature checked out; only then is anything recorded
	Limit    int           // requests per Window
	Window   time.Duration // 1 second in production
	// SignedAt is the request's signed timestamp; zero skips the replay
	// memory's start check.
	SignedAt time.Time
}

// Admission is the outcome of [Admitter.Admit]. Limited, Remaining and
// RetryAfter are only meaningful for a verified request with a new nonce.
type Admission struct {
	// BeforeStart: the request was signed before the replay memory's
	// start (Start): its nonce may have been used and forgotten since.
	// Nothing else is reported or recorded.
	BeforeStart    bool
	Start          time.Time
	DuplicateNonce bool
	Limited        bool
	Limit          int
	Remaining      int           // admissions left in the current window after this one (>= 0)
	RetryAfter     time.Duration // when Limited: time until the oldest counted request leaves the window
}

// Validate rejects requests that would make the outcome meaningless; every
// [Admitter] calls it first, so both implementations refuse the same.
func (r AdmitRequest) Validate() error {
	switch {
	case r.App == "":
		return errors.New("admit: empty app")
	case r.Nonce == "":
		return errors.New("admit: empty nonce")
	case r.NonceTTL < time.Millisecond:
		// Redis expiry has millisecond resolution.
		return fmt.Errorf("admit: nonce TTL %v is below 1ms", r.NonceTTL)
	case !r.Verified:
		return nil
	case r.Limit < 1:
		return fmt.Errorf("admit: limit %d is below 1", r.Limit)
	case r.Window < time.Millisecond:
		return fmt.Errorf("admit: window %v is below 1ms", r.Window)
	}
	return nil
}
