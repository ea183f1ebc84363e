package partner

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/ent/partnerapp"
	"gatehouse/internal/errs"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
)

func ptr[T any](v T) *T { return &v }

func TestCreateValidation(t *testing.T) {
	db := storetest.Open(t, testenv.Backend{Name: "sqlite"})
	s := newService(t, db)
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		in    CreateInput
		field string
	}{
		{"name missing", CreateInput{}, "appName"},
		{"name blank", CreateInput{AppName: "   "}, "appName"},
		{"name too long", CreateInput{AppName: strings.Repeat("a", 129)}, "appName"},
		{"CJK name too long", CreateInput{AppName: strings.Repeat("伙", 129)}, "appName"},
		{"name with control", CreateInput{AppName: "a\nb"}, "appName"},
		{"name invalid utf-8", CreateInput{AppName: "a\xff"}, "appName"},
		{"key with space", CreateInput{AppName: "a", AppKey: "a b"}, "appKey"},
		{"key with dot", CreateInput{AppName: "a", AppKey: "a.b"}, "appKey"},
		{"key too long", CreateInput{AppName: "a", AppKey: strings.Repeat("k", 65)}, "appKey"},
		{"rate 0", CreateInput{AppName: "a", RateLimit: ptr(0)}, "rateLimit"},
		{"rate too high", CreateInput{AppName: "a", RateLimit: ptr(1_000_001)}, "rateLimit"},
		{"callback not http", CreateInput{AppName: "a", CallbackURL: "ftp://x/y"}, "callbackURL"},
		{"callback relative", CreateInput{AppName: "a", CallbackURL: "/hook"}, "callbackURL"},
		{"redirect relative", CreateInput{AppName: "a", RedirectURIs: []string{"/cb"}}, "redirectURIs"},
		{"redirect with fragment", CreateInput{AppName: "a", RedirectURIs: []string{"https://x/cb#f"}}, "redirectURIs"},
		{"scope with space", CreateInput{AppName: "a", Scopes: []string{"a b"}}, "scopes"},
		{"scope empty", CreateInput{AppName: "a", Scopes: []string{""}}, "scopes"},
		{"imported secret short", CreateInput{AppName: "a", AppSecret: "short"}, "appSecret"},
		{"imported secret with space", CreateInput{AppName: "a", AppSecret: "has a space in it ok"}, "appSecret"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := s.Create(ctx, c.in)
			if errs.KindOf(err) != errs.Validation || errs.Field(err) != c.field {
				t.Fatalf("got %v, want a validation error on %s", err, c.field)
			}
		})
	}
	if n := db.PartnerApp.Query().CountX(ctx); n != 0 {
		t.Fatalf("%d apps stored by invalid inputs", n)
	}
}

