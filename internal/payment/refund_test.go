package payment_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/hook"
	entorder "gatehouse/ent/order"
	"gatehouse/internal/errs"
	"gatehouse/internal/order"
	"gatehouse/internal/outbound"
	"gatehouse/internal/payment"
	"gatehouse/internal/testenv"
)

// providerStatus is what GraphQL shows as extensions.providerStatus.
func providerStatus(err error) int {
	var f *payment.Failure
	if errors.As(err, &f) {
		return f.Status
	}
	return -1
}

// TestRefund: the provider gets one correct, signed request; the order
// becomes REFUNDED with its order.refunded webhook; a repeat (even with
// another reason) returns it without a second call.
func TestRefund(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b)
		svc, _ := e.service(t, fastConfig())
		ctx := context.Background()
		no := e.order(t, order.Paid)

		got, err := svc.Refund(ctx, no, "  damaged in transit ")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != order.Refunded || got.OrderNo != no {
			t.Fatalf("refunded order: %s %s", got.OrderNo, got.Status)
		}
		calls := e.provider.Calls()
		if len(calls) != 1 || calls[0].OrderNo != no || calls[0].Amount != "99.90" || calls[0].Reason != "damaged in transit" ||
			calls[0].IdempotencyKey != "refund-"+no {
			t.Fatalf("provider calls: %+v", calls)
		}
		e.noProblems(t)
		ds := e.events(t, "order.refunded")
		if len(ds) != 1 {
			t.Fatalf("%d order.refunded deliveries, want 1", len(ds))
		}
		var biz map[string]any
		if err := json.Unmarshal([]byte(ds[0].BizData), &biz); err != nil {
			t.Fatal(err)
		}
		if biz["order_no"] != no || biz["status"] != "REFUNDED" || biz["amount"] != 99.9 || biz["reason"] != "damaged in transit" ||
			biz["refund_time"] == "" || biz["pay_time"] == "" {
			t.Errorf("bizData %s", ds[0].BizData)
		}

		for _, reason := range []string{"damaged in transit", "another reason"} {
			again, err := svc.Refund(ctx, no, reason)
			if err != nil || again.Status != order.Refunded {
				t.Fatalf("repeat: %v, %v", again, err)
			}
		}
		if n := len(e.provider.Calls()); n != 1 {
			t.Errorf("a repeat within 24 h called the provider: %d calls", n)
		}
		if n := len(e.events(t, "order.refunded")); n != 1 {
			t.Errorf("%d order.refunded deliveries after the repeats, want 1", n)
		}
		// A second service (another replica, or this one restarted) shares
		// the stored result through the kv store.
		other, _ := e.service(t, fastConfig())
		if o, err := other.Refund(ctx, no, ""); err != nil || o.Status != order.Refunded || len(e.provider.Calls()) != 1 {
			t.Fatalf("repeat on another replica: %v, %v, %d calls", o, err, len(e.provider.Calls()))
		}
	})
}

// TestRefundRefusedBeforeCalling: what is refused before anything is sent.
func TestRefundRefusedBeforeCalling(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b)
		svc, client := e.service(t, fastConfig())
		ctx := context.Background()
		paid := e.order(t, order.Paid)
		cases := []struct {
			name, orderNo, reason string
			kind                  errs.Kind
		}{
			{"unknown order", "no-such-order", "", errs.NotFound},
			{"CREATED", e.order(t, order.Created), "", errs.InvalidState},
			{"CANCELLED", e.order(t, order.Cancelled), "", errs.InvalidState},
			// REFUNDED long ago (no stored result): nothing to replay.
			{"REFUNDED without a stored result", e.order(t, order.Refunded), "", errs.InvalidState},
			{"NUL in the reason", paid, "a\x00b", errs.Validation},
			{"long reason", paid, strings.Repeat("é", payment.MaxReasonLen+1), errs.Validation},
			{"invalid UTF-8", paid, "\xff", errs.Validation},
		}
		for _, c := range cases {
			_, err := svc.Refund(ctx, c.orderNo, c.reason)
			if errs.KindOf(err) != c.kind {
				t.Errorf("%s: %v (kind %s), want %s", c.name, err, errs.KindOf(err), c.kind)
			}
		}
		if _, err := svc.Refund(ctx, paid, strings.Repeat("é", payment.MaxReasonLen)); err != nil {
			t.Errorf("a reason of %d characters: %v", payment.MaxReasonLen, err)
		}
		if n := len(e.provider.Calls()); n != 1 {
			t.Errorf("%d provider calls, want only the last one", n)
		}

		unconfigured := payment.NewService(e.orders, e.kv, client, payment.Provider{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if _, err := unconfigured.Refund(ctx, e.order(t, order.Paid), ""); !errors.Is(err, payment.ErrNotConfigured) || errs.KindOf(err) != errs.PaymentNotConfigured {
			t.Errorf("no provider: %v", err)
		}
		if unconfigured.Configured() || !svc.Configured() {
			t.Error("Configured()")
		}
	})
}

