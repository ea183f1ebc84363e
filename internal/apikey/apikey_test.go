package apikey_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/apikey"
	"gatehouse/internal/errs"
	"gatehouse/internal/secret"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestCreateAndAuthenticate(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		ctx := context.Background()
		counter := apikey.NewCounter(db.Client, quietLog(), time.Hour)
		svc := apikey.NewService(db.Client, counter)

		row, key, err := svc.Create(ctx, "  ops  ", apikey.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(key, apikey.KeyPrefix) || len(key) != len(apikey.KeyPrefix)+43 {
			t.Fatalf("key %q", key)
		}
		if row.Name != "ops" || row.Prefix != key[:8] || row.Status != apikey.Enabled || row.UsageCount != 0 {
			t.Fatalf("row %+v", row)
		}
		if row.KeyHash != secret.HashToken(key) || strings.Contains(row.KeyHash, key[4:]) {
			t.Fatal("the key must be stored as its SHA-256 only")
		}
		_, key2, _ := svc.Create(ctx, "ops", apikey.RoleAdmin)
		if key2 == key {
			t.Fatal("two keys are equal")
		}

		got, err := svc.Authenticate(ctx, key)
		if err != nil || got.ID != row.ID {
			t.Fatalf("Authenticate: %v, %v", got, err)
		}
		if counter.Pending() != 1 {
			t.Fatalf("pending uses %d", counter.Pending())
		}
		for name, k := range map[string]string{
			"unknown":    "ghk_unknown-unknown-unknown-unknown",
			"truncated":  key[:len(key)-1],
			"extended":   key + "x",
			"other case": strings.ToUpper(key),
			"too long":   strings.Repeat("k", apikey.MaxKeyLen+1),
		} {
			if _, err := svc.Authenticate(ctx, k); !errors.Is(err, apikey.ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", name, err)
			}
		}
		if _, err := svc.Authenticate(ctx, ""); !errors.Is(err, apikey.ErrMissing) {
			t.Fatalf("empty: %v", err)
		}
		if counter.Pending() != 1 {
			t.Fatalf("refused keys were counted: %d", counter.Pending())
		}

		dis, err := svc.Disable(ctx, row.ID)
		if err != nil || dis.Status != apikey.Disabled {
			t.Fatalf("Disable: %v %v", dis, err)
		}
		if _, err := svc.Authenticate(ctx, key); !errors.Is(err, apikey.ErrInvalid) {
			t.Fatalf("disabled key: %v", err)
		}
		if _, err := svc.Authenticate(ctx, key2); err != nil {
			t.Fatalf("the other key must still work: %v", err)
		}
		if _, err := svc.Disable(ctx, 99999); !errors.Is(err, apikey.ErrNotFound) {
			t.Fatalf("Disable unknown: %v", err)
		}
	})
}

func TestNameValidation(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc := apikey.NewService(storetest.Open(t, b).Client, nil)
		for name, n := range map[string]string{
			"empty": "", "blank": " \t ", "too long": strings.Repeat("é", apikey.MaxNameLen+1), "newline": "a\nb", "invalid UTF-8": "a\xffb",
		} {
			_, _, err := svc.Create(context.Background(), n, apikey.RoleAdmin)
			if errs.KindOf(err) != errs.Validation || errs.Field(err) != "name" {
				t.Errorf("%s: %v", name, err)
			}
		}
		// The limit counts characters: 128 of two bytes each are fine.
		if _, _, err := svc.Create(context.Background(), strings.Repeat("é", apikey.MaxNameLen), apikey.RoleAdmin); err != nil {
			t.Errorf("128 two-byte characters: %v", err)
		}
		if _, _, err := svc.Create(context.Background(), strings.Repeat("n", apikey.MaxNameLen), apikey.RoleAdmin); err != nil {
			t.Fatalf("128 characters: %v", err)
		}
	})
}

// TestEnsure: the bootstrap key is created once, found again, enabled
// again after a disable, and replicas racing to create it end with one row.
func TestEnsure(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		ctx := context.Background()
		svc := apikey.NewService(db.Client, nil)
		const key = "bootstrap-key-0123456789"
		// The setting promises a key with exactly the configured value:
		// a short one works (the process warns about it), an over-long
		// one is refused.
		if row, err := svc.Ensure(ctx, "short", "short"); err != nil {
			t.Fatalf("a 5-character bootstrap key was refused: %v", err)
		} else if got, err := svc.Authenticate(ctx, "short"); err != nil || got.ID != row.ID {
			t.Fatalf("the short bootstrap key does not authenticate: %v", err)
		}
		if _, err := svc.Ensure(ctx, "boot", strings.Repeat("k", apikey.MaxKeyLen+1)); err == nil {
			t.Fatal("an over-long key was accepted")
		}

		var wg sync.WaitGroup
		ids := make(chan int, 8)
		for range 8 {
			wg.Go(func() {
				row, err := svc.Ensure(ctx, "boot", key)
				if err != nil {
					t.Error(err)
					return
				}
				ids <- row.ID
			})
		}
		wg.Wait()
		close(ids)
		first := -1
		for id := range ids {
			if first >= 0 && id != first {
				t.Fatalf("racing Ensure made two keys: %d and %d", first, id)
			}
			first = id
		}
		if n := db.APIKey.Query().CountX(ctx); n != 2 { // the short key and this one
			t.Fatalf("%d rows, want 2", n)
		}
		row := db.APIKey.GetX(ctx, first)
		if row.Prefix != key[:len(key)/4] {
			t.Fatalf("prefix %q shows too much of a chosen key", row.Prefix)
		}
		if _, err := svc.Disable(ctx, first); err != nil {
			t.Fatal(err)
		}
		again, err := svc.Ensure(ctx, "boot", key)
		if err != nil || again.ID != first || again.Status != apikey.Enabled {
			t.Fatalf("Ensure after disable: %+v %v", again, err)
		}
		if _, err := svc.Authenticate(ctx, key); err != nil {
			t.Fatal(err)
		}
	})
}
