package partner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// The signed-request limits (docs/reference.md).
const (
	// MaxClockSkew is how far a request's timestamp may be from the server's
	// clock, either way.
	MaxClockSkew = 5 * time.Minute
	// NonceTTL is how long a nonce is remembered per app, counted from the
	// later of its request's timestamp and its arrival (see nonceTTL).
	NonceTTL = 5 * time.Minute
	// RateWindow is the sliding window of the per-app rate limit.
	RateWindow = time.Second
	// MaxNonceLen is the longest nonce, in characters.
	MaxNonceLen = 64
)

// Reasons a signed request is refused, for errors.Is on a *RejectError.
// Their texts are the envelope's message meanings.
var (
	ErrInvalidAppKey  = errors.New("invalid app key")
	ErrRequestExpired = errors.New("request expired")
	ErrBadSignature   = errors.New("signature verification failed")
	ErrDuplicateNonce = errors.New("duplicate request")
	ErrRateLimited    = errors.New("too many requests")
)

// RejectError is a signed request refused by [Gate.Check]: Reason is one
// of the Err* reasons above, Detail says what exactly was wrong (safe to
// show to the caller: it never holds a secret).
type RejectError struct {
	Reason error
	Detail string
	// Limit and RetryAfter describe the rate limit when Reason is
	// ErrRateLimited (nothing remains of it then).
	Limit      int
	RetryAfter time.Duration
}

func (e *RejectError) Error() string {
	if e.Detail == "" {
		return e.Reason.Error()
	}
	return e.Reason.Error() + ": " + e.Detail
}

func (e *RejectError) Unwrap() error { return e.Reason }

