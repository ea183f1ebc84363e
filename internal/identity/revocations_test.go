package identity_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/hook"
	"gatehouse/ent/tokenrevocation"
	"gatehouse/internal/identity"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// replica is one process's view of the revocations: its mirror, loaded
// from db, and a token service over its own (empty) in-process store.
type replica struct {
	revs  *identity.Revocations
	ts    *identity.TokenService
	users *identity.Users
}

func newReplica(t *testing.T, db *store.DB, run bool, opts ...identity.RevocationsOption) *replica {
	t.Helper()
	revs := identity.NewRevocations(db, quiet, opts...)
	if err := revs.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if run {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); revs.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	ts, err := identity.NewTokenService(testKey(), time.Hour, kvMemory(t), identity.WithRevocations(revs))
	if err != nil {
		t.Fatal(err)
	}
	return &replica{revs: revs, ts: ts, users: identity.NewUsers(db.Client, identity.WithTokens(ts))}
}

func (r *replica) refused(t *testing.T, token string) bool {
	t.Helper()
	_, err := r.ts.Verify(context.Background(), token)
	if err != nil && !errors.Is(err, identity.ErrInvalidToken) {
		t.Fatalf("verify: %v", err)
	}
	return err != nil
}

// TestRevocationsSurviveRestart: a logout, a disabled user and a new
// password are in the database before the call returns; a new process
// (new mirror, empty shared store) refuses those tokens and accepts the
// others. A token service without the database's revocations, over the
// same empty store, accepts them: the shared store alone would forget.
func TestRevocationsSurviveRestart(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		ctx := context.Background()
		first := newReplica(t, db, false)
		alice := mustCreate(t, first.users, "alice", "password-1")
		bob := mustCreate(t, first.users, "bob", "password-1")
		carol := mustCreate(t, first.users, "carol", "password-1")

		aliceTok, _, _ := first.ts.Issue(alice)
		bobOut, bobClaims, _ := first.ts.Issue(bob)
		bobKept, _, _ := first.ts.Issue(bob)
		carolTok, _, _ := first.ts.Issue(carol)
		if err := first.ts.Revoke(ctx, bobClaims); err != nil {
			t.Fatal(err)
		}
		if _, err := first.users.Disable(ctx, alice.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := first.users.SetPassword(ctx, carol.ID, "password-2"); err != nil {
			t.Fatal(err)
		}

		next := newReplica(t, db, false)
		for name, tok := range map[string]string{"logged out": bobOut, "disabled user": aliceTok, "new password": carolTok} {
			if !next.refused(t, tok) {
				t.Errorf("after a restart with an empty store, the token of a %s is accepted", name)
			}
		}
		if next.refused(t, bobKept) {
			t.Error("after a restart, a token that was never revoked is refused")
		}
		if jtis, users := next.revs.Len(); jtis != 1 || users != 2 {
			t.Errorf("mirror holds %d logouts and %d users, want 1 and 2", jtis, users)
		}
		for kind, want := range map[string]float64{"jti": 1, "user": 2} {
			if v, ok := testenv.Metric(t, "gatehouse_token_revocations", "kind", kind); !ok || v != want {
				t.Errorf("gatehouse_token_revocations{kind=%q} = %v (%v), want %v", kind, v, ok, want)
			}
		}

		// The same check without the database's record: what the shared
		// store alone kept (nothing, it is new).
		bare, err := identity.NewTokenService(testKey(), time.Hour, kvMemory(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bare.Verify(ctx, bobOut); err != nil {
			t.Fatalf("the control (no database record) refuses the logged-out token too: %v", err)
		}
	})
}

// TestRevocationsReachReplicas: on Postgres, a revocation made by one
// replica is refused by another, with its own empty store, within a poll
// (NOTIFY usually makes it milliseconds) — including one whose
// transaction took its id before a later revocation committed (the poll
// looks again for ids it skipped).
func TestRevocationsReachReplicas(t *testing.T) {
	b := testenv.Backend{Name: "postgres", DatabaseURL: testenv.PostgresURL(t)}
	db := storetest.Open(t, b)
	ctx := context.Background()
	a := newReplica(t, db, true)
	other := newReplica(t, db, true)
	alice := mustCreate(t, a.users, "alice", "password-1")
	bob := mustCreate(t, a.users, "bob", "password-1")

	waitRefused := func(what, tok string) time.Duration {
		t.Helper()
		start := time.Now()
		for deadline := start.Add(3 * time.Second); !other.refused(t, tok); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the other replica still accepts the token after 3 s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(start)
	}

	out, c, _ := a.ts.Issue(alice)
	if err := a.ts.Revoke(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Logf("logout reached the other replica in %v", waitRefused("logout", out))

	bobTok, _, _ := a.ts.Issue(bob)
	if _, err := a.users.SetPassword(ctx, bob.ID, "password-2"); err != nil {
		t.Fatal(err)
	}
	t.Logf("new password reached the other replica in %v", waitRefused("new password", bobTok))

	// A revocation whose transaction commits after a later one.
	slowTok, slowClaims, _ := a.ts.Issue(alice)
	tx, err := db.Tx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.TokenRevocation.Create().SetKind(tokenrevocation.KindJti).SetSubject(slowClaims.ID).
		SetRevokedAt(time.Now()).SetExpiresAt(slowClaims.ExpiresAt.Add(time.Second)).Save(ctx); err != nil {
		t.Fatal(err)
	}
	fastTok, fastClaims, _ := a.ts.Issue(alice)
	if err := a.ts.Revoke(ctx, fastClaims); err != nil {
		t.Fatal(err)
	}
	waitRefused("later logout", fastTok)
	if other.refused(t, slowTok) {
		t.Fatal("an uncommitted revocation is seen")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	t.Logf("revocation committed after a later one reached the other replica in %v", waitRefused("earlier id, later commit", slowTok))
}

// TestRevocationsPrune: revocations are deleted (and leave the mirror)
// once every token they concern has expired, not before.
func TestRevocationsPrune(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		ctx := context.Background()
		clock := newFakeClock(time.Now())
		revs := identity.NewRevocations(db, quiet, identity.WithRevocationClock(clock.now))
		if err := revs.Load(ctx); err != nil {
			t.Fatal(err)
		}
		ts, err := identity.NewTokenService(testKey(), time.Hour, kvMemory(t), identity.WithRevocations(revs), identity.WithTokenClock(clock.now))
		if err != nil {
			t.Fatal(err)
		}
		users := identity.NewUsers(db.Client, identity.WithTokens(ts))
		alice := mustCreate(t, users, "alice", "password-1")
		tok, c, _ := ts.Issue(alice)
		if err := ts.Revoke(ctx, c); err != nil {
			t.Fatal(err)
		}
		if _, err := users.Disable(ctx, alice.ID); err != nil {
			t.Fatal(err)
		}
		count := func() int { return db.TokenRevocation.Query().CountX(ctx) }
		clock.add(59 * time.Minute)
		if n, err := revs.Prune(ctx); err != nil || n != 0 || count() != 2 {
			t.Fatalf("prune while the tokens may be valid: %d, %v (%d rows left)", n, err, count())
		}
		if _, err := ts.Verify(ctx, tok); !errors.Is(err, identity.ErrInvalidToken) {
			t.Fatalf("a logged-out token after a prune: %v", err)
		}
		// A user revocation is kept MaxSignInAge longer: a login that read
		// the user before it may issue a token that late.
		clock.add(2 * time.Minute)
		if n, err := revs.Prune(ctx); err != nil || n != 1 || count() != 1 {
			t.Fatalf("prune after the logged-out token expired: %d, %v (%d rows left)", n, err, count())
		}
		clock.add(identity.MaxSignInAge)
		if n, err := revs.Prune(ctx); err != nil || n != 1 || count() != 0 {
			t.Fatalf("prune after the tokens expired: %d, %v (%d rows left)", n, err, count())
		}
		if jtis, us := revs.Len(); jtis != 0 || us != 0 {
			t.Fatalf("mirror after the prune: %d logouts, %d users", jtis, us)
		}
	})
}

// TestRevokeUserCoversTheCommit: a token issued while a disable commits
// or after it, by a login that read the user before the commit, is
// refused too — by the security version it carries, which the disable
// raised; on a new process as well.
func TestRevokeUserCoversTheCommit(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		ctx := context.Background()
		clock := newFakeClock(time.Now().Add(-time.Minute)) // behind the new process's clock: its tokens are not from the future
		revs := identity.NewRevocations(db, quiet, identity.WithRevocationClock(clock.now))
		if err := revs.Load(ctx); err != nil {
			t.Fatal(err)
		}
		ts, err := identity.NewTokenService(testKey(), time.Hour, kvMemory(t), identity.WithRevocations(revs), identity.WithTokenClock(clock.now))
		if err != nil {
			t.Fatal(err)
		}
		users := identity.NewUsers(db.Client, identity.WithTokens(ts))
		alice := mustCreate(t, users, "alice", "password-1")
		var during string
		db.User.Use(func(next ent.Mutator) ent.Mutator {
			return hook.UserFunc(func(ctx context.Context, m *ent.UserMutation) (ent.Value, error) {
				v, err := next.Mutate(ctx, m)
				if _, revoking := m.TokensRevokedAt(); revoking && during == "" {
					clock.add(50 * time.Millisecond) // the commit takes a while
					during, _, _ = ts.Issue(alice)
					clock.add(50 * time.Millisecond)
				}
				return v, err
			})
		})
		if _, err := users.Disable(ctx, alice.ID); err != nil {
			t.Fatal(err)
		}
		if during == "" {
			t.Fatal("the hook did not run")
		}
		clock.add(time.Second) // the login's password check ends well after the commit
		late, _, _ := ts.Issue(alice)
		for name, tok := range map[string]string{"while the disable committed": during, "after it": late} {
			if _, err := ts.Verify(ctx, tok); !errors.Is(err, identity.ErrInvalidToken) {
				t.Fatalf("a token issued %s from a read before it: %v", name, err)
			}
		}
		if _, err := users.Enable(ctx, alice.ID); err != nil {
			t.Fatal(err)
		}
		fresh, _, _ := ts.Issue(db.User.GetX(ctx, alice.ID))
		if _, err := ts.Verify(ctx, fresh); err != nil {
			t.Fatalf("a token from a login after the disable and enable: %v", err)
		}
		next := newReplica(t, db, false)
		for name, tok := range map[string]string{"while the disable committed": during, "after it": late} {
			if !next.refused(t, tok) {
				t.Fatalf("a new process accepts the token issued %s from a read before it", name)
			}
		}
		if next.refused(t, fresh) {
			t.Fatal("a new process refuses a token from a login after the disable and enable")
		}
	})
}
