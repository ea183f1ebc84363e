package oauth

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"gatehouse/ent/partnerapp"
)

// Paths of the endpoints the metadata names, relative to the issuer.
const (
	PathAuthorize  = "/oauth/authorize"
	PathToken      = "/oauth/token"
	PathRevoke     = "/oauth/revoke"
	PathIntrospect = "/oauth/introspect"
	// PathMetadata is where the metadata is served (RFC 8414 section 3).
	PathMetadata = "/.well-known/oauth-authorization-server"
)

// ClientAuthMethods are the ways a client authenticates at the token,
// revocation and introspection endpoints: HTTP Basic, or client_id and
// client_secret in the body (RFC 6749 section 2.3.1).
var ClientAuthMethods = []string{"client_secret_basic", "client_secret_post"}

// Metadata is the authorization server metadata (RFC 8414): what a
// standard client configures itself from. Every value is what this server
// does.
type Metadata struct {
	Issuer                                    string   `json:"issuer"`
	AuthorizationEndpoint                     string   `json:"authorization_endpoint"`
	TokenEndpoint                             string   `json:"token_endpoint"`
	RevocationEndpoint                        string   `json:"revocation_endpoint"`
	IntrospectionEndpoint                     string   `json:"introspection_endpoint"`
	ResponseTypesSupported                    []string `json:"response_types_supported"`
	ResponseModesSupported                    []string `json:"response_modes_supported"`
	GrantTypesSupported                       []string `json:"grant_types_supported"`
	CodeChallengeMethodsSupported             []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMethodsSupported         []string `json:"token_endpoint_auth_methods_supported"`
	RevocationEndpointAuthMethodsSupported    []string `json:"revocation_endpoint_auth_methods_supported"`
	IntrospectionEndpointAuthMethodsSupported []string `json:"introspection_endpoint_auth_methods_supported"`
	ScopesSupported                           []string `json:"scopes_supported"`
}

// scopesTTL is how long the union of the clients' scopes is reused.
const scopesTTL = 30 * time.Second

// scopeCache holds the union of the scopes of usable clients.
type scopeCache struct {
	mu     sync.Mutex
	scopes []string
	until  time.Time
}

// Metadata returns the metadata of the server whose issuer identifier is
// issuer (its base URL, e.g. https://gatehouse.example.com, no trailing
// slash). Scopes are granted per client (each app's scopes), so
// scopes_supported is the union of the scopes of the enabled apps, read at
// most every 30 s.
func (s *Service) Metadata(ctx context.Context, issuer string) (Metadata, error) {
	issuer = strings.TrimRight(issuer, "/")
	scopes, err := s.supportedScopes(ctx)
	if err != nil {
		return Metadata{}, err
	}
	return Metadata{
		Issuer:                                    issuer,
		AuthorizationEndpoint:                     issuer + PathAuthorize,
		TokenEndpoint:                             issuer + PathToken,
		RevocationEndpoint:                        issuer + PathRevoke,
		IntrospectionEndpoint:                     issuer + PathIntrospect,
		ResponseTypesSupported:                    []string{"code"},
		ResponseModesSupported:                    []string{"query"},
		GrantTypesSupported:                       []string{GrantAuthorizationCode, GrantRefreshToken},
		CodeChallengeMethodsSupported:             []string{MethodS256},
		TokenEndpointAuthMethodsSupported:         ClientAuthMethods,
		RevocationEndpointAuthMethodsSupported:    ClientAuthMethods,
		IntrospectionEndpointAuthMethodsSupported: ClientAuthMethods,
		ScopesSupported:                           scopes,
	}, nil
}

func (s *Service) supportedScopes(ctx context.Context) ([]string, error) {
	c := &s.scopes
	c.mu.Lock()
	defer c.mu.Unlock()
	now := s.now()
	if c.scopes != nil && now.Before(c.until) {
		return c.scopes, nil
	}
	rows, err := s.client.PartnerApp.Query().Where(partnerapp.Status(1)).Select(partnerapp.FieldScopes, partnerapp.FieldExpireDate, partnerapp.FieldStatus).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("oauth: read the clients' scopes: %w", err)
	}
	seen := map[string]bool{}
	out := []string{}
	for _, row := range rows {
		if !usable(row, now) {
			continue
		}
		for _, sc := range row.Scopes {
			if !seen[sc] {
				seen[sc] = true
				out = append(out, sc)
			}
		}
	}
	slices.Sort(out)
	c.scopes, c.until = out, now.Add(scopesTTL)
	return out, nil
}