// TestRefundRetriesWithTheSeedsWaits: 500, 500, 200 → three calls, the
// second ~1 s after the first and the third ~2 s after the second (measured
// where the provider receives them), each signed afresh; the refund succeeds.
func TestRefundRetriesWithTheSeedsWaits(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b)
		svc, _ := e.service(t, outbound.DefaultConfig())
		e.provider.Script(500, 500, 200)
		no := e.order(t, order.Paid)
		got, err := svc.Refund(context.Background(), no, "")
		if err != nil || got.Status != order.Refunded {
			t.Fatalf("refund: %v, %v", got, err)
		}
		calls := e.provider.Calls()
		if len(calls) != 3 {
			t.Fatalf("%d calls, want 3", len(calls))
		}
		e.noProblems(t) // includes: a fresh nonce on every attempt
		for i, want := range []time.Duration{time.Second, 2 * time.Second} {
			gap := calls[i+1].At.Sub(calls[i].At)
			// At least the wait; well below the next wait (a wrong order
			// of waits, or a missing one, is told apart).
			if gap < want || gap > want+900*time.Millisecond {
				t.Errorf("wait before attempt %d: %s, want %s", i+2, gap, want)
			}
		}
		if calls[0].IdempotencyKey != calls[2].IdempotencyKey || calls[0].Nonce == calls[1].Nonce {
			t.Errorf("attempts: %+v", calls)
		}
	})
}

// TestRefundFails: a provider that keeps failing, refuses, or does not
// answer → PAYMENT_FAILED with its status; the order stays PAID, nothing
// is queued or stored, and the refund can be tried again.
func TestRefundFails(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b)
		cfg := fastConfig()
		cfg.ReadTimeout = 300 * time.Millisecond
		svc, _ := e.service(t, cfg)
		ctx := context.Background()

		e.provider.Script(500)
		no := e.order(t, order.Paid)
		_, err := svc.Refund(ctx, no, "")
		if errs.KindOf(err) != errs.PaymentFailed || providerStatus(err) != 500 || !strings.Contains(errs.Message(err), "HTTP 500") {
			t.Fatalf("always 500: %v (status %d)", err, providerStatus(err))
		}
		if n := len(e.provider.Calls()); n != 3 {
			t.Errorf("%d calls, want 3 attempts", n)
		}
		if st := e.status(t, no); st != order.Paid {
			t.Errorf("order is %s after a failed refund", st)
		}
		if n := len(e.events(t, "order.refunded")); n != 0 {
			t.Errorf("%d order.refunded queued for a failed refund", n)
		}
		// Not stored: the next try calls again, and may succeed.
		e.provider.Script(200)
		if o, err := svc.Refund(ctx, no, ""); err != nil || o.Status != order.Refunded {
			t.Fatalf("retry after the provider recovered: %v, %v", o, err)
		}
		if n := len(e.provider.Calls()); n != 4 {
			t.Errorf("%d calls, want 4", n)
		}

		// A refusal (4xx) is not retried.
		e.provider.Script(402)
		no = e.order(t, order.Paid)
		_, err = svc.Refund(ctx, no, "")
		if errs.KindOf(err) != errs.PaymentFailed || providerStatus(err) != 402 {
			t.Fatalf("402: %v", err)
		}
		if n := len(e.provider.Calls()); n != 5 {
			t.Errorf("%d calls after a 402, want 5 (no retry)", n)
		}

		// No answer within the read timeout: status 0.
		e.provider.Script(200)
		e.provider.Hold()
		no = e.order(t, order.Paid)
		_, err = svc.Refund(ctx, no, "")
		e.provider.Release()
		if errs.KindOf(err) != errs.PaymentFailed || providerStatus(err) != 0 || !strings.Contains(errs.Message(err), "read timeout") {
			t.Fatalf("no answer: %v", err)
		}
		if st := e.status(t, no); st != order.Paid {
			t.Errorf("order is %s after an unanswered refund", st)
		}
		e.noProblems(t)
	})
}

