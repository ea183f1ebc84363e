package partner_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/errs"
	"gatehouse/internal/kv"
	"gatehouse/internal/partner"
	"gatehouse/internal/partner/admitstore"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerclient"
)

// countingKV counts Admit calls and can fail them.
type countingKV struct {
	admitstore.Store
	calls atomic.Int64
	fail  error
	last  atomic.Pointer[partner.AdmitRequest]
}

func (c *countingKV) Admit(ctx context.Context, r partner.AdmitRequest) (partner.Admission, error) {
	c.calls.Add(1)
	c.last.Store(&r)
	if c.fail != nil {
		return partner.Admission{}, c.fail
	}
	return c.Store.Admit(ctx, r)
}

type gateFixture struct {
	svc   *partner.Service
	gate  *partner.Gate
	kv    *countingKV
	clock *testenv.Clock
	seq   int
}

func newGateFixture(t *testing.T, b testenv.Backend, start time.Time, admitOpts ...admitstore.Option) *gateFixture {
	t.Helper()
	db := storetest.Open(t, b)
	// The memory store's replay memory starts on the fixture's clock, at
	// the oldest timestamp its time accepts, so that no request the tests
	// sign is older than the store.
	clk := newClock(start.Add(-partner.MaxClockSkew))
	if len(admitOpts) == 0 {
		admitOpts = []admitstore.Option{admitstore.WithClock(clk.Now)}
	}
	store := openAdmitStore(t, b.RedisURL, b.KeyPrefix, admitOpts...)
	clk.Set(start)
	ckv := &countingKV{Store: store}
	svc := newService(t, db, partner.WithClock(clk.Now))
	g := partner.NewGate(svc, ckv)
	g.SetClock(clk.Now)
	return &gateFixture{svc: svc, gate: g, kv: ckv, clock: clk}
}

// openAdmitStore opens the gate's admission store over a key-value store
// of url (memory when empty), both closed when the test ends.
func openAdmitStore(t testing.TB, url, prefix string, opts ...admitstore.Option) admitstore.Store {
	t.Helper()
	kvs, err := kv.Open(context.Background(), url, kv.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kvs.Close() })
	store, err := admitstore.Open(context.Background(), kvs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

func newService(t testing.TB, db *store.DB, opts ...partner.Option) *partner.Service {
	t.Helper()
	s, err := partner.NewService(db.Client, testKey, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var testKey = secret.RandomBytes(32)

func newClock(t time.Time) *testenv.Clock { return testenv.NewClock(t) }

// query signs params for appKey with the timestamp ts.
func (f *gateFixture) query(t *testing.T, appKey, sec string, ts time.Time, params url.Values) string {
	t.Helper()
	f.seq++
	n := "nonce-" + strconv.Itoa(f.seq) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s := partnerclient.Signer{AppKey: appKey, AppSecret: sec, Now: func() time.Time { return ts }, Nonce: func() string { return n }}
	v, err := s.Sign(params)
	if err != nil {
		t.Fatal(err)
	}
	return v.Encode()
}

func reason(err error) string {
	var rej *partner.RejectError
	if errors.As(err, &rej) {
		return rej.Reason.Error()
	}
	if err == nil {
		return "admitted"
	}
	return "error: " + err.Error()
}

func TestGateBoundaries(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		// Dates ahead of the real clock: Redis's replay memory started
		// now, and refuses requests signed earlier.
		start := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
		f := newGateFixture(t, b, start)
		ctx := context.Background()
		expire := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
		app, sec, err := f.svc.Create(ctx, partner.CreateInput{AppName: "a", ExpireDate: &expire})
		if err != nil {
			t.Fatal(err)
		}
		check := func(ts time.Time) string {
			_, err := f.gate.Check(ctx, f.query(t, app.AppKey, sec.AppSecret, ts, url.Values{"x": {"1"}}))
			return reason(err)
		}
		now := f.clock.Now()
		for _, c := range []struct {
			offset time.Duration
			want   string
		}{
			{0, "admitted"},
			{-partner.MaxClockSkew, "admitted"},
			{partner.MaxClockSkew, "admitted"},
			{-partner.MaxClockSkew - time.Millisecond, partner.ErrRequestExpired.Error()},
			{partner.MaxClockSkew + time.Millisecond, partner.ErrRequestExpired.Error()},
		} {
			if got := check(now.Add(c.offset)); got != c.want {
				t.Errorf("timestamp %+v from now: %s, want %s", c.offset, got, c.want)
			}
		}
		// The expire date is valid through the end of its UTC day.
		f.clock.Set(time.Date(2027, 1, 1, 23, 59, 59, 999_000_000, time.UTC))
		if got := check(f.clock.Now()); got != "admitted" {
			t.Fatalf("last millisecond of the expire date: %s", got)
		}
		f.clock.Set(time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC))
		if got := check(f.clock.Now()); got != partner.ErrInvalidAppKey.Error() {
			t.Fatalf("day after the expire date: %s", got)
		}
	})
}

