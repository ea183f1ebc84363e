package apikey

import (
	"context"
	"strings"

	"gatehouse/ent"
	entapikey "gatehouse/ent/apikey"
	"gatehouse/internal/errs"
)

// Role is what a key may do: RoleAdmin queries and changes, RoleReadOnly
// only queries.
type Role = entapikey.Role

// The roles of a key.
const (
	RoleAdmin    = entapikey.RoleADMIN
	RoleReadOnly = entapikey.RoleREAD_ONLY
)

// ErrReadOnly is the refusal of a change asked with a READ_ONLY key.
var ErrReadOnly = errs.New(errs.Forbidden, "this API key is READ_ONLY: it may query, but changes need an ADMIN key")

// ParseRole reads a role as the CLI takes it: ADMIN or READ_ONLY, in any
// case, with '-' for '_' (read-only).
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", "_")))
	if entapikey.RoleValidator(r) != nil {
		return "", errs.Invalid("role", "must be ADMIN or READ_ONLY, not %q", s)
	}
	return r, nil
}

type ctxKey struct{}

// NewContext returns ctx carrying the authenticated key (the admin guard
// sets it; authorization and the audit log read it).
func NewContext(ctx context.Context, key *ent.APIKey) context.Context {
	return context.WithValue(ctx, ctxKey{}, key)
}

// FromContext returns the authenticated key of the request, or nil.
func FromContext(ctx context.Context) *ent.APIKey {
	k, _ := ctx.Value(ctxKey{}).(*ent.APIKey)
	return k
}

// MayChange reports whether key may run mutations: only an ADMIN key can.
func MayChange(key *ent.APIKey) bool { return key != nil && key.Role == RoleAdmin }
