package webhook_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/deliveryattempt"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/config"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/sender"
)

// env is a webhook service on one backend with the services that produce
// events, without HTTP front doors.
type env struct {
	url       string // database URL
	db        *store.DB
	masterKey []byte
	svc       *webhook.Service
	partners  *partner.Service
	orders    *order.Service
	logs      *syncBuffer
	opt       webhook.Options
}

// dbURL returns a fresh database URL for backend b.
func dbURL(t testing.TB, b testenv.Backend) string {
	if b.Embedded() {
		return "sqlite:" + filepath.Join(t.TempDir(), "gatehouse.db")
	}
	return b.DatabaseURL
}

// setting holds the defaults of the webhook settings (GATEHOUSE_WEBHOOK_*),
// declared in internal/config: the only defaults of the options that are
// settings, which the service has none of.
var setting = config.Defaults().Webhooks

// withSettings is opt with the options that are settings (RetryBase,
// PerApp, Retention) that a test left zero set to the settings' defaults,
// as `gatehouse serve` wires them when nothing is configured. (A test
// cannot ask for Retention 0, forever, this way; none needs to.)
func withSettings(opt webhook.Options) webhook.Options {
	opt.RetryBase = cmp.Or(opt.RetryBase, setting.RetryBase)
	opt.PerApp = cmp.Or(opt.PerApp, setting.PerApp)
	opt.Retention = cmp.Or(opt.Retention, setting.Retention)
	return opt
}

// newEnv opens and migrates a fresh database and starts a Service on it
// with opt, withSettings.
func newEnv(t testing.TB, b testenv.Backend, opt webhook.Options) *env {
	t.Helper()
	opt = withSettings(opt)
	if opt.EventTypes == nil {
		opt.EventTypes = order.EventTypes() // as the service is wired
	}
	e := &env{url: dbURL(t, b), masterKey: secret.RandomBytes(32), logs: &syncBuffer{}, opt: opt}
	e.db = storetest.OpenURL(t, e.url)
	var err error
	e.partners, err = partner.NewService(e.db.Client, e.masterKey,
		partner.WithWebhookSecretGen(sender.NewSecret),
		partner.WithCallbackURLCheck(func(_, u string) error { return sender.ValidateCallbackURL(u, opt.AllowPrivate) }))
	if err != nil {
		t.Fatal(err)
	}
	e.orders = order.NewService(e.db)
	e.svc = e.startService(t, e.db)
	return e
}

// startService starts another dispatcher (a replica) on db.
func (e *env) startService(t testing.TB, db *store.DB) *webhook.Service {
	t.Helper()
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	svc, err := webhook.NewService(db, e.masterKey, log, e.opt)
	if err != nil {
		t.Fatal(err)
	}
	svc.WakeOnCommit(db.Client) // as the app is wired
	svc.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = svc.Close(ctx)
	})
	return svc
}

// newApp creates a partner app calling back to callback, returning its id
// and webhook secret.
func (e *env) newApp(t testing.TB, callback string) (int, string) {
	t.Helper()
	app, sec, err := e.partners.Create(context.Background(), partner.CreateInput{AppName: "receiver", CallbackURL: callback})
	if err != nil {
		t.Fatalf("create app: %v", err)
	}
	return app.ID, sec.WebhookSecret
}

var orderSeq struct {
	sync.Mutex
	n int
}

// pay creates a CREATED order of app appID and pays it, returning the
// order.paid delivery.
func (e *env) pay(t testing.TB, appID int) *ent.WebhookDelivery {
	t.Helper()
	ctx := context.Background()
	orderSeq.Lock()
	orderSeq.n++
	no := fmt.Sprintf("SO-%d-%s", orderSeq.n, testenv.RandomSuffix())
	orderSeq.Unlock()
	o, err := e.orders.Create(ctx, order.CreateInput{AppID: appID, OrderNo: no, Amount: "99.90"})
	if err != nil {
		t.Fatalf("create order: %v", err)
	}
	if _, err := e.orders.Pay(ctx, o.OrderNo); err != nil {
		t.Fatalf("pay: %v", err)
	}
	d, err := e.db.WebhookDelivery.Query().Where(webhookdelivery.BizDataContains(`"` + no + `"`)).Only(ctx)
	if err != nil {
		t.Fatalf("delivery of %s: %v", no, err)
	}
	return d
}

// waitStatus polls delivery id until it has status want.
func (e *env) waitStatus(t testing.TB, id int, want webhookdelivery.Status, within time.Duration) *ent.WebhookDelivery {
	t.Helper()
	var d *ent.WebhookDelivery
	waitFor(t, within, func() bool {
		var err error
		d, err = e.db.WebhookDelivery.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return d.Status == want
	}, func() string {
		return fmt.Sprintf("delivery %d is %s (retry %d, error %q), want %s", id, d.Status, d.RetryCount, d.LastError, want)
	})
	return d
}

