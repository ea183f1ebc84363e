package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/deliveryattempt"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/outbound"
	"gatehouse/internal/store"
)

// Message is the body of every webhook request: the seed's webhook
// message, in this field order.
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

// MessageOf returns the body of the next attempt of d.
func MessageOf(d *ent.WebhookDelivery) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(Message{
		EventType:   d.EventType,
		BizData:     d.BizData,
		CallbackURL: d.CallbackURL,
		RetryCount:  d.RetryCount,
		MaxRetry:    d.MaxRetry,
		CreateTime:  d.CreateTime.UnixMilli(),
	})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// userAgent identifies gatehouse to receivers.
const userAgent = "gatehouse-webhooks/1"

// errNoSecret: the app has no webhook secret that can sign (none stored,
// or it cannot be unsealed with this master key).
var errNoSecret = errors.New("app has no usable webhook signing secret (rotate its webhook secret)")

// outcome is what one attempt produced.
type outcome struct {
	started     time.Time
	duration    time.Duration
	reqHeaders  http.Header
	reqBody     []byte
	status      int // 0: no reply
	respHeaders http.Header
	respBody    []byte
	err         error
}

func (o *outcome) success() bool { return o.status >= 200 && o.status < 300 }

// attempt makes one delivery attempt of d, which this process has leased,
// and stores its outcome.
func (s *Service) attempt(abort context.Context, d *ent.WebhookDelivery) {
	ctx, cancel := context.WithTimeout(abort, s.opt.AttemptTimeout)
	defer cancel()
	o := outcome{started: time.Now()}
	secrets, err := s.signingSecrets(ctx, d.AppID)
	switch {
	case errors.Is(err, errNoSecret):
		o.err = err
		s.finish(d, &o)
		return
	case err != nil:
		// The database is failing: nothing was sent. The lease runs out
		// and the delivery is tried again then.
		s.log.Error("webhook: loading the signing secrets failed", "delivery_id", d.ID, "err", err)
		s.release(d)
		return
	}
	if err := ValidateCallbackURL(d.CallbackURL, true); err != nil {
		// Addresses are checked when connecting (GuardedDialer); here only
		// the form, which cannot get better by retrying but is recorded
		// like any failure so the operator sees it.
		o.err = err
		s.finish(d, &o)
		return
	}

	body := MessageOf(d)
	ts := time.Now()
	sig := Sign(d.EventID, ts, body, secrets...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.CallbackURL, bytes.NewReader(body))
	if err != nil {
		o.err = err
		s.finish(d, &o)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(HeaderID, d.EventID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)
	req.Header.Set(HeaderLegacySignature, sig)
	o.reqHeaders = req.Header.Clone()
	o.reqHeaders.Set("Content-Length", strconv.Itoa(len(body)))
	o.reqBody = body

	o.started = time.Now()
	// No circuit breaker: the contract fixes every delivery's attempts (the
	// first at once, then after 1, 2, 4, 8, 16 × base), and a breaker
	// opened by other deliveries to the same host would delay or skip
	// them. The schedule is the backoff; each attempt is bounded by the
	// connect, read and attempt timeouts.
	resp, err := s.http.Do(ctx, req, outbound.CallOptions{NoBreaker: true})
	if err == nil {
		o.status = resp.StatusCode
		o.respHeaders = resp.Header
		o.respBody, err = io.ReadAll(io.LimitReader(resp.Body, MaxStoredResponseBody))
		_ = resp.Body.Close()
		if err != nil {
			err = fmt.Errorf("reading the response body: %w", err)
		}
	}
	o.duration = time.Since(o.started)
	o.err = err
	switch {
	case err != nil && abort.Err() != nil:
		// Shutting down cut the attempt short. It is not counted; the
		// next owner sends it again (at-least-once). An attempt that got
		// its whole reply before the abort is recorded as usual.
		s.release(d)
	default:
		s.finish(d, &o)
	}
}

// signingSecrets returns the plaintext secrets app appID signs with now:
// the current one, then the previous one while its rotation overlap lasts.
func (s *Service) signingSecrets(ctx context.Context, appID int) ([]string, error) {
	app, err := s.client.PartnerApp.Get(ctx, appID)
	if err != nil {
		return nil, err
	}
	var out []string
	open := func(sealed []byte) {
		p, err := s.sealer.Open(sealed)
		if err != nil {
			return
		}
		if _, err := ParseSecret(string(p)); err == nil {
			out = append(out, string(p))
		}
	}
	if app.WebhookSecret != nil {
		open(*app.WebhookSecret)
	}
	if app.PreviousWebhookSecret != nil && app.PreviousWebhookSecretExpiresAt != nil &&
		time.Now().Before(*app.PreviousWebhookSecretExpiresAt) {
		open(*app.PreviousWebhookSecret)
	}
	if len(out) == 0 {
		return nil, errNoSecret
	}
	return out, nil
}

// storeCtx bounds the database writes after an attempt. They do not
// depend on the attempt's context: an attempt that completed is recorded
// even while shutting down.
func storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// finish stores the attempt and moves the delivery on: SUCCESS on a 2xx,
// else RETRYING with the next delay, or FAILED once retries are spent.
// The delivery changes only while this worker still holds the lease; the
// attempt is stored either way, since it happened.
func (s *Service) finish(d *ent.WebhookDelivery, o *outcome) {
	ctx, cancel := storeCtx()
	defer cancel()
	errText := ""
	switch {
	case o.err != nil:
		errText = redactURL(o.err.Error(), d.CallbackURL)
	case !o.success():
		errText = "HTTP " + strconv.Itoa(o.status) + " " + http.StatusText(o.status)
	}
	var (
		attemptNo int
		newStatus webhookdelivery.Status
		owned     bool
	)
	now := dbTime(time.Now())
	record := func(tx *ent.Tx) error {
		n, err := tx.DeliveryAttempt.Query().Where(deliveryattempt.DeliveryID(d.ID)).Count(ctx)
		if err != nil {
			return err
		}
		attemptNo = n + 1
		c := tx.DeliveryAttempt.Create().
			SetDeliveryID(d.ID).
			SetAttemptNo(attemptNo).
			SetRequestHeaders(headerJSON(o.reqHeaders, true)).
			SetRequestBody(storableText(o.reqBody)).
			SetDurationMs(o.duration.Milliseconds()).
			SetStartedAt(dbTime(o.started))
		if o.status != 0 {
			c.SetResponseStatus(o.status).
				SetResponseHeaders(headerJSON(o.respHeaders, false)).
				SetResponseBody(storableText(o.respBody))
		}
		if o.err != nil {
			c.SetError(errText)
		}
		if _, err := c.Save(ctx); err != nil {
			return err
		}
		u := tx.WebhookDelivery.Update().
			Where(webhookdelivery.ID(d.ID), webhookdelivery.LeaseUntilEQ(*d.LeaseUntil)).
			ClearLeaseUntil().
			SetUpdateTime(now)
		switch {
		case o.success():
			newStatus = StatusSuccess
			u.SetStatus(newStatus).ClearLastError()
		case d.RetryCount < d.MaxRetry:
			newStatus = StatusRetrying
			u.SetStatus(newStatus).
				SetRetryCount(d.RetryCount + 1).
				SetNextAttemptAt(dbTime(now.Add(s.RetryDelay(d.RetryCount + 1)))).
				SetLastError(errText)
		default:
			newStatus = StatusFailed
			u.SetStatus(newStatus).SetLastError(errText)
		}
		n, err = u.Save(ctx)
		owned = n == 1
		return err
	}
	var err error
	for range 3 {
		// A constraint error means a worker that took the delivery over
		// recorded an attempt with the same number at the same moment:
		// number this one again.
		if err = store.WithTx(ctx, s.client, record); !ent.IsConstraintError(err) {
			break
		}
	}
	if err != nil {
		s.log.Error("webhook: storing an attempt failed", "delivery_id", d.ID, "err", err)
		return
	}
	s.observe(d, o, attemptNo)
	log := s.log.With("delivery_id", d.ID, "event_id", d.EventID, "event_type", d.EventType,
		"app_id", d.AppID, "attempt", attemptNo, "callback_host", hostOf(d.CallbackURL))
	if o.status != 0 {
		log = log.With("status", o.status)
	}
	if !owned {
		// Resent, or the lease ran out and another worker has it now.
		log.Warn("webhook: attempt finished after the delivery changed hands; its outcome is recorded but not applied")
		return
	}
	switch newStatus {
	case StatusSuccess:
		log.Debug("webhook delivered", "duration_ms", o.duration.Milliseconds())
	case StatusRetrying:
		log.Info("webhook attempt failed, will retry", "err", errText,
			"retry_in", s.RetryDelay(d.RetryCount+1).String())
	case StatusFailed:
		alertFailed(d.EventType)
		log.Error("ALERT webhook delivery FAILED: retries exhausted, resend it once the receiver is fixed",
			"retries", d.RetryCount, "last_error", errText)
	}
}

// RetryDelay is the wait before retry n (n ≥ 1): RetryBase×2^(n-1).
func (s *Service) RetryDelay(n int) time.Duration {
	return s.opt.RetryBase << min(max(n-1, 0), 20)
}

// release gives the lease back without counting an attempt.
func (s *Service) release(d *ent.WebhookDelivery) {
	ctx, cancel := storeCtx()
	defer cancel()
	if _, err := s.client.WebhookDelivery.Update().
		Where(webhookdelivery.ID(d.ID), webhookdelivery.LeaseUntilEQ(*d.LeaseUntil)).
		ClearLeaseUntil().
		Save(ctx); err != nil {
		s.log.Error("webhook: releasing a lease failed; it runs out by itself", "delivery_id", d.ID, "err", err)
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

// hostOf returns the host of a callback URL: what logs may show of it
// (paths and queries often carry the partner's own tokens).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	return u.Host
}

// redactURL replaces the callback URL in an error text (net/http quotes
// it) by its scheme and host.
func redactURL(msg, raw string) string {
	u, err := url.Parse(raw)
	short := "(callback URL)"
	if err == nil {
		short = u.Scheme + "://" + u.Host
	}
	q := strconv.Quote(raw)
	msg = strings.ReplaceAll(msg, q, strconv.Quote(short))
	return strings.ReplaceAll(msg, raw, short)
}
