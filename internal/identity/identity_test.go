package identity_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"

	"gatehouse/ent"
	"gatehouse/internal/errs"
	"gatehouse/internal/identity"
	"gatehouse/internal/kv"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
)

// defaultTokenTTL is the lifetime of a signed user token by default
// (GATEHOUSE_JWT_TTL): 7 200 000 ms.
const defaultTokenTTL = 7_200_000 * time.Millisecond

func TestMain(m *testing.M) {
	// The algorithm is the same at the production cost; only slower.
	secret.PasswordCost = bcrypt.MinCost
	os.Exit(m.Run())
}

// backend opens storage and the shared store of b for a domain test.
func backend(t *testing.T, b testenv.Backend, opts ...kv.Option) (*store.DB, kv.Store) {
	t.Helper()
	ctx := context.Background()
	db := storetest.Open(t, b)
	if b.RedisURL != "" {
		opts = append(opts, kv.WithPrefix(b.KeyPrefix))
	}
	s, err := kv.Open(ctx, b.RedisURL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return db, s
}

func mustCreate(t *testing.T, u *identity.Users, name, pw string, roles ...string) *ent.User {
	t.Helper()
	row, err := u.Create(context.Background(), identity.NewUser{Username: name, Password: pw, Roles: roles})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return row
}

func TestAuthenticate(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db, _ := backend(t, b)
		ctx := context.Background()
		users := identity.NewUsers(db.Client)
		alice := mustCreate(t, users, "alice", "correct horse", "admin")
		bob := mustCreate(t, users, "bob", "battery staple")
		if _, err := db.User.UpdateOneID(bob.ID).SetStatus(identity.UserDisabled).Save(ctx); err != nil {
			t.Fatal(err)
		}

		got, err := users.Authenticate(ctx, "alice", "correct horse")
		if err != nil || got.User.ID != alice.ID {
			t.Fatalf("right password: %v, %v", got, err)
		}
		for name, c := range map[string][2]string{
			"wrong password":     {"alice", "correct horsE"},
			"unknown user":       {"mallory", "correct horse"},
			"disabled user":      {"bob", "battery staple"},
			"case differs":       {"Alice", "correct horse"},
			"empty":              {"", ""},
			"NUL in username":    {"ali\x00ce", "correct horse"},
			"invalid UTF-8":      {"ali\xffce", "correct horse"},
			"username too long":  {strings.Repeat("a", 65), "correct horse"},
			"password too long":  {"alice", "correct horse" + strings.Repeat("x", 80)},
			"password truncated": {"alice", "correct hors"},
		} {
			if _, err := users.Authenticate(ctx, c[0], c[1]); !errors.Is(err, identity.ErrInvalidCredentials) {
				t.Errorf("%s: got %v, want ErrInvalidCredentials", name, err)
			}
		}

		if u, err := users.Active(ctx, alice.ID); err != nil || u.Username != "alice" {
			t.Fatalf("Active(alice): %v %v", u, err)
		}
		for name, id := range map[string]int{"disabled": bob.ID, "missing": alice.ID + 1000} {
			if _, err := users.Active(ctx, id); !errors.Is(err, identity.ErrInactive) {
				t.Errorf("Active(%s): %v, want ErrInactive", name, err)
			}
		}
	})
}

// fakeClock is a settable clock safe for concurrent use.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock(t time.Time) *fakeClock { c := &fakeClock{}; c.set(t); return c }
func (c *fakeClock) now() time.Time       { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) set(t time.Time)      { c.ns.Store(t.UnixNano()) }
func (c *fakeClock) add(d time.Duration)  { c.ns.Add(int64(d)) }

func testKey() []byte { return []byte("0123456789abcdef0123456789abcdef-test") }

