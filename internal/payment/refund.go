package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"gatehouse/ent"
	"gatehouse/internal/errs"
	"gatehouse/internal/order"
	"gatehouse/internal/outbound"
	"gatehouse/internal/telemetry"
)

// MaxReasonLen is the longest refund reason, in characters.
const MaxReasonLen = 256

// maxReplyBody is how much of the provider's reply is read (and then
// dropped): enough to reuse the connection, bounded against a huge body.
const maxReplyBody = 64 << 10

// replyDrainTime bounds reading the provider's reply body (see discardReply).
const replyDrainTime = time.Second

// RefundRequest is the JSON body POSTed to {URL}/refunds.
type RefundRequest struct {
	OrderNo string `json:"order_no"`
	// Amount is the order's whole amount as a decimal string: "99.90".
	Amount string `json:"amount"`
	// Reason is the operator's reason, "" when none was given.
	Reason string `json:"reason"`
}

// accepted is what is stored, for 24 hours, once the provider said yes: the
// next refundOrder of the order completes from it without calling again.
type accepted struct {
	Status int       `json:"status"`
	Reason string    `json:"reason"` // as sent to the provider
	At     time.Time `json:"at"`
}

// Refund refunds order orderNo (PAID → REFUNDED) through the payment
// provider, with an optional reason, and returns the order.
//
//   - No provider configured: ErrNotConfigured. Unknown order: order.ErrNotFound.
//     Not PAID: order.ErrInvalidState (but see the repeat below).
//   - Another refund of the order in flight: ErrInProgress (a Conflict).
//   - The provider accepts (2xx): its yes is stored for 24 h, then the order
//     becomes REFUNDED and order.refunded is queued in one transaction.
//   - A repeat within 24 h of an accepted refund (also one whose commit
//     failed or was cut short by a crash) returns the order REFUNDED
//     without calling the provider.
//   - The breaker is open: an errs.UpstreamUnavailable error at once,
//     nothing sent. Anything else (a refusal, 5xx after the retries, no
//     answer): an errs.PaymentFailed error carrying a *Failure; nothing is
//     stored and the order stays PAID, so the refund may be tried again.
func (s *Service) Refund(ctx context.Context, orderNo, reason string) (*ent.Order, error) {
	if !s.Configured() {
		return nil, ErrNotConfigured
	}
	reason, err := checkReason(reason)
	if err != nil {
		return nil, err
	}
	o, err := s.orders.Get(ctx, orderNo)
	if err != nil {
		return nil, err
	}
	// A REFUNDED order goes on: a stored yes makes this a repeat.
	if o.Status != order.Refunded {
		if err := order.CheckRefundable(o); err != nil {
			return nil, err
		}
	}
	res, err := outbound.CallOnce(ctx, s.kv, IdempotencyKey(orderNo), func(ctx context.Context) ([]byte, error) {
		return s.exchange(ctx, orderNo, reason)
	})
	switch {
	case errors.Is(err, outbound.ErrInProgress):
		return nil, ErrInProgress
	case res == nil:
		return nil, err
	case err != nil:
		// The provider said yes but the kv store did not keep it. The
		// order is changed all the same; should that fail too, the next
		// refundOrder calls again with the same Idempotency-Key (once the
		// lock expires) and the provider answers as before.
		s.log.ErrorContext(ctx, "payment: the provider accepted a refund but its result could not be stored", "order_no", orderNo, "err", err)
	}
	var yes accepted
	if err := json.Unmarshal(res, &yes); err != nil {
		return nil, fmt.Errorf("payment: stored refund result of %s: %w", orderNo, err)
	}
	return s.orders.CompleteRefund(ctx, orderNo, yes.Reason)
}

