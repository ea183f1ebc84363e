package oauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"slices"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/partnerapp"
)

// Client is a partner app seen as an OAuth client.
type Client struct {
	AppID        int
	ClientID     string // the app_key
	Name         string
	RedirectURIs []string
	Scopes       []string
}

// maxClientIDLen is the app_key limit; longer ids cannot exist.
const maxClientIDLen = 64

// usable reports whether the app may take part in OAuth at now: enabled,
// and not past its expire date (valid through the end of that UTC day).
func usable(row *ent.PartnerApp, now time.Time) bool {
	if row.Status != 1 {
		return false
	}
	return row.ExpireDate == nil || now.Before(row.ExpireDate.UTC().AddDate(0, 0, 1))
}

func clientOf(row *ent.PartnerApp) Client {
	return Client{AppID: row.ID, ClientID: row.AppKey, Name: row.AppName, RedirectURIs: row.RedirectUris, Scopes: row.Scopes}
}

// load returns the app with that client_id, or nil when there is none (or
// the id cannot be an app key).
func (s *Service) load(ctx context.Context, clientID string) (*ent.PartnerApp, error) {
	if !plausibleClientID(clientID) {
		return nil, nil
	}
	row, err := s.client.PartnerApp.Query().Where(partnerapp.AppKey(clientID)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("oauth: load client: %w", err)
	}
	return row, nil
}

// Client returns the usable client with that id, or an invalid_client
// *Error. It does not authenticate the client (the authorization endpoint
// is reached by the user's browser, which has no secret).
func (s *Service) Client(ctx context.Context, clientID string) (Client, error) {
	row, err := s.load(ctx, clientID)
	if err != nil {
		return Client{}, err
	}
	if row == nil || !usable(row, s.now()) {
		return Client{}, oauthErr(CodeInvalidClient, "unknown client")
	}
	return clientOf(row), nil
}

// AuthenticateClient checks a client's credentials: the app must exist and
// be usable, and clientSecret must equal its app secret, or its previous
// secret while a rotation overlap lasts. Any failure is the same
// invalid_client *Error. Secrets are compared as SHA-256 digests in
// constant time, so neither their content nor their length leaks, and an
// unknown client costs the same comparison.
func (s *Service) AuthenticateClient(ctx context.Context, clientID, clientSecret string) (Client, error) {
	fail := oauthErr(CodeInvalidClient, "client authentication failed")
	row, err := s.load(ctx, clientID)
	if err != nil {
		return Client{}, err
	}
	given := sha256.Sum256([]byte(clientSecret))
	if row == nil {
		dummy := sha256.Sum256([]byte("gatehouse: no such client"))
		subtle.ConstantTimeCompare(given[:], dummy[:])
		return Client{}, fail
	}
	now := s.now()
	ok, err := s.secretMatches(row.Secret, given)
	if err != nil {
		return Client{}, fmt.Errorf("oauth: app %d: %w", row.ID, err)
	}
	if !ok && row.PreviousSecret != nil && row.PreviousSecretExpiresAt != nil && now.Before(*row.PreviousSecretExpiresAt) {
		if ok, err = s.secretMatches(*row.PreviousSecret, given); err != nil {
			return Client{}, fmt.Errorf("oauth: app %d previous secret: %w", row.ID, err)
		}
	}
	if !ok || !usable(row, now) {
		return Client{}, fail
	}
	return clientOf(row), nil
}

func (s *Service) secretMatches(sealed []byte, given [sha256.Size]byte) (bool, error) {
	plain, err := s.sealer.Open(sealed)
	if err != nil {
		return false, err
	}
	want := sha256.Sum256(plain)
	clear(plain)
	return subtle.ConstantTimeCompare(given[:], want[:]) == 1, nil
}

// HasRedirectURI reports whether uri is registered, by exact string
// comparison (RFC 6749 section 3.1.2.3, OAuth 2.1).
func (c Client) HasRedirectURI(uri string) bool { return slices.Contains(c.RedirectURIs, uri) }

func plausibleClientID(id string) bool {
	if id == "" || len(id) > maxClientIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