func TestCreateAndGet(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		s := newService(t, db)
		ctx := context.Background()
		exp := time.Date(2027, 6, 30, 22, 0, 0, 0, time.FixedZone("x", -5*3600))
		app, sec, err := s.Create(ctx, CreateInput{
			AppName: "  Shop  ", ExpireDate: &exp, CallbackURL: "https://shop.example/hook",
			RedirectURIs: []string{"https://shop.example/cb", "https://shop.example/cb"}, Scopes: []string{"orders:read", "orders:read", "stock"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if app.AppName != "Shop" || !strings.HasPrefix(app.AppKey, "ak_") || app.Status != Enabled || app.RateLimit != DefaultRateLimit {
			t.Fatalf("defaults: %+v", app)
		}
		if app.ExpireDate == nil || !app.ExpireDate.Equal(time.Date(2027, 6, 30, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("expire date %v: want the date as given, 2027-06-30", app.ExpireDate)
		}
		if len(app.RedirectURIs) != 1 || len(app.Scopes) != 2 {
			t.Fatalf("duplicates kept: %v %v", app.RedirectURIs, app.Scopes)
		}
		if len(sec.AppSecret) < 40 || !strings.HasPrefix(sec.WebhookSecret, "whsec_") {
			t.Fatalf("secrets %d chars, webhook %q…", len(sec.AppSecret), sec.WebhookSecret[:6])
		}
		// Stored sealed: the plaintext is nowhere in the row.
		row := db.PartnerApp.Query().Where(partnerapp.ID(app.ID)).OnlyX(ctx)
		if bytes.Contains(row.Secret, []byte(sec.AppSecret)) || row.WebhookSecret == nil || bytes.Contains(*row.WebhookSecret, []byte(sec.WebhookSecret)) {
			t.Fatal("a secret is stored in plain text")
		}
		got, err := s.Get(ctx, app.ID)
		if err != nil || got.AppKey != app.AppKey {
			t.Fatalf("get: %+v %v", got, err)
		}
		if byKey, err := s.GetByKey(ctx, app.AppKey); err != nil || byKey.ID != app.ID {
			t.Fatalf("get by key: %v", err)
		}
		if _, err := s.Get(ctx, app.ID+1000); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown id: %v", err)
		}
		if _, _, err := s.Create(ctx, CreateInput{AppName: "b", AppKey: app.AppKey}); !errors.Is(err, ErrConflict) {
			t.Fatalf("duplicate key: %v", err)
		}
		if ok, err := s.SecretMatches(ctx, app.AppKey, sec.AppSecret); !ok || err != nil {
			t.Fatalf("SecretMatches: %v %v", ok, err)
		}
		if ok, _ := s.SecretMatches(ctx, app.AppKey, sec.AppSecret+"x"); ok {
			t.Fatal("SecretMatches accepts another secret")
		}
		ws, err := s.webhookSecrets(ctx, app.ID)
		if err != nil || len(ws) != 1 || ws[0] != sec.WebhookSecret {
			t.Fatalf("webhook secrets: %d %v", len(ws), err)
		}
		// An imported secret is kept as given.
		imp, isec, err := s.Create(ctx, CreateInput{AppName: "imported", AppKey: "legacy-1", AppSecret: "legacy-secret-0123456789"})
		if err != nil || isec.AppSecret != "legacy-secret-0123456789" || imp.AppKey != "legacy-1" {
			t.Fatalf("import: %v", err)
		}
	})
}

func TestUpdate(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		s := newService(t, db)
		ctx := context.Background()
		app, _, err := s.Create(ctx, CreateInput{AppName: "a", CallbackURL: "https://x.example/h"})
		if err != nil {
			t.Fatal(err)
		}
		exp := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
		up, err := s.Update(ctx, app.ID, UpdateInput{
			AppName: ptr("renamed"), Status: ptr(Disabled), RateLimit: ptr(7), ExpireDate: &exp,
			CallbackURL: ptr(""), RedirectURIs: &[]string{"https://x.example/cb"}, Scopes: &[]string{"s"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if up.AppName != "renamed" || up.Status != Disabled || up.RateLimit != 7 || up.ExpireDate == nil || up.CallbackURL != "" ||
			len(up.RedirectURIs) != 1 || len(up.Scopes) != 1 || up.AppKey != app.AppKey {
			t.Fatalf("updated %+v", up)
		}
		up, err = s.Update(ctx, app.ID, UpdateInput{ClearExpireDate: true})
		if err != nil || up.ExpireDate != nil || up.RateLimit != 7 {
			t.Fatalf("clear expire date: %+v %v", up, err)
		}
		for name, in := range map[string]UpdateInput{
			"status 2":       {Status: ptr(Status(2))},
			"rate 0":         {RateLimit: ptr(0)},
			"blank name":     {AppName: ptr(" ")},
			"set and clear":  {ExpireDate: &exp, ClearExpireDate: true},
			"bad callback":   {CallbackURL: ptr("nope")},
			"bad redirect":   {RedirectURIs: &[]string{"nope"}},
			"bad scope char": {Scopes: &[]string{`a"b`}},
		} {
			if _, err := s.Update(ctx, app.ID, in); errs.KindOf(err) != errs.Validation {
				t.Errorf("%s: %v", name, err)
			}
		}
		if _, err := s.Update(ctx, app.ID+1000, UpdateInput{AppName: ptr("x")}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown id: %v", err)
		}
	})
}

// TestConcurrentRotations: rotations racing each other end in a chain in
// which the last secret handed out is current and the one before it is the
// previous secret; none is silently lost in between.
func TestConcurrentRotations(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		s := newService(t, db)
		ctx := context.Background()
		app, _, err := s.Create(ctx, CreateInput{AppName: "a"})
		if err != nil {
			t.Fatal(err)
		}
		// Rotations of one app race (released together); each round of the
		// compare-and-set has a winner, so every one of them succeeds
		// however the machine schedules them.
		const n = 6
		secrets := make([]string, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, sec, err := s.RotateSecret(ctx, app.ID)
				if err != nil {
					t.Error(err)
				}
				secrets[i] = sec
			}()
		}
		close(start)
		wg.Wait()
		cred, err := s.loadCredentials(ctx, app.AppKey)
		if err != nil {
			t.Fatal(err)
		}
		cur, prev := string(cred.secret), string(cred.previous)
		var curFound, prevFound bool
		for _, sec := range secrets {
			curFound = curFound || sec == cur
			prevFound = prevFound || sec == prev
		}
		if !curFound || !prevFound || cur == prev {
			t.Fatal("current and previous secret must both be secrets handed out by the rotations")
		}
		if _, _, err := s.RotateSecret(ctx, app.ID+1000); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown id: %v", err)
		}
	})
}

func TestWebhookSecretRotation(t *testing.T) {
	db := storetest.Open(t, testenv.Backend{Name: "sqlite"})
	clk := newClock(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	s := newService(t, db, WithClock(clk.Now), WithWebhookSecretGen(func() string { return "whsec_" + strings.Repeat("A", 44) + clk.Now().Format("150405") }))
	ctx := context.Background()
	app, sec, err := s.Create(ctx, CreateInput{AppName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	_, w1, err := s.RotateWebhookSecret(ctx, app.ID)
	if err != nil || w1 == sec.WebhookSecret {
		t.Fatalf("rotate: %v", err)
	}
	ws, _ := s.webhookSecrets(ctx, app.ID)
	if len(ws) != 2 || ws[0] != w1 || ws[1] != sec.WebhookSecret {
		t.Fatalf("during the overlap: %v", ws)
	}
	clk.Advance(RotationOverlap)
	ws, _ = s.webhookSecrets(ctx, app.ID)
	if len(ws) != 1 || ws[0] != w1 {
		t.Fatalf("after the overlap: %v", ws)
	}
}

// The name limit counts characters, not bytes: 128 CJK characters (384
// bytes) are stored on both databases.
func TestCreateLongUnicodeName(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		s := newService(t, storetest.Open(t, b))
		name := strings.Repeat("伙", MaxAppNameLen)
		app, _, err := s.Create(context.Background(), CreateInput{AppName: name})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(context.Background(), app.ID); err != nil || got.AppName != name {
			t.Fatalf("stored %q, %v", got.AppName, err)
		}
	})
}
