package identity_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gatehouse/internal/errs"
	"gatehouse/internal/identity"
	"gatehouse/internal/testenv"
)

// TestSignInCarriesTheVersion: Authenticate returns the user as read
// before the password check, and when; the token issued from it carries
// that read's security version (sv), also when the user changed
// meanwhile, and is then refused. A sign-in read more than MaxSignInAge
// ago is refused as unavailable (the login may be repeated): no token
// may outlive the revocation that concerns it.
func TestSignInCarriesTheVersion(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db, store := backend(t, b)
		ctx := context.Background()
		clock := newFakeClock(time.Now().Add(-time.Hour))
		ts, err := identity.NewTokenService(testKey(), time.Hour, store, identity.WithTokenClock(clock.now))
		if err != nil {
			t.Fatal(err)
		}
		users := identity.NewUsers(db.Client, identity.WithTokens(ts))
		alice := mustCreate(t, users, "alice", "password-1")

		var read *identity.SignIn
		users.SetAfterRead(func(context.Context, string) {
			users.SetAfterRead(nil)
			clock.add(10 * time.Millisecond)
			if _, err := users.SetPassword(ctx, alice.ID, "password-2"); err != nil {
				t.Error(err)
			}
			clock.add(10 * time.Millisecond)
		})
		start := clock.now()
		read, err = users.Authenticate(ctx, "alice", "password-1")
		if err != nil {
			t.Fatalf("the login that read the user before the change: %v", err)
		}
		if read.User.SecurityVersion != 0 || !read.ReadAt.Equal(start) {
			t.Fatalf("sign-in: version %d read at %v, want 0 at %v", read.User.SecurityVersion, read.ReadAt, start)
		}
		tok, c, err := ts.IssueSignIn(read)
		if err != nil {
			t.Fatal(err)
		}
		if c.SecurityVersion == nil || *c.SecurityVersion != 0 {
			t.Fatalf("sv claim %v, want 0", c.SecurityVersion)
		}
		if _, err := ts.Verify(ctx, tok); !errors.Is(err, identity.ErrInvalidToken) {
			t.Fatalf("the token of a login that read the old password: %v", err)
		}

		now, err := users.Authenticate(ctx, "alice", "password-2")
		if err != nil || now.User.SecurityVersion != 1 {
			t.Fatalf("a login after the change: %+v, %v", now, err)
		}
		tok, _, err = ts.IssueSignIn(now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ts.Verify(ctx, tok); err != nil {
			t.Fatalf("the token of a login after the change: %v", err)
		}

		clock.add(identity.MaxSignInAge + time.Millisecond)
		if _, _, err := ts.IssueSignIn(now); errs.KindOf(err) != errs.Unavailable {
			t.Fatalf("a sign-in read %v ago: %v, want unavailable", identity.MaxSignInAge, err)
		}
	})
}