func reject(reason error, format string, args ...any) *RejectError {
	return &RejectError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Admitted is a signed request that passed every check.
type Admitted struct {
	App *App
	// Limit and Remaining are the app's rate limit and what is left of it
	// in the current window, for the X-RateLimit-* headers.
	Limit, Remaining int
	// Query is the parsed query string; business handlers read their
	// parameters from it, so that what is used is what was signed.
	Query SignedQuery
}

// Gate runs the signed-request checks, in their documented order:
// app_key → timestamp → nonce → signature → rate limit. Everything but the
// nonce and the rate limit is decided in memory; those two take one
// key-value round trip ([Admitter.Admit]), after the signature has been
// computed locally, so that the order holds with a single round trip.
type Gate struct {
	apps *Service
	adm  Admitter
	now  func() time.Time
}

// NewGate returns a Gate over the apps of svc and the nonce/rate state of
// store (internal/partner/admitstore).
func NewGate(svc *Service, store Admitter) *Gate {
	return &Gate{apps: svc, adm: store, now: time.Now}
}

// SetClock replaces the clock used for timestamps, expire dates and
// rotation overlaps (tests only; not safe while requests run).
func (g *Gate) SetClock(now func() time.Time) { g.now = now }

// Check verifies the signed request with raw query string rawQuery. The
// error is a *RejectError, or wraps errs.Unavailable when a dependency (the
// database, the key-value store) did not answer and the request must not
// proceed, or is an internal error.
func (g *Gate) Check(ctx context.Context, rawQuery string) (Admitted, error) {
	q := ParseSignedQuery(rawQuery)
	now := g.now()

	// 1. app_key: known, enabled, not past its expire date.
	if q.AppKey == "" {
		return Admitted{}, reject(ErrInvalidAppKey, "app_key is missing")
	}
	var cred *credentials
	// A key no app can have is unknown without asking the database.
	if ValidateAppKey(q.AppKey) == nil {
		var err error
		if cred, err = g.apps.cache.get(ctx, q.AppKey); err != nil {
			return Admitted{}, err
		}
	}
	switch {
	case cred == nil:
		return Admitted{}, reject(ErrInvalidAppKey, "unknown app_key")
	case !cred.app.Enabled():
		return Admitted{}, reject(ErrInvalidAppKey, "app is disabled")
	case cred.app.ExpiredAt(now):
		return Admitted{}, reject(ErrInvalidAppKey, "app authorization expired on %s", cred.app.ExpireDate.Format(time.DateOnly))
	}

	// 2. timestamp: an integer of milliseconds within MaxClockSkew.
	ts, ok := parseMillis(q.Timestamp)
	switch {
	case q.Timestamp == "":
		return Admitted{}, reject(ErrRequestExpired, "timestamp is missing")
	case !ok:
		return Admitted{}, reject(ErrRequestExpired, "timestamp must be an integer of milliseconds since the epoch")
	}
	if skew := now.UnixMilli() - ts; skew > MaxClockSkew.Milliseconds() || -skew > MaxClockSkew.Milliseconds() {
		return Admitted{}, reject(ErrRequestExpired, "timestamp is more than %d ms from the server time %d", MaxClockSkew.Milliseconds(), now.UnixMilli())
	}

	// 3. nonce: present and short (its freshness is checked with the
	// signature's outcome below, in one round trip).
	switch {
	case q.Nonce == "":
		return Admitted{}, reject(ErrBadSignature, "nonce is missing")
	case utf8.RuneCountInString(q.Nonce) > MaxNonceLen:
		return Admitted{}, reject(ErrBadSignature, "nonce must be at most %d characters", MaxNonceLen)
	}

	// 4. signature (verify, in signature.go): CPU only, no round trip.
	sigErr := verify(&q, cred, now)

	// 3+4+5 in one round trip: a seen nonce wins over a bad signature (the nonce
	// is checked first); a good signature records the nonce and
	// takes a slot of the sliding window, atomically.
	adm, err := g.adm.Admit(ctx, AdmitRequest{
		App:      q.AppKey,
		Nonce:    q.Nonce,
		NonceTTL: nonceTTL(ts, now),
		Verified: sigErr == nil,
		Limit:    max(cred.app.RateLimit, 1), // >= 1 by schema; Admit refuses 0
		Window:   RateWindow,
		SignedAt: time.UnixMilli(ts),
	})
	if err != nil {
		return Admitted{}, fmt.Errorf("admit signed request: %w", err)
	}
	switch {
	case adm.BeforeStart:
		// Part of the timestamp check (2.), which needs the replay memory.
		return Admitted{}, reject(ErrRequestExpired, "the request was signed at %d, before the replay memory started at %d (nonces used before then may have been forgotten); sign it again with the current time",
			ts, adm.Start.UnixMilli())
	case adm.DuplicateNonce:
		return Admitted{}, reject(ErrDuplicateNonce, "nonce was already used by a request that is still within its %d-minute window", int(NonceTTL/time.Minute))
	case sigErr != nil:
		return Admitted{}, sigErr
	case adm.Limited:
		return Admitted{}, &RejectError{
			Reason:     ErrRateLimited,
			Detail:     fmt.Sprintf("the app's limit is %d requests per second", adm.Limit),
			Limit:      adm.Limit,
			RetryAfter: adm.RetryAfter,
		}
	}
	app := cred.app
	return Admitted{App: &app, Limit: adm.Limit, Remaining: adm.Remaining, Query: q}, nil
}

// nonceTTL remembers a nonce until max(its timestamp, arrival) + NonceTTL.
// A request stamped in the future (up to MaxClockSkew ahead) stays
// acceptable until its timestamp + MaxClockSkew, so its nonce must be
// remembered that long too, or it could be replayed once forgotten.
func nonceTTL(tsMillis int64, now time.Time) time.Duration {
	ahead := time.Duration(tsMillis-now.UnixMilli()) * time.Millisecond
	return NonceTTL + max(ahead, 0)
}

// parseMillis accepts 1–19 ASCII digits, nothing else (no sign, no space).
func parseMillis(s string) (int64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}