// exchange makes the refund call (with its retries), under the
// idempotency lock. It returns the stored form of a yes, or an error for
// anything else (nothing is stored then).
func (s *Service) exchange(ctx context.Context, orderNo, reason string) ([]byte, error) {
	// Under the lock the order's state is authoritative: a refund that
	// completed after our first look, and whose result has expired, is not
	// sent again.
	o, err := s.orders.Get(ctx, orderNo)
	if err != nil {
		return nil, err
	}
	if err := order.CheckRefundable(o); err != nil {
		return nil, err
	}
	body, err := encode(RefundRequest{OrderNo: orderNo, Amount: order.FormatAmount(o.Amount), Reason: reason})
	if err != nil {
		return nil, err
	}
	// Once the first attempt may have reached the provider the exchange is
	// seen through to an answer, whatever happens to the caller's request:
	// a yes must be recorded.
	xctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ExchangeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(xctx, http.MethodPost, s.refundsURL(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("payment: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "gatehouse")
	req.Header.Set("Idempotency-Key", IdempotencyKey(orderNo))
	xctx, span := s.traceRefund(xctx, orderNo)
	defer span.End()
	// The provider is outside the trust boundary: a fresh traceparent,
	// recorded on the refund's span, and no tracestate.
	if sc := telemetry.InjectExternal(xctx, req.Header); sc.IsValid() {
		span.SetAttributes(attribute.String(telemetry.AttrExternalTraceID, sc.TraceID().String()))
	}
	log := s.log.With("order_no", orderNo, "idempotency_key", IdempotencyKey(orderNo))
	// Idempotent: the key makes a repeated POST safe, so it is retried.
	resp, err := s.client.Do(xctx, req, outbound.CallOptions{Idempotent: true, Signer: s.signer, BreakerKey: BreakerKey})
	endRefund(span, resp, err)
	if err != nil {
		var open *outbound.OpenError
		if errors.As(err, &open) && open.Attempts == 0 {
			countRefund(outcomeBreakerOpen)
			log.WarnContext(ctx, "payment: refund refused at once, the provider's circuit breaker is open")
			return nil, &errs.Error{Kind: errs.UpstreamUnavailable, Err: err, Msg: fmt.Sprintf(
				"the payment provider is not being called: its circuit breaker is open after repeated failures; retry in %s",
				max(s.client.BreakerRemaining(BreakerKey).Round(time.Second), time.Second))}
		}
		f := &Failure{OrderNo: orderNo, Problem: problem(err)}
		countRefund(outcomeFailed)
		if errors.As(err, &open) {
			f.Status = open.LastStatus
			f.Problem = httpProblem(open.LastStatus)
			if open.LastErr != nil {
				f.Problem = problem(open.LastErr)
			}
			f.Problem += " (then its circuit breaker opened: it is not called for a while)"
		}
		log.WarnContext(ctx, "payment: refund failed", "status", f.Status, "err", err)
		return nil, f.err()
	}
	discardReply(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		f := &Failure{OrderNo: orderNo, Status: resp.StatusCode, Problem: httpProblem(resp.StatusCode)}
		countRefund(outcomeRefused)
		log.WarnContext(ctx, "payment: the provider did not accept the refund", "status", resp.StatusCode)
		return nil, f.err()
	}
	countRefund(outcomeAccepted)
	log.InfoContext(ctx, "payment: the provider accepted the refund", "status", resp.StatusCode)
	return json.Marshal(accepted{Status: resp.StatusCode, Reason: reason, At: time.Now().UTC()})
}

// discardReply reads and drops the provider's reply body — at most
// maxReplyBody, for at most replyDrainTime — so the connection can be
// reused. The status is the answer: a provider that trickles its body must
// not hold the refund (and the admin's request) any longer than that.
func discardReply(body io.ReadCloser) {
	stop := time.AfterFunc(replyDrainTime, func() { _ = body.Close() })
	defer stop.Stop()
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxReplyBody))
	_ = body.Close()
}

// Failure is a refund the provider did not accept: a refusal, a failure
// that outlasted the retries, or no answer. GraphQL shows Status as
// extensions.providerStatus.
type Failure struct {
	OrderNo string
	// Status is the provider's last HTTP status; 0 when it gave no answer.
	Status int
	// Problem says what happened: "HTTP 500 Internal Server Error", "read timeout", …
	Problem string
}

func (f *Failure) Error() string {
	return fmt.Sprintf("the payment provider did not accept the refund of order %s: %s; the order stays PAID", f.OrderNo, f.Problem)
}

// ProviderStatus is the provider's HTTP status (0: no answer).
func (f *Failure) ProviderStatus() int { return f.Status }

func (f *Failure) err() error { return &errs.Error{Kind: errs.PaymentFailed, Msg: f.Error(), Err: f} }

func httpProblem(status int) string {
	return fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
}

// problem describes a call that got no reply, without addresses.
func problem(err error) string {
	switch {
	case errors.Is(err, outbound.ErrConnectTimeout):
		return "no answer (connect timeout)"
	case errors.Is(err, outbound.ErrReadTimeout):
		return "no answer (read timeout)"
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer in time"
	}
	return "no answer (the connection failed)"
}

// checkReason trims the reason and checks it is text of at most
// MaxReasonLen characters.
func checkReason(r string) (string, error) { return errs.Text("reason", r, MaxReasonLen) }

// encode is JSON without HTML escaping: the body the provider receives and
// signs is the plain text of the request.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
