package dispatch

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"gatehouse/ent"
	"gatehouse/internal/outbound"
	"gatehouse/internal/redact"
)

// Message is the body of every webhook request, the webhook message of
// docs/reference.md, in this field order.
type Message struct {
	EventType string `json:"eventType"`
	// BizData is the event's JSON payload, as a string.
	BizData     string `json:"bizData"`
	CallbackURL string `json:"callbackUrl"`
	// RetryCount is the number of failed attempts before this one.
	RetryCount int `json:"retryCount"`
	MaxRetry   int `json:"maxRetry"`
	// CreateTime is when the event happened, in ms since the epoch.
	CreateTime int64 `json:"createTime"`
}

func message(m Message) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(m)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// userAgent identifies gatehouse to receivers.
const userAgent = "gatehouse-webhooks/1"

// errNoSecret: the app has no webhook secret that can sign (none stored,
// or it cannot be unsealed with this master key).
var errNoSecret = errors.New("app has no usable webhook signing secret (rotate its webhook secret)")

// outcome is what one attempt produced.
type outcome struct {
	started     time.Time // on the service's clock (stored)
	duration    time.Duration
	reqHeaders  http.Header
	reqBody     []byte
	status      int // 0: no reply
	respHeaders http.Header
	respBody    []byte
	err         error
}

func (o *outcome) success() bool { return o.status >= 200 && o.status < 300 }

// attempt makes one delivery attempt of j, which this process has leased,
// and stores its outcome. While the breaker of j's endpoint is open no
// attempt is made: the delivery waits, with no attempt used, until the
// breaker lets trial calls through. With handoff, a delivered j may
// return the next due delivery of its endpoint, leased to the caller
// with j's outcome (see the dispatcher's work). sent is called once the
// HTTP exchange is over, before the outcome is stored.
func (s *Service) attempt(abort context.Context, j job, handoff bool, sent func()) (next *job) {
	ctx, cancel := context.WithTimeout(abort, s.opt.AttemptTimeout)
	defer cancel()
	ctx, span := s.traceAttempt(ctx, j)
	defer span.End()
	o := outcome{started: s.now()}
	defer endAttempt(span, &o, j.CallbackURL)
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
	if ok, wait := s.limits.take(j.EndpointID, app.rateLimit, time.Now()); !ok {
		// Over the endpoint's rate limit: the delivery waits its turn,
		// with no attempt used.
		span.SetAttributes(attribute.Bool("gatehouse.webhook.rate_limited", true))
		s.postponeFor(j, wait)
		return nil
	}
	secrets := app.signingSecrets(s.opt.Now())
	if len(secrets) == 0 {
		o.err = errNoSecret
		s.finish(j, &o, ep, app, false)
		return nil
	}
	if err := app.checkURL(j.CallbackURL); err != nil {
		// Addresses are checked when connecting (GuardedDialer); here only
		// the form, which cannot get better by retrying but is recorded
		// like any failure so the operator sees it.
		o.err = err
		s.finish(j, &o, ep, app, false)
		return nil
	}
	if app.egressErr != nil {
		o.err = app.egressErr
		s.finish(j, &o, ep, app, false)
		return nil
	}

	body := message(Message{
		EventType: j.EventType, BizData: j.BizData, CallbackURL: j.CallbackURL,
		RetryCount: j.RetryCount, MaxRetry: maxRetryOf(app.retry), CreateTime: j.CreateTime.UnixMilli(),
	})
	ts := time.Now()
	sig := Sign(j.EventID, ts, body, secrets...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.CallbackURL, bytes.NewReader(body))
	if err != nil {
		o.err = err
		s.finish(j, &o, ep, app, false)
		return nil
	}
	app.setHeaders(req)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(HeaderID, j.EventID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)
	req.Header.Set(HeaderLegacySignature, sig)
	injectTrace(ctx, req.Header)
	o.reqHeaders = req.Header.Clone()
	o.reqHeaders.Set("Content-Length", strconv.Itoa(len(body)))
	app.redactHeaders(o.reqHeaders)
	o.reqBody = body

	o.started = s.now()
	t0 := time.Now()
	resp, err := ep.client.Do(ctx, req, outbound.CallOptions{BreakerKey: ep.key, ClientCert: app.cert})
	if errors.Is(err, outbound.ErrCircuitOpen) {
		span.SetAttributes(attribute.Bool("gatehouse.webhook.breaker_open", true))
		s.postpone(j, ep)
		return nil
	}
	if err == nil {
		o.status = resp.StatusCode
		o.respHeaders = resp.Header
		// Only the first 64 KiB are read: a receiver answering a huge (or
		// endless) body costs no more than that. A body still arriving
		// when the reply timeout (or the attempt's) runs out is cut there:
		// the status has arrived and decides, the body kept is what came.
		o.respBody, err = io.ReadAll(io.LimitReader(resp.Body, MaxStoredResponseBody))
		_ = resp.Body.Close()
		if errors.Is(err, outbound.ErrReplyCut) || (err != nil && abort.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded)) {
			s.log.Debug("webhook: response body cut at the reply timeout", "delivery_id", j.ID, "status", o.status, "kept_bytes", len(o.respBody))
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("reading the response body: %w", err)
		}
	}
	o.duration = time.Since(t0)
	o.err = err
	sent()
	switch {
	case err != nil && abort.Err() != nil:
		// Shutting down cut the attempt short. It is not counted; the
		// next owner sends it again (at-least-once). An attempt that got
		// its whole reply before the abort is recorded as usual.
		s.release(j)
		return nil
	default:
		return s.finish(j, &o, ep, app, handoff && o.success() && abort.Err() == nil)
	}
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
// Retry-After, see withRetryAfter), or FAILED once its retries are
// spent. A retry due while the endpoint's breaker is open
// waits until it lets trial calls through. The delivery changes only while
// this worker still holds the lease; the attempt is stored either way,
// since it happened. With handoff it returns the delivery handed off
// with the outcome, if any (see record).
func (s *Service) finish(j job, o *outcome, ep endpoint, app *appInfo, handoff bool) *job {
	ctx, cancel := storeCtx()
	defer cancel()
	errText := failureText(o, j.CallbackURL)
	now := s.opt.Now()
	delay := withRetryAfter(s.retryDelayOf(app.retry), o.status, o.respHeaders, time.Now())
	v := decide(o.success(), errText, j.RetryCount, maxRetryOf(app.retry), now, delay)
	if v.Status == StatusRetrying {
		v.NextAttemptAt = dbTime(latest(v.NextAttemptAt, now.Add(ep.remaining())))
	}
	row := attemptRow{
		reqHeaders: headerJSON(o.reqHeaders, true),
		reqBody:    storableText(o.reqBody),
		durationMs: o.duration.Milliseconds(),
		startedAt:  dbTime(o.started),
	}
	if o.status != 0 {
		row.status = sql.NullInt64{Int64: int64(o.status), Valid: true}
		row.respHeaders = sql.NullString{String: headerJSON(o.respHeaders, false), Valid: true}
		row.respBody = sql.NullString{String: storableText(o.respBody), Valid: true}
	}
	if o.err != nil {
		row.err = sql.NullString{String: errText, Valid: true}
	}
	owned, attemptNo, next, err := s.record(ctx, j, row, v, handoff)
	if err != nil {
		s.log.Error("webhook: storing an attempt failed", "delivery_id", j.ID, "err", err)
		return nil
	}
	s.observe(j, o, attemptNo)
	if !owned {
		// Resent, cancelled, or the lease ran out and another worker has it now.
		s.logOutcome(slog.LevelWarn, "webhook: attempt finished after the delivery changed hands; its outcome is recorded but not applied", j, attemptNo, o.status)
		return next
	}
	if v.Alert {
		alertFailed(j.EventType)
	}
	switch v.Status {
	case StatusSuccess:
		s.logOutcome(slog.LevelDebug, "webhook delivered", j, attemptNo, o.status, "duration_ms", o.duration.Milliseconds())
	case StatusRetrying:
		s.logOutcome(slog.LevelInfo, "webhook attempt failed, will retry", j, attemptNo, o.status,
			"err", errText, "retry_at", v.NextAttemptAt.Format(time.RFC3339Nano))
	case StatusFailed:
		s.logOutcome(slog.LevelError, "ALERT webhook delivery FAILED: retries exhausted, resend it once the receiver is fixed", j, attemptNo, o.status,
			"retries", j.RetryCount, "last_error", errText)
	}
	return next
}

