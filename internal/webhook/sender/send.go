package sender

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"gatehouse/internal/outbound"
)

// MaxStoredResponseBody is how much of a reply's body is read (and stored).
const MaxStoredResponseBody = 64 << 10

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

// Attempt is one HTTP attempt to make.
type Attempt struct {
	// DeliveryID names the delivery in logs.
	DeliveryID int
	// EventID is the webhook-id header.
	EventID string
	Message Message
	// Secrets sign the request (at least one).
	Secrets []string
	// Headers are the endpoint's custom headers; Cert its client
	// certificate (nil: none).
	Headers []Header
	Cert    *outbound.ClientCert
	// AppKey chooses the client (LoopbackApps have their own); BreakerKey
	// is the endpoint's breaker.
	AppKey     string
	BreakerKey string
}

// Outcome is what one attempt produced.
type Outcome struct {
	Started     time.Time // on the Sender's clock
	Duration    time.Duration
	ReqHeaders  http.Header
	ReqBody     []byte
	Status      int // 0: no reply
	RespHeaders http.Header
	RespBody    []byte
	Err         error
	// CircuitOpen: the endpoint's breaker refused the attempt; nothing
	// was sent.
	CircuitOpen bool
}

// Success reports a 2xx reply.
func (o *Outcome) Success() bool { return o.Status >= 200 && o.Status < 300 }

// Send makes attempt a within ctx; abort is the caller's shutdown (a
// body cut by the attempt's own deadline is kept, one cut by abort is
// not). log receives the cut's note.
func (s *Sender) Send(ctx, abort context.Context, a Attempt, log *slog.Logger) Outcome {
	o := Outcome{Started: s.cfg.Now()}
	body := message(a.Message)
	ts := s.cfg.Now()
	sig := Sign(a.EventID, ts, body, a.Secrets...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.Message.CallbackURL, bytes.NewReader(body))
	if err != nil {
		o.Err = err
		return o
	}
	setHeaders(req, a.Headers)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(HeaderID, a.EventID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)
	req.Header.Set(HeaderLegacySignature, sig)
	injectTrace(ctx, req.Header)
	o.ReqHeaders = req.Header.Clone()
	o.ReqHeaders.Set("Content-Length", strconv.Itoa(len(body)))
	RedactHeaders(o.ReqHeaders, a.Headers)
	o.ReqBody = body

	o.Started = s.cfg.Now()
	// The duration is a measurement, on the monotonic clock: the
	// injected clock says what time it is, and tests move it.
	t0 := time.Now()
	resp, err := s.Client(a.AppKey).Do(ctx, req, outbound.CallOptions{BreakerKey: a.BreakerKey, ClientCert: a.Cert})
	if errors.Is(err, outbound.ErrCircuitOpen) {
		o.CircuitOpen = true
		return o
	}
	if err == nil {
		err = s.readReply(ctx, abort, resp, &o, a.DeliveryID, log)
	}
	o.Duration = time.Since(t0)
	o.Err = err
	return o
}

// readReply reads resp into o. Only the first 64 KiB are read: a
// receiver answering a huge (or endless) body costs no more than that. A
// body still arriving when the reply timeout (or the attempt's) runs out
// is cut there: the status has arrived and decides, the body kept is what
// came.
func (s *Sender) readReply(ctx, abort context.Context, resp *http.Response, o *Outcome, deliveryID int, log *slog.Logger) error {
	o.Status = resp.StatusCode
	o.RespHeaders = resp.Header
	var err error
	o.RespBody, err = io.ReadAll(io.LimitReader(resp.Body, MaxStoredResponseBody))
	_ = resp.Body.Close()
	if errors.Is(err, outbound.ErrReplyCut) || (err != nil && abort.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded)) {
		log.Debug("webhook: response body cut at the reply timeout", "delivery_id", deliveryID, "status", o.Status, "kept_bytes", len(o.RespBody))
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the response body: %w", err)
	}
	return nil
}