// TestRefundBreaker: failures open the provider's breaker once the window
// is full (at least 10 calls, 5 of the last 10 failed); then a refund
// fails at once with UPSTREAM_UNAVAILABLE and the provider is not called;
// after 30 s (on the injected clock) the breaker lets trial calls through,
// and 5 good ones close it.
func TestRefundBreaker(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b)
		svc, _ := e.service(t, fastConfig())
		ctx := context.Background()
		state := func(want string) {
			t.Helper()
			if got := svc.BreakerState(); got != want {
				t.Fatalf("breaker %s, want %s", got, want)
			}
		}
		calls := func() int { return len(e.provider.Calls()) }
		state(outbound.StateClosed)

		e.provider.Script(500)
		for i := range 3 {
			if _, err := svc.Refund(ctx, e.order(t, order.Paid), ""); errs.KindOf(err) != errs.PaymentFailed {
				t.Fatalf("failing refund %d: %v", i+1, err)
			}
		}
		// 9 failures, but the window of 10 calls is not full yet.
		state(outbound.StateClosed)
		// The 10th call fails and opens the breaker in the middle of this
		// refund's retries: the provider was called and failed, so
		// PAYMENT_FAILED, and its retries are not sent.
		_, err := svc.Refund(ctx, e.order(t, order.Paid), "")
		if errs.KindOf(err) != errs.PaymentFailed || providerStatus(err) != 500 || calls() != 10 {
			t.Fatalf("fourth failing refund: %v, %d calls", err, calls())
		}
		state(outbound.StateOpen)

		waiting := e.order(t, order.Paid)
		for _, advance := range []time.Duration{0, 29 * time.Second} {
			e.clock.Advance(advance)
			_, err = svc.Refund(ctx, waiting, "")
			if errs.KindOf(err) != errs.UpstreamUnavailable || !errors.Is(err, outbound.ErrCircuitOpen) || calls() != 10 {
				t.Fatalf("refund while open (+%s): %v, %d calls", advance, err, calls())
			}
			state(outbound.StateOpen)
		}
		if st := e.status(t, waiting); st != order.Paid {
			t.Fatalf("order %s while the breaker is open", st)
		}

		e.clock.Advance(time.Second)
		state(outbound.StateHalfOpen)
		e.provider.Script(200)
		for i := range 5 {
			if i > 0 {
				state(outbound.StateHalfOpen)
			}
			no := waiting
			if i > 0 {
				no = e.order(t, order.Paid)
			}
			if o, err := svc.Refund(ctx, no, ""); err != nil || o.Status != order.Refunded {
				t.Fatalf("trial %d: %v, %v", i+1, o, err)
			}
		}
		state(outbound.StateClosed)
		if calls() != 15 {
			t.Errorf("%d calls, want 15", calls())
		}
		e.noProblems(t)
	})
}

// TestRefundBreakerReopens: a failed trial call reopens the breaker.
func TestRefundBreakerReopens(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b)
		cfg := fastConfig()
		cfg.RetryAttempts = 1
		svc, _ := e.service(t, cfg)
		ctx := context.Background()
		e.provider.Script(503)
		for range 10 {
			if _, err := svc.Refund(ctx, e.order(t, order.Paid), ""); errs.KindOf(err) != errs.PaymentFailed {
				t.Fatal(err)
			}
		}
		if svc.BreakerState() != outbound.StateOpen {
			t.Fatalf("breaker %s after 10 failures", svc.BreakerState())
		}
		e.clock.Advance(30 * time.Second)
		if _, err := svc.Refund(ctx, e.order(t, order.Paid), ""); errs.KindOf(err) != errs.PaymentFailed || providerStatus(err) != 503 {
			t.Fatalf("failing trial: %v", err)
		}
		if svc.BreakerState() != outbound.StateOpen {
			t.Fatalf("breaker %s after a failed trial call, want OPEN", svc.BreakerState())
		}
	})
}

// TestConcurrentRefundsCallOnce: parallel refunds of one order while the
// first is at the provider → one provider call; the others get CONFLICT
// at once; afterwards a repeat returns the refunded order.
func TestConcurrentRefundsCallOnce(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b)
		svc, _ := e.service(t, fastConfig())
		ctx := context.Background()
		no := e.order(t, order.Paid)
		e.provider.Hold()
		first := make(chan error, 1)
		go func() {
			_, err := svc.Refund(ctx, no, "first")
			first <- err
		}()
		e.provider.Arrived(t)

		const n = 8
		var wg sync.WaitGroup
		results := make(chan error, n)
		start := make(chan struct{})
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := svc.Refund(ctx, no, "second")
				results <- err
			}()
		}
		close(start)
		wg.Wait()
		close(results)
		for err := range results {
			if !errors.Is(err, payment.ErrInProgress) || errs.KindOf(err) != errs.Conflict {
				t.Errorf("concurrent refund: %v, want CONFLICT", err)
			}
		}
		e.provider.Release()
		if err := <-first; err != nil {
			t.Fatalf("first refund: %v", err)
		}
		if o, err := svc.Refund(ctx, no, ""); err != nil || o.Status != order.Refunded {
			t.Fatalf("repeat: %v, %v", o, err)
		}
		if c := e.provider.Calls(); len(c) != 1 || c[0].Reason != "first" {
			t.Errorf("provider calls: %+v", c)
		}
		if n := len(e.events(t, "order.refunded")); n != 1 {
			t.Errorf("%d order.refunded deliveries", n)
		}
	})
}

