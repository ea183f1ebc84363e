package oauth_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/identity"
	"gatehouse/internal/kv"
	"gatehouse/internal/oauth"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
)

// TestPasswordResetRacingRefresh: someone who holds a user's refresh
// token (the reason a password is reset) keeps rotating it while an
// operator sets the user's password. Once setUserPassword has returned,
// no token pair obtained by that someone may work: a refresh committed
// while the reset was revoking tokens must not leave a live pair behind
// (on Postgres, a token inserted by a concurrent transaction is invisible
// to the reset's UPDATE unless the two serialize on the user's row).
func TestPasswordResetRacingRefresh(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f, users, c := resetSetup(t, b)
		ctx := context.Background()
		// SQLite runs one writer at a time (the race cannot happen there,
		// and each round waits for the lock): fewer rounds.
		rounds := 25
		if b.Embedded() {
			rounds = 5
		}
		for round := range rounds {
			first, err := f.svc.ExchangeCode(ctx, c, f.code(t, oauth.AuthorizeRequest{}), redirect, "")
			if err != nil {
				t.Fatal(err)
			}
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				got   = []oauth.TokenResponse{first}
				reset = make(chan struct{})
			)
			wg.Add(1)
			go func() { // the holder of the leaked refresh token, until the reset is done
				defer wg.Done()
				cur := first
				for range 200 {
					select {
					case <-reset:
						return
					default:
					}
					next, err := f.svc.Refresh(ctx, c, cur.RefreshToken, "")
					if err != nil {
						if !oauth.IsCode(err, oauth.CodeInvalidGrant) {
							t.Errorf("refresh: %v", err)
						}
						return
					}
					mu.Lock()
					got = append(got, next)
					mu.Unlock()
					cur = next
				}
			}()
			time.Sleep(time.Duration(round%5) * time.Millisecond) // vary where the reset lands
			if _, err := users.SetPassword(ctx, f.user.ID, "a-new-password-1"); err != nil {
				t.Fatal(err)
			}
			close(reset)
			wg.Wait()
			last := got[len(got)-1]
			if _, err := f.svc.Refresh(ctx, c, last.RefreshToken, ""); !oauth.IsCode(err, oauth.CodeInvalidGrant) {
				t.Fatalf("round %d: the last refresh token (of %d pairs) still rotates after the password reset (%v)", round, len(got), err)
			}
			for i, tok := range got {
				if _, err := f.svc.AccessToken(ctx, tok.AccessToken); !oauth.IsCode(err, oauth.CodeInvalidToken) {
					t.Fatalf("round %d: access token %d of %d still works after the password reset (%v)", round, i+1, len(got), err)
				}
			}
		}
	})
}

// TestPasswordResetRacingApprove: someone holding the user's browser
// session keeps clicking Approve while an operator sets the user's
// password. Once setUserPassword has returned, no authorization code
// issued for that session may be exchanged: a code inserted while the
// reset was spending codes must not survive it, and one issued after it
// must be refused (the sign-in predates the reset).
func TestPasswordResetRacingApprove(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f, users, c := resetSetup(t, b)
		ctx := context.Background()
		rounds := 20
		if b.Embedded() {
			rounds = 5
		}
		for round := range rounds {
			signedIn := time.Now()
			// The sign-in read the user's security version.
			version := f.db.User.GetX(ctx, f.user.ID).SecurityVersion
			time.Sleep(2 * time.Millisecond) // the reset's instant is strictly later
			p, err := f.svc.Authorize(ctx, oauth.AuthorizeRequest{ClientID: f.app.AppKey, RedirectURI: redirect})
			if err != nil {
				t.Fatal(err)
			}
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				codes []string
				reset = make(chan struct{})
			)
			wg.Add(1)
			go func() { // the holder of the session, approving until the reset is done
				defer wg.Done()
				for range 200 {
					select {
					case <-reset:
						return
					default:
					}
					code, err := f.svc.IssueCode(ctx, p, f.user.ID, signedIn, version)
					if err != nil {
						if !oauth.IsCode(err, oauth.CodeInvalidGrant) {
							t.Errorf("approve: %v", err)
						}
						return
					}
					mu.Lock()
					codes = append(codes, code)
					mu.Unlock()
				}
			}()
			time.Sleep(time.Duration(round%5) * time.Millisecond) // vary where the reset lands
			if _, err := users.SetPassword(ctx, f.user.ID, "a-new-password-1"); err != nil {
				t.Fatal(err)
			}
			close(reset)
			wg.Wait()
			if _, err := f.svc.IssueCode(ctx, p, f.user.ID, signedIn, version); !oauth.IsCode(err, oauth.CodeInvalidGrant) {
				t.Fatalf("round %d: a session from before the reset still gets a code (%v)", round, err)
			}
			for i, code := range codes {
				if _, err := f.svc.ExchangeCode(ctx, c, code, redirect, ""); !oauth.IsCode(err, oauth.CodeInvalidGrant) {
					t.Fatalf("round %d: code %d of %d issued around the reset still exchanges (%v)", round, i+1, len(codes), err)
				}
			}
		}
	})
}

// resetSetup is the fixture of the password-reset races: the OAuth
// fixture, users able to revoke tokens, and a client.
func resetSetup(t *testing.T, b testenv.Backend) (*fixture, *identity.Users, oauth.Client) {
	t.Helper()
	f := setup(t, b)
	store, err := kv.Open(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ts, err := identity.NewTokenService(secret.RandomBytes(32), time.Hour, store)
	if err != nil {
		t.Fatal(err)
	}
	return f, identity.NewUsers(f.db.Client, identity.WithTokens(ts)), f.client(t)
}