func (e *env) attempts(t testing.TB, id int) []*ent.DeliveryAttempt {
	t.Helper()
	as, err := e.db.DeliveryAttempt.Query().Where(deliveryattempt.DeliveryID(id)).
		Order(deliveryattempt.ByAttemptNo()).All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// waitFor polls cond every few milliseconds until it holds or within has
// passed.
func waitFor(t testing.TB, within time.Duration, cond func() bool, msg func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, msg())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// received is one request a receiver got.
type received struct {
	at     time.Time
	header http.Header
	body   []byte
}

// receiver is a local webhook endpoint recording every request; respond
// picks the status of the n-th request (from 1).
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	got     []received
	respond func(n int) int
	hold    chan struct{} // when non-nil, requests wait for it to close
	// step, when non-nil, lets one waiting request answer per value sent
	// (see gated and answer).
	step chan struct{}
	// inFlight and peak count the requests being answered at once.
	inFlight, peak int
	once           sync.Once
}

func newReceiver(t testing.TB, respond func(n int) int) *receiver {
	r := &receiver{respond: respond}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{at: time.Now(), header: req.Header.Clone(), body: body})
		n := len(r.got)
		hold, step := r.hold, r.step
		status := http.StatusOK
		if r.respond != nil {
			status = r.respond(n)
		}
		r.inFlight++
		r.peak = max(r.peak, r.inFlight)
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			r.inFlight--
			r.mu.Unlock()
		}()
		if hold != nil || step != nil {
			select {
			case <-hold:
			case <-step:
			case <-req.Context().Done():
				return
			}
		}
		w.Header().Set("X-Receiver", "test")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"n":%d}`, n)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// concurrency returns the requests being answered now and the most ever
// answered at once.
func (r *receiver) concurrency() (now, peak int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight, r.peak
}

// hanging makes a receiver hold every request until release or the end
// of the test (create it after the env, so that it lets go first).
func hanging(t testing.TB) *receiver {
	r := newReceiver(t, always(http.StatusOK))
	r.hold = make(chan struct{})
	t.Cleanup(r.release)
	return r
}

// gated makes a hanging receiver whose requests also answer one at a time,
// as the test calls answer.
func gated(t testing.TB) *receiver {
	r := hanging(t)
	r.step = make(chan struct{})
	return r
}

// answer lets one waiting request of a gated receiver answer, waiting for
// one to arrive.
func (r *receiver) answer(t testing.TB) {
	t.Helper()
	select {
	case r.step <- struct{}{}:
	case <-time.After(10 * time.Second):
		now, _ := r.concurrency()
		t.Fatalf("no request arrived to answer (%d in flight)", now)
	}
}

// resetPeak makes concurrency's peak count from now on: the most
// requests in flight when one of those that begin from now on begins.
func (r *receiver) resetPeak() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.peak = 0
}

// release lets the held requests of a hanging receiver (and later ones) go.
func (r *receiver) release() {
	r.once.Do(func() { close(r.hold) })
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func always(status int) func(int) int { return func(int) int { return status } }

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// message decodes a webhook body, keeping the field order for checks.
func message(t testing.TB, body []byte) sender.Message {
	t.Helper()
	var m sender.Message
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("webhook body %s: %v", body, err)
	}
	return m
}

// fakeClock is a clock the test moves. It starts an hour ahead of the wall
// clock, so that rows written with the wall clock (an event's creation)
// are already due on it.
// newFakeClock is a clock tests move by hand, an hour ahead of now.
func newFakeClock() *testenv.Clock {
	return testenv.NewClock(time.Now().UTC().Add(time.Hour).Truncate(time.Second))
}

// delivery reads delivery id.
func (e *env) delivery(t testing.TB, id int) *ent.WebhookDelivery {
	t.Helper()
	d, err := e.db.WebhookDelivery.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// gauge returns the value of metric name with label app=appID from the
// default registry (-1 when absent).
func gauge(t testing.TB, name string, appID int) float64 {
	t.Helper()
	if v, ok := testenv.Metric(t, name, "app", strconv.Itoa(appID)); ok {
		return v
	}
	return -1
}

// breaker is the state of app appID's first endpoint's circuit breaker.
func (e *env) breaker(t testing.TB, appID int) string {
	t.Helper()
	st, err := e.svc.BreakerState(context.Background(), appID, "")
	if err != nil {
		t.Fatal(err)
	}
	return st
}