func TestGateRotationOverlap(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := newGateFixture(t, b, time.Date(2027, 3, 1, 8, 0, 0, 0, time.UTC))
		ctx := context.Background()
		app, s0, err := f.svc.Create(ctx, partner.CreateInput{AppName: "a"})
		if err != nil {
			t.Fatal(err)
		}
		rotatedAt := f.clock.Now()
		_, s1, err := f.svc.RotateSecret(ctx, app.ID)
		if err != nil {
			t.Fatal(err)
		}
		check := func(sec string) string {
			_, err := f.gate.Check(ctx, f.query(t, app.AppKey, sec, f.clock.Now(), nil))
			return reason(err)
		}
		f.clock.Set(rotatedAt.Add(partner.RotationOverlap - time.Millisecond))
		if a, b := check(s0.AppSecret), check(s1); a != "admitted" || b != "admitted" {
			t.Fatalf("just inside the overlap: old %s, new %s", a, b)
		}
		f.clock.Set(rotatedAt.Add(partner.RotationOverlap))
		if a, b := check(s0.AppSecret), check(s1); a != partner.ErrBadSignature.Error() || b != "admitted" {
			t.Fatalf("at 24 h: old %s, new %s", a, b)
		}
		// A second rotation keeps one previous secret: s1, not s0.
		_, s2, err := f.svc.RotateSecret(ctx, app.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a, b, c := check(s0.AppSecret), check(s1), check(s2); a != partner.ErrBadSignature.Error() || b != "admitted" || c != "admitted" {
			t.Fatalf("after a second rotation: s0 %s, s1 %s, s2 %s", a, b, c)
		}
	})
}

// TestGateStoreUse: checks that need no key-value store do not call it;
// the rest take exactly one call; an unreachable store is errs.Unavailable.
func TestGateStoreUse(t *testing.T) {
	f := newGateFixture(t, testenv.Backend{Name: "sqlite"}, time.Now())
	ctx := context.Background()
	app, sec, err := f.svc.Create(ctx, partner.CreateInput{AppName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	good := f.query(t, app.AppKey, sec.AppSecret, f.clock.Now(), url.Values{"order_no": {"1"}})
	for _, raw := range []string{
		"", "app_key=nobody", "app_key=" + app.AppKey, "app_key=" + app.AppKey + "&timestamp=1",
		"app_key=" + app.AppKey + "&timestamp=" + strconv.FormatInt(f.clock.Now().UnixMilli(), 10),
	} {
		if _, err := f.gate.Check(ctx, raw); err == nil {
			t.Fatalf("%q admitted", raw)
		}
	}
	if n := f.kv.calls.Load(); n != 0 {
		t.Fatalf("%d store calls for requests refused before the nonce check", n)
	}
	adm, err := f.gate.Check(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	if n := f.kv.calls.Load(); n != 1 {
		t.Fatalf("%d store calls for one admitted request", n)
	}
	if adm.App.ID != app.ID || adm.Limit != partner.DefaultRateLimit || adm.Remaining != partner.DefaultRateLimit-1 {
		t.Fatalf("admitted %+v", adm)
	}
	if v, _ := adm.Query.Get("order_no"); v != "1" {
		t.Fatalf("query %+v", adm.Query)
	}

	f.kv.fail = fmt.Errorf("%w: redis: connection refused", errs.Unavailable)
	_, err = f.gate.Check(ctx, f.query(t, app.AppKey, sec.AppSecret, f.clock.Now(), nil))
	var rej *partner.RejectError
	if !errors.Is(err, errs.Unavailable) || errors.As(err, &rej) {
		t.Fatalf("unreachable store: %v", err)
	}
	f.kv.fail = errors.New("kv: admit: something else")
	_, err = f.gate.Check(ctx, f.query(t, app.AppKey, sec.AppSecret, f.clock.Now(), nil))
	if err == nil || errors.Is(err, errs.Unavailable) || errors.As(err, &rej) {
		t.Fatalf("store error: %v", err)
	}
}

func TestGateRateLimitFromApp(t *testing.T) {
	f := newGateFixture(t, testenv.Backend{Name: "sqlite"}, time.Now())
	ctx := context.Background()
	two := 2
	app, sec, err := f.svc.Create(ctx, partner.CreateInput{AppName: "a", RateLimit: &two})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 3 {
		_, err := f.gate.Check(ctx, f.query(t, app.AppKey, sec.AppSecret, f.clock.Now(), nil))
		got = append(got, reason(err))
	}
	if got[0] != "admitted" || got[1] != "admitted" || got[2] != partner.ErrRateLimited.Error() {
		t.Fatalf("%v", got)
	}
	_, err = f.gate.Check(ctx, f.query(t, app.AppKey, sec.AppSecret, f.clock.Now(), nil))
	var rej *partner.RejectError
	if !errors.As(err, &rej) || rej.Limit != 2 || rej.RetryAfter <= 0 || rej.RetryAfter > partner.RateWindow {
		t.Fatalf("rate limited: %+v", rej)
	}
}
