package identity_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"gatehouse/internal/errs"
	"gatehouse/internal/identity"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

// usersDB opens a migrated database on b for the user-creation tests.
func usersDB(t *testing.T, b testenv.Backend) *store.DB {
	t.Helper()
	ctx := context.Background()
	url := b.DatabaseURL
	if b.Embedded() {
		url = "sqlite:" + filepath.Join(t.TempDir(), "users.db")
	}
	db, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestCreateUserRules(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := usersDB(t, b)
		ctx := context.Background()
		users := identity.NewUsers(db.Client)

		u, err := users.Create(ctx, identity.NewUser{Username: "Ann_O.k-1", Password: "12345678", Roles: []string{"admin", "ops:read", "admin"}})
		if err != nil {
			t.Fatal(err)
		}
		if u.Username != "Ann_O.k-1" || u.Status != identity.UserEnabled || !slices.Equal(u.Roles, []string{"admin", "ops:read"}) {
			t.Fatalf("created %+v", u)
		}
		if !strings.HasPrefix(u.PasswordHash, "$2") || !secret.CheckPassword(u.PasswordHash, "12345678") || secret.CheckPassword(u.PasswordHash, "12345679") {
			t.Fatal("the password must be stored as a bcrypt hash")
		}
		// 72 bytes is the longest password, in bytes not characters.
		if _, err := users.Create(ctx, identity.NewUser{Username: "max", Password: strings.Repeat("é", 36)}); err != nil {
			t.Fatalf("72-byte password: %v", err)
		}
		// Usernames are exact: another case is another user.
		if _, err := users.Create(ctx, identity.NewUser{Username: "ann_o.k-1", Password: "12345678"}); err != nil {
			t.Fatalf("other case: %v", err)
		}

		bad := []struct {
			name  string
			in    identity.NewUser
			field string
		}{
			{"empty username", identity.NewUser{Password: "12345678"}, "username"},
			{"65 characters", identity.NewUser{Username: strings.Repeat("a", 65), Password: "12345678"}, "username"},
			{"space", identity.NewUser{Username: "a b", Password: "12345678"}, "username"},
			{"slash", identity.NewUser{Username: "a/b", Password: "12345678"}, "username"},
			{"non-ASCII", identity.NewUser{Username: "zoë", Password: "12345678"}, "username"},
			{"7-byte password", identity.NewUser{Username: "c", Password: "1234567"}, "password"},
			{"73-byte password", identity.NewUser{Username: "c", Password: strings.Repeat("é", 36) + "x"}, "password"},
			{"empty role", identity.NewUser{Username: "c", Password: "12345678", Roles: []string{""}}, "roles"},
			{"role with space", identity.NewUser{Username: "c", Password: "12345678", Roles: []string{"a b"}}, "roles"},
			{"too many roles", identity.NewUser{Username: "c", Password: "12345678", Roles: manyRoles(identity.MaxRoles + 1)}, "roles"},
		}
		for _, c := range bad {
			_, err := users.Create(ctx, c.in)
			if errs.KindOf(err) != errs.Validation || errs.Field(err) != c.field {
				t.Errorf("%s: %v, want a validation error on %s", c.name, err, c.field)
			} else if c.in.Password != "" && strings.Contains(err.Error(), c.in.Password) {
				t.Errorf("%s: the message repeats the password", c.name)
			}
		}
		if n := db.User.Query().CountX(ctx); n != 3 {
			t.Fatalf("%d users after refused inputs", n)
		}
	})
}

// TestCreateUserConflict: of concurrent creations of one username exactly
// one succeeds; the others get ErrConflict.
func TestCreateUserConflict(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := usersDB(t, b)
		users := identity.NewUsers(db.Client)
		var ok, conflict atomic.Int32
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				_, err := users.Create(context.Background(), identity.NewUser{Username: "dup", Password: "12345678"})
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, identity.ErrConflict):
					conflict.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if ok.Load() != 1 || conflict.Load() != 5 {
			t.Fatalf("%d created, %d conflicts", ok.Load(), conflict.Load())
		}
	})
}

func manyRoles(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "r" + strings.Repeat("x", i)
	}
	return out
}
