package dispatch

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"gatehouse/ent"
	"gatehouse/internal/redact"
	"gatehouse/internal/webhook/dispatch/adapter"
	"gatehouse/internal/webhook/sender"
)

// errNoSecret: the app has no webhook secret that can sign (none stored,
// or it cannot be unsealed with this master key).
var errNoSecret = errors.New("app has no usable webhook signing secret (rotate its webhook secret)")

// attempt makes one delivery attempt of j, which this process has leased,
// and stores its outcome. While the breaker of j's endpoint is open no
// attempt is made: the delivery waits, with no attempt used, until the
// breaker lets trial calls through. With handoff, a delivered j may
// return the next due delivery of its endpoint, leased to the caller
// with j's outcome (see the dispatcher's work). sent is called once the
// HTTP exchange is over, before the outcome is stored.
func (s *Dispatcher) attempt(abort context.Context, j job, handoff bool, sent func()) (next *job) {
	ctx, cancel := context.WithTimeout(abort, s.opt.AttemptTimeout)
	defer cancel()
	ctx, span := s.traceAttempt(ctx, j)
	defer span.End()
	o := sender.Outcome{Started: s.opt.Now()}
	defer sender.EndSpan(span, &o, j.CallbackURL)
	app, err := s.apps.get(ctx, j.EndpointID)
	if ent.IsNotFound(err) {
		// The endpoint was deleted after the claim (which cancelled the
		// delivery and took its lease): nothing to send.
		s.release(j)
		return nil
	}
	if err != nil {
		// The database is failing: nothing was sent. The lease is given
		// back (or runs out) and the delivery is tried again.
		s.log.Error("webhook: loading the endpoint failed", "delivery_id", j.ID, "endpoint_id", j.EndpointID, "err", err)
		s.release(j)
		return nil
	}
	ep := s.endpoint(app.key, j.AppID, j.EndpointID, j.CallbackURL)
	if ok, wait := s.limits.take(j.EndpointID, app.rateLimit, s.opt.Now()); !ok {
		// Over the endpoint's rate limit: the delivery waits its turn,
		// with no attempt used.
		span.SetAttributes(attribute.Bool("gatehouse.webhook.rate_limited", true))
		s.postponeFor(j, wait)
		return nil
	}
	if o.Err = s.unsendable(j, app); o.Err != nil {
		s.finish(j, &o, ep, app, false)
		return nil
	}
	o = s.send.Send(ctx, abort, sender.Attempt{
		DeliveryID: j.ID, EventID: j.EventID, Secrets: app.signingSecrets(s.opt.Now()),
		Message: sender.Message{
			EventType: j.EventType, BizData: j.BizData, CallbackURL: j.CallbackURL,
			RetryCount: j.RetryCount, MaxRetry: sender.MaxRetryOf(app.retry), CreateTime: j.CreateTime.UnixMilli(),
		},
		Headers: app.headers, Cert: app.cert, AppKey: app.key, BreakerKey: ep.key,
	}, s.log)
	if o.CircuitOpen {
		span.SetAttributes(attribute.Bool("gatehouse.webhook.breaker_open", true))
		s.postpone(j, ep)
		return nil
	}
	if o.Status == 0 && o.ReqHeaders == nil {
		// The request could not be built: nothing was sent.
		s.finish(j, &o, ep, app, false)
		return nil
	}
	sent()
	if o.Err != nil && abort.Err() != nil {
		// Shutting down cut the attempt short. It is not counted; the
		// next owner sends it again (at-least-once). An attempt that got
		// its whole reply before the abort is recorded as usual.
		s.release(j)
		return nil
	}
	return s.finish(j, &o, ep, app, handoff && o.Success() && abort.Err() == nil)
}

// unsendable says why j cannot be sent to app's endpoint (nil: it can):
// no secret signs, the stored URL's form is wrong, or the egress settings
// cannot be opened. Addresses are checked when connecting (the sender's
// guard); here only the form, which cannot get better by retrying but is
// recorded like any failure so the operator sees it.
func (s *Dispatcher) unsendable(j job, app *appInfo) error {
	if len(app.signingSecrets(s.opt.Now())) == 0 {
		return errNoSecret
	}
	if err := app.checkURL(j.CallbackURL); err != nil {
		return err
	}
	return app.egressErr
}