// TestCrashBetweenYesAndCommit: the provider said yes, then the order's
// change did not commit (the process died, or the database failed). The
// refund is not lost: the next refundOrder — here from a fresh service, as
// after a restart — completes it from the stored result without calling
// the provider again, with the reason that was sent.
func TestCrashBetweenYesAndCommit(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b)
		svc, _ := e.service(t, fastConfig())
		ctx := context.Background()
		no := e.order(t, order.Paid)

		crash := errors.New("the process died before the commit")
		var armed sync.Mutex
		crashing := true
		e.db.Order.Use(func(next ent.Mutator) ent.Mutator {
			return hook.OrderFunc(func(ctx context.Context, m *ent.OrderMutation) (ent.Value, error) {
				armed.Lock()
				fail := crashing
				armed.Unlock()
				if st, ok := m.Status(); fail && ok && st == entorder.StatusREFUNDED {
					return nil, crash
				}
				return next.Mutate(ctx, m)
			})
		})
		if _, err := svc.Refund(ctx, no, "sent reason"); !errors.Is(err, crash) {
			t.Fatalf("refund with a failing commit: %v", err)
		}
		if st := e.status(t, no); st != order.Paid {
			t.Fatalf("order %s after the failed commit", st)
		}
		if n := len(e.events(t, "order.refunded")); n != 0 {
			t.Fatalf("%d deliveries queued by a rolled-back commit", n)
		}
		armed.Lock()
		crashing = false
		armed.Unlock()

		restarted, _ := e.service(t, fastConfig())
		o, err := restarted.Refund(ctx, no, "another reason")
		if err != nil || o.Status != order.Refunded {
			t.Fatalf("refund after the crash: %v, %v", o, err)
		}
		if n := len(e.provider.Calls()); n != 1 {
			t.Errorf("%d provider calls, want 1: the stored yes must finish the refund", n)
		}
		ds := e.events(t, "order.refunded")
		if len(ds) != 1 || !strings.Contains(ds[0].BizData, `"reason":"sent reason"`) {
			t.Errorf("deliveries %v", ds)
		}
	})
}

// TestClientGoneAfterYes: the admin's request ends (deadline, disconnect)
// while the provider is answering. The exchange is seen through and its
// yes stored; the order's change follows the request and is not
// committed; the next refundOrder completes it without a second call.
func TestClientGoneAfterYes(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b)
		svc, _ := e.service(t, fastConfig())
		no := e.order(t, order.Paid)
		e.provider.Hold()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := svc.Refund(ctx, no, "")
			done <- err
		}()
		e.provider.Arrived(t)
		cancel()
		e.provider.Release()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("refund of a gone client: %v", err)
		}
		if st := e.status(t, no); st != order.Paid {
			t.Fatalf("order %s: committed for a client that got no answer", st)
		}
		if o, err := svc.Refund(context.Background(), no, ""); err != nil || o.Status != order.Refunded {
			t.Fatalf("next refund: %v, %v", o, err)
		}
		if n := len(e.provider.Calls()); n != 1 {
			t.Errorf("%d provider calls, want 1", n)
		}
	})
}

// TestSlowReplyBodyAfterYes: a provider that answers 2xx at once and then
// trickles its body for ever. The status is the answer: the refund
// completes within the admin's request (here a 5 s deadline) instead of
// reading until the exchange's 1-minute bound and then failing to commit.
func TestSlowReplyBodyAfterYes(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b)
		svc, _ := e.service(t, fastConfig())
		no := e.order(t, order.Paid)
		e.provider.Trickle()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		o, err := svc.Refund(ctx, no, "")
		if err != nil || o.Status != order.Refunded {
			t.Fatalf("refund with a trickling reply: %v, %v", o, err)
		}
		if n := len(e.provider.Calls()); n != 1 {
			t.Errorf("%d provider calls, want 1", n)
		}
	})
}
