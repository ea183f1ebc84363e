package oauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	"gatehouse/ent"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
)

// PKCE method: only S256 (RFC 7636 section 4.2); "plain" protects nothing a
// confidential client needs.
const MethodS256 = "S256"

// maxStateLen bounds the state echoed back to the client.
const maxStateLen = 1024

// AuthorizeRequest holds the parameters of GET /oauth/authorize.
type AuthorizeRequest struct {
	ClientID            string
	RedirectURI         string
	ResponseType        string // "" or "code"
	Scope               string // space-delimited
	State               string
	CodeChallenge       string
	CodeChallengeMethod string
}

// Authorize validates an authorization request completely, before anyone
// is redirected anywhere. An unknown client is invalid_client and a
// missing or unregistered redirect_uri (exact match) is invalid_request;
// neither is Redirectable, so the user sees the error and no redirect
// happens. Later errors (response_type, scope, PKCE, state) are
// Redirectable: they go back to the now trusted redirect URI. On such an
// error the returned Pending carries the redirect URI and the state.
func (s *Service) Authorize(ctx context.Context, req AuthorizeRequest) (Pending, error) {
	c, err := s.Client(ctx, req.ClientID)
	if err != nil {
		return Pending{}, err
	}
	switch {
	case req.RedirectURI == "":
		return Pending{}, oauthErr(CodeInvalidRequest, "redirect_uri is required")
	case !c.HasRedirectURI(req.RedirectURI):
		return Pending{}, oauthErr(CodeInvalidRequest, "redirect_uri is not registered for this client")
	}
	p := Pending{
		ID:    secret.RandomToken("", pendingIDBytes),
		AppID: c.AppID, ClientID: c.ClientID, AppName: c.Name, RedirectURI: req.RedirectURI, Created: s.now(),
	}
	if len(req.State) > maxStateLen {
		return p, redirectable(CodeInvalidRequest, "state is longer than %d characters", maxStateLen)
	}
	p.State = req.State
	if req.ResponseType != "" && req.ResponseType != "code" {
		return p, redirectable(CodeUnsupportedResponseType, "only response_type=code is supported")
	}
	scope, err := grantScope(req.Scope, c.Scopes)
	if err != nil {
		return p, err
	}
	p.Scope = scope
	switch {
	case req.CodeChallenge == "" && req.CodeChallengeMethod != "":
		return p, redirectable(CodeInvalidRequest, "code_challenge_method without code_challenge")
	case req.CodeChallenge == "":
	case req.CodeChallengeMethod != MethodS256:
		return p, redirectable(CodeInvalidRequest, "code_challenge_method must be S256")
	case !validVerifierChars(req.CodeChallenge) || len(req.CodeChallenge) != 43:
		return p, redirectable(CodeInvalidRequest, "code_challenge must be the 43-character base64url SHA-256 of the verifier")
	default:
		p.CodeChallenge = req.CodeChallenge
	}
	return p, nil
}

func redirectable(code, format string, args ...any) *Error {
	e := oauthErr(code, format, args...)
	e.Redirectable = true
	return e
}

// grantScope checks that every requested scope is allowed for the client
// and returns them space-separated, without duplicates, in request order.
func grantScope(requested string, allowed []string) (string, error) {
	var out []string
	for _, sc := range strings.Fields(requested) {
		if !slices.Contains(allowed, sc) {
			return "", redirectable(CodeInvalidScope, "scope %q is not allowed for this client", sc)
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return strings.Join(out, " "), nil
}

// IssueCode issues an authorization code for an approved request on
// behalf of user userID, who signed in at signedIn with security version
// version (read by the login before the password check). The client must
// still be usable and the redirect URI still registered; the user must
// still be enabled with no revocation (password reset, disabling) since
// signedIn, and still have that version — checked under the user's row
// lock, so a code cannot slip past a revocation running at the same
// moment (see activeUser). The code keeps the version. Only the code's
// hash is stored.
func (s *Service) IssueCode(ctx context.Context, p Pending, userID int, signedIn time.Time, version int) (string, error) {
	c, err := s.Client(ctx, p.ClientID)
	if err != nil {
		return "", err
	}
	if c.AppID != p.AppID || !c.HasRedirectURI(p.RedirectURI) {
		return "", oauthErr(CodeInvalidRequest, "the client's registration changed; start again")
	}
	code := secret.RandomToken(codePrefix, tokenBytes)
	now := s.now()
	err = store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		if err := activeUser(ctx, tx, userID, signedIn, version); err != nil {
			return err
		}
		cr := tx.AuthCode.Create().
			SetCodeHash(secret.HashToken(code)).
			SetAppID(p.AppID).
			SetUserID(userID).
			SetScope(p.Scope).
			SetRedirectURI(p.RedirectURI).
			SetExpiresAt(now.Add(CodeTTL)).
			SetUserVersion(version).
			SetCreateTime(now)
		if p.CodeChallenge != "" {
			cr.SetCodeChallenge(p.CodeChallenge).SetCodeChallengeMethod(MethodS256)
		}
		if _, err := cr.Save(ctx); err != nil {
			return fmt.Errorf("oauth: store code: %w", err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return code, nil
}

// verifyPKCE checks a code_verifier against an S256 challenge.
func verifyPKCE(challenge, verifier string) bool {
	if len(verifier) < 43 || len(verifier) > 128 || !validVerifierChars(verifier) {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	got := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(got), []byte(challenge)) == 1
}

// validVerifierChars: RFC 7636 unreserved characters [A-Za-z0-9-._~].
func validVerifierChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	return true
}