// storeCtx bounds the database writes after an attempt. They do not
// depend on the attempt's context: an attempt that completed is recorded
// even while shutting down.
func storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// finish stores the attempt and moves the delivery on as decide says:
// SUCCESS on a 2xx, else RETRYING with the next delay of the endpoint's
// retry schedule (app.retry; longer when a 429 or 503 asked for it with
// Retry-After, see sender.WithRetryAfter), or FAILED once its retries are
// spent. A retry due while the endpoint's breaker is open
// waits until it lets trial calls through. The delivery changes only while
// this worker still holds the lease; the attempt is stored either way,
// since it happened. With handoff it returns the delivery handed off
// with the outcome, if any (see record).
func (s *Dispatcher) finish(j job, o *sender.Outcome, ep endpoint, app *appInfo, handoff bool) *job {
	ctx, cancel := storeCtx()
	defer cancel()
	errText := sender.FailureText(o, j.CallbackURL)
	now := s.opt.Now()
	delay := sender.WithRetryAfter(sender.RetryDelayOf(app.retry, s.RetryDelay), o.Status, o.RespHeaders, now)
	v := sender.Decide(o.Success(), errText, j.RetryCount, sender.MaxRetryOf(app.retry), now, delay)
	if v.Status == StatusRetrying {
		v.NextAttemptAt = adapter.DBTime(latest(v.NextAttemptAt, now.Add(ep.remaining())))
	}
	row := adapter.AttemptRow{
		ReqHeaders: headerJSON(o.ReqHeaders, true),
		ReqBody:    storableText(o.ReqBody),
		DurationMs: o.Duration.Milliseconds(),
		StartedAt:  adapter.DBTime(o.Started),
	}
	if o.Status != 0 {
		row.Status = sql.NullInt64{Int64: int64(o.Status), Valid: true}
		row.RespHeaders = sql.NullString{String: headerJSON(o.RespHeaders, false), Valid: true}
		row.RespBody = sql.NullString{String: storableText(o.RespBody), Valid: true}
	}
	if o.Err != nil {
		row.Err = sql.NullString{String: errText, Valid: true}
	}
	owned, attemptNo, next, err := s.record(ctx, j, row, v, handoff)
	if err != nil {
		s.log.Error("webhook: storing an attempt failed", "delivery_id", j.ID, "err", err)
		return nil
	}
	s.observe(j, o, attemptNo)
	if !owned {
		// Resent, cancelled, or the lease ran out and another worker has it now.
		s.logOutcome(slog.LevelWarn, "webhook: attempt finished after the delivery changed hands; its outcome is recorded but not applied", j, attemptNo, o.Status)
		return next
	}
	if v.Alert {
		alertFailed(j.EventType)
	}
	switch v.Status {
	case StatusSuccess:
		s.logOutcome(slog.LevelDebug, "webhook delivered", j, attemptNo, o.Status, "duration_ms", o.Duration.Milliseconds())
	case StatusRetrying:
		s.logOutcome(slog.LevelInfo, "webhook attempt failed, will retry", j, attemptNo, o.Status,
			"err", errText, "retry_at", v.NextAttemptAt.Format(time.RFC3339Nano))
	case StatusFailed:
		s.logOutcome(slog.LevelError, "ALERT webhook delivery FAILED: retries exhausted, resend it once the receiver is fixed", j, attemptNo, o.Status,
			"retries", j.RetryCount, "last_error", errText)
	}
	return next
}

// logOutcome logs msg at level about attempt no of j (status: the
// reply's, 0 for none), with extra attributes, when the level is enabled:
// a delivered attempt logs at Debug, and its attributes are not gathered
// for nothing.
func (s *Dispatcher) logOutcome(level slog.Level, msg string, j job, no, status int, extra ...any) {
	ctx := context.Background()
	if !s.log.Enabled(ctx, level) {
		return
	}
	args := []any{"delivery_id", j.ID, "event_id", j.EventID, "event_type", j.EventType,
		"app_id", j.AppID, "attempt", no, "callback_host", hostOf(j.CallbackURL)}
	if status != 0 {
		args = append(args, "status", status)
	}
	s.log.Log(ctx, level, msg, append(args, extra...)...)
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// RetryDelay is the wait before retry n (n ≥ 1): RetryBase×2^(n-1).
func (s *Dispatcher) RetryDelay(n int) time.Duration {
	return s.opt.RetryBase << min(max(n-1, 0), 20)
}

// release gives the lease back without counting an attempt.
func (s *Dispatcher) release(j job) {
	ctx, cancel := storeCtx()
	defer cancel()
	if _, err := s.sql.Exec(ctx, nil, adapter.ReleaseSQL, adapter.ReleaseParams{DeliveryID: j.ID, Lease: j.Lease}.Args()...); err != nil {
		s.log.Error("webhook: releasing a lease failed; it runs out by itself", "delivery_id", j.ID, "err", err)
	}
}

// maxStoredHeaders bounds the stored headers of one request or reply.
const maxStoredHeaders = 16 << 10

// headerJSON renders headers as a JSON object of name → value (repeated
// headers joined by ", "). Signatures are stored redacted: they are not
// needed to debug a delivery and would let a reader replay it.
func headerJSON(h http.Header, redactSignatures bool) string {
	m := make(map[string]string, len(h))
	size := 2
	for k, vs := range h {
		v := strings.Join(vs, ", ")
		if redactSignatures && (strings.EqualFold(k, sender.HeaderSignature) || strings.EqualFold(k, sender.HeaderLegacySignature)) {
			v = sender.RedactSignature(v)
		}
		if size += len(k) + len(v) + 6; size > maxStoredHeaders {
			continue
		}
		m[k] = storableText([]byte(v))
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// storableText makes bytes storable in a text column: valid UTF-8 without
// NUL (Postgres refuses both).
func storableText(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// hostOf returns the host of a callback URL: what logs and spans may
// show of it (paths and queries often carry the partner's own tokens),
// whatever the host's form (see redact).
func hostOf(raw string) string { return redact.Host(raw) }