func TestTokenRoundTrip(t *testing.T) {
	store := kvMemory(t)
	clock := newFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	ts, err := identity.NewTokenService(testKey(), defaultTokenTTL, store, identity.WithTokenClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	u := &ent.User{ID: 42, Username: "alice", Roles: []string{"admin", "ops"}}
	raw, c, err := ts.Issue(u)
	if err != nil {
		t.Fatal(err)
	}
	// The claims on the wire, decoded without verification.
	tok, _, err := jwt.NewParser().ParseUnverified(raw, jwt.MapClaims{})
	if err != nil {
		t.Fatal(err)
	}
	wire := tok.Claims.(jwt.MapClaims)
	if tok.Header["alg"] != "HS256" {
		t.Fatalf("alg %v", tok.Header["alg"])
	}
	for _, k := range []string{"sub", "username", "roles", "iat", "exp", "jti", "sv"} {
		if _, ok := wire[k]; !ok {
			t.Errorf("claim %s missing: %v", k, wire)
		}
	}
	if len(wire) != 7 {
		t.Errorf("claims %v, want exactly sub, username, roles, iat, exp, jti and sv", wire)
	}
	if wire["sub"] != "42" || wire["username"] != "alice" || wire["sv"] != float64(0) {
		t.Fatalf("claims %v", wire)
	}
	if exp, iat := wire["exp"].(float64), wire["iat"].(float64); exp-iat != 7200 {
		t.Fatalf("lifetime %v s, want 7200 (7 200 000 ms)", exp-iat)
	}

	got, err := ts.Verify(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	if got.Subject != "42" || got.Username != "alice" || strings.Join(got.Roles, ",") != "admin,ops" || got.ID != c.ID {
		t.Fatalf("verified claims %+v", got)
	}

	// A user without roles gets an empty list, not null.
	raw2, _, _ := ts.Issue(&ent.User{ID: 7, Username: "bob"})
	tok2, _, _ := jwt.NewParser().ParseUnverified(raw2, jwt.MapClaims{})
	if r, ok := tok2.Claims.(jwt.MapClaims)["roles"].([]any); !ok || len(r) != 0 {
		t.Fatalf("roles of a role-less user: %v", tok2.Claims)
	}

	// Valid until exp, refused from exp on.
	clock.add(defaultTokenTTL - time.Second)
	if _, err := ts.Verify(context.Background(), raw); err != nil {
		t.Fatalf("one second before exp: %v", err)
	}
	clock.add(time.Second)
	if _, err := ts.Verify(context.Background(), raw); !errors.Is(err, identity.ErrInvalidToken) {
		t.Fatalf("at exp: %v, want ErrInvalidToken", err)
	}
}

func kvMemory(t *testing.T, opts ...kv.Option) kv.Store {
	t.Helper()
	s, err := kv.Open(context.Background(), "", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestTokenAlgorithmPinned: only HS256 with our key verifies. Tokens with
// "alg":"none", another HMAC, an asymmetric algorithm, another key, a
// tampered payload or missing claims are all refused.
func TestTokenAlgorithmPinned(t *testing.T) {
	ts, err := identity.NewTokenService(testKey(), time.Hour, kvMemory(t))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims := func() jwt.MapClaims {
		return jwt.MapClaims{
			"sub": "1", "username": "alice", "roles": []string{"admin"},
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": "abc",
		}
	}
	sign := func(m jwt.SigningMethod, key any, c jwt.MapClaims) string {
		t.Helper()
		s, err := jwt.NewWithClaims(m, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	good := sign(jwt.SigningMethodHS256, testKey(), claims())
	if _, err := ts.Verify(context.Background(), good); err != nil {
		t.Fatalf("a well-formed HS256 token is refused: %v", err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	noneTok := sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims())
	// "none" spelled by hand, with an empty signature and with our HS256 one.
	parts := strings.Split(good, ".")
	b64 := base64.RawURLEncoding.EncodeToString
	handNone := b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	handNoneSig := b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "." + parts[2]
	tampered := parts[0] + "." + b64([]byte(`{"sub":"2","username":"mallory","roles":["admin"],"iat":1,"exp":9999999999,"jti":"x"}`)) + "." + parts[2]
	noExp := claims()
	delete(noExp, "exp")
	noJTI := claims()
	delete(noJTI, "jti")
	noSub := claims()
	delete(noSub, "sub")
	future := claims()
	future["iat"] = now.Add(time.Hour).Unix()
	nonNumericSub := claims()
	nonNumericSub["sub"] = "alice"
	for name, tok := range map[string]string{
		"alg none":             noneTok,
		"alg none by hand":     handNone,
		"alg none with sig":    handNoneSig,
		"HS384":                sign(jwt.SigningMethodHS384, testKey(), claims()),
		"HS512":                sign(jwt.SigningMethodHS512, testKey(), claims()),
		"RS256":                sign(jwt.SigningMethodRS256, rsaKey, claims()),
		"other key":            sign(jwt.SigningMethodHS256, []byte("another-key-another-key-another-key!"), claims()),
		"tampered payload":     tampered,
		"no exp":               sign(jwt.SigningMethodHS256, testKey(), noExp),
		"no jti":               sign(jwt.SigningMethodHS256, testKey(), noJTI),
		"no sub":               sign(jwt.SigningMethodHS256, testKey(), noSub),
		"issued in the future": sign(jwt.SigningMethodHS256, testKey(), future),
		"sub not a user id":    sign(jwt.SigningMethodHS256, testKey(), nonNumericSub),
		"garbage":              "not.a.jwt",
		"empty":                "",
		"huge":                 strings.Repeat("a", 5000),
	} {
		if _, err := ts.Verify(context.Background(), tok); !errors.Is(err, identity.ErrInvalidToken) {
			t.Errorf("%s: got %v, want ErrInvalidToken", name, err)
		}
	}
}

func TestTokenServiceConfig(t *testing.T) {
	s := kvMemory(t)
	if _, err := identity.NewTokenService([]byte("short"), time.Hour, s); err == nil {
		t.Error("a 5-byte key is accepted")
	}
	if _, err := identity.NewTokenService(testKey(), 500*time.Millisecond, s); err == nil {
		t.Error("a sub-second lifetime is accepted")
	}
	ts, err := identity.NewTokenService(testKey(), 90*time.Second, s)
	if err != nil {
		t.Fatal(err)
	}
	_, c, _ := ts.Issue(&ent.User{ID: 1, Username: "a"})
	if d := c.ExpiresAt.Sub(c.IssuedAt.Time); d != 90*time.Second {
		t.Fatalf("configured lifetime: exp-iat = %v", d)
	}
}

// TestTokenRevoke: a revoked token is refused by every service sharing the
// store (two services = two replicas), and the deny-list entry lives as
// long as the token would.
func TestTokenRevoke(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		_, store := backend(t, b)
		ctx := context.Background()
		ts1, _ := identity.NewTokenService(testKey(), defaultTokenTTL, store)
		ts2, _ := identity.NewTokenService(testKey(), defaultTokenTTL, store)
		raw, _, _ := ts1.Issue(&ent.User{ID: 1, Username: "alice"})
		other, _, _ := ts1.Issue(&ent.User{ID: 1, Username: "alice"})
		c, err := ts2.Verify(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := ts2.Revoke(ctx, c); err != nil {
			t.Fatal(err)
		}
		for i, ts := range []*identity.TokenService{ts1, ts2} {
			if _, err := ts.Verify(ctx, raw); !errors.Is(err, identity.ErrInvalidToken) {
				t.Errorf("service %d accepts a revoked token: %v", i+1, err)
			}
		}
		if _, err := ts1.Verify(ctx, other); err != nil {
			t.Errorf("revoking one token refused another of the same user: %v", err)
		}
	})
}

// TestTokenDenyListExpiry: the deny-list entry outlives the token and no
// more (memory store with a moved clock).
func TestTokenDenyListExpiry(t *testing.T) {
	clock := newFakeClock(time.Now())
	store := kvMemory(t, kv.WithClock(clock.now))
	ts, _ := identity.NewTokenService(testKey(), time.Hour, store, identity.WithTokenClock(clock.now))
	ctx := context.Background()
	raw, c, _ := ts.Issue(&ent.User{ID: 1, Username: "alice"})
	if err := ts.Revoke(ctx, c); err != nil {
		t.Fatal(err)
	}
	clock.add(time.Hour - time.Second)
	if _, err := ts.Verify(ctx, raw); !errors.Is(err, identity.ErrInvalidToken) {
		t.Fatalf("revoked token accepted before its expiry: %v", err)
	}
	// Revoking an already expired token is a no-op, not an entry forever.
	clock.add(2 * time.Hour)
	if err := ts.Revoke(ctx, c); err != nil {
		t.Fatal(err)
	}
}

// TestTokenVerifyStoreDown: when the deny-list cannot be read the token is
// not accepted, and the error says the store is unavailable.
func TestTokenVerifyStoreDown(t *testing.T) {
	store, err := kv.Open(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := identity.NewTokenService(testKey(), time.Hour, store)
	raw, _, _ := ts.Issue(&ent.User{ID: 1, Username: "alice"})
	store.Close()
	if _, err := ts.Verify(context.Background(), raw); !errors.Is(err, errs.Unavailable) {
		t.Fatalf("store down: %v, want errs.Unavailable", err)
	}
}

// TestLoginThrottle: of many concurrent attempts for one (username,
// address) exactly the pair's limit go ahead; the same username from
// another address, and other usernames, are unaffected; many addresses
// together hit the username's cap, which then refuses every address; a
// success takes its attempt back; the window ends.
func TestLoginThrottle(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		clock := newFakeClock(time.Now())
		_, store := backend(t, b, kv.WithClock(clock.now))
		ctx := context.Background()
		th := identity.NewLoginThrottle(store, 5, 12, time.Minute)
		var allowed atomic.Int32
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := th.Attempt(ctx, "alice", "192.0.2.1")
				if err != nil {
					t.Error(err)
				}
				if ok {
					allowed.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := allowed.Load(); n != 5 {
			t.Fatalf("%d of 20 concurrent attempts allowed, want 5", n)
		}
		// The 15 refused attempts of that address did not count for alice:
		// another address still has its own 5.
		for i := range 5 {
			if ok, _ := th.Attempt(ctx, "alice", "198.51.100.7"); !ok {
				t.Fatalf("attempt %d of alice from another address refused", i+1)
			}
		}
		if ok, _ := th.Attempt(ctx, "bob", "192.0.2.1"); !ok {
			t.Fatal("another username is throttled")
		}
		if err := th.Succeeded(ctx, "bob", "192.0.2.1"); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if ok, _ := th.Attempt(ctx, "bob", "192.0.2.1"); !ok {
				t.Fatal("the count of bob was not cleared by his success")
			}
		}
		// alice has 10 failures; 2 more from a third address reach the cap
		// of 12, after which every address is refused, a fresh one too.
		for i := range 2 {
			if ok, _ := th.Attempt(ctx, "alice", "203.0.113.9"); !ok {
				t.Fatalf("attempt %d under the username cap refused", i+1)
			}
		}
		if ok, _ := th.Attempt(ctx, "alice", "203.0.113.10"); ok {
			t.Fatal("the username cap did not refuse a fresh address")
		}
		// IPv6 addresses of one /64 count as one address.
		for i := range 5 {
			if ok, _ := th.Attempt(ctx, "dave", "2001:db8:1:2::"+strconv.Itoa(i+1)); !ok {
				t.Fatalf("attempt %d from the /64 refused", i+1)
			}
		}
		if ok, _ := th.Attempt(ctx, "dave", "2001:db8:1:2:ffff::9"); ok {
			t.Fatal("another address of the same /64 got a fresh budget")
		}
		if ok, _ := th.Attempt(ctx, "dave", "2001:db8:1:3::1"); !ok {
			t.Fatal("another /64 is throttled")
		}
		if b.Embedded() { // the Redis store keeps its own time
			clock.add(time.Minute)
			if ok, _ := th.Attempt(ctx, "alice", "192.0.2.1"); !ok {
				t.Fatal("still throttled after the window")
			}
		}
	})
}