// logOutcome logs msg at level about attempt no of j (status: the
// reply's, 0 for none), with extra attributes, when the level is enabled:
// a delivered attempt logs at Debug, and its attributes are not gathered
// for nothing.
func (s *Service) logOutcome(level slog.Level, msg string, j job, no, status int, extra ...any) {
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
func (s *Service) RetryDelay(n int) time.Duration {
	return s.opt.RetryBase << min(max(n-1, 0), 20)
}

// release gives the lease back without counting an attempt.
func (s *Service) release(j job) {
	ctx, cancel := storeCtx()
	defer cancel()
	if _, err := s.sql.exec(ctx, nil, releaseSQL, releaseParams{DeliveryID: j.ID, Lease: j.Lease}.args()...); err != nil {
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
		if redactSignatures && (strings.EqualFold(k, HeaderSignature) || strings.EqualFold(k, HeaderLegacySignature)) {
			v = redactSignature(v)
		}
		if size += len(k) + len(v) + 6; size > maxStoredHeaders {
			continue
		}
		m[k] = storableText([]byte(v))
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// redactSignature keeps the shape of a signature header ("v1,… v1,…", one
// entry per secret) without the MACs.
func redactSignature(v string) string {
	parts := strings.Fields(v)
	for i, p := range parts {
		if ver, _, ok := strings.Cut(p, ","); ok {
			parts[i] = ver + ",[redacted]"
		} else {
			parts[i] = "[redacted]"
		}
	}
	return strings.Join(parts, " ")
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
