package apikey

import (
	"context"
	"strings"

	"gatehouse/ent"
	entapikey "gatehouse/ent/apikey"
	"gatehouse/internal/errs"
)

// Role is what a key may do: RoleAdmin queries and changes, RoleReadOnly
// only queries, RolePublisher only publishes events.
type Role = entapikey.Role

// The roles of a key.
const (
	RoleAdmin    = entapikey.RoleADMIN
	RoleReadOnly = entapikey.RoleREAD_ONLY
	// RolePublisher may publish webhook events (POST /api/events,
	// publishWebhookEvent) of the types its scopes allow, and nothing else.
	RolePublisher = entapikey.RolePUBLISHER
)

// ErrReadOnly is the refusal of a change asked with a READ_ONLY key.
var ErrReadOnly = errs.New(errs.Forbidden, "this API key is READ_ONLY: it may query, but changes need an ADMIN key")

// ErrPublisherOnly is the refusal of anything but a publish asked with a
// PUBLISHER key.
var ErrPublisherOnly = errs.New(errs.Forbidden, "this API key is a PUBLISHER key: it may only publish events (POST /api/events, publishWebhookEvent)")

// ParseRole reads a role as the CLI takes it: ADMIN, READ_ONLY or
// PUBLISHER, in any case, with '-' for '_' (read-only).
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", "_")))
	if entapikey.RoleValidator(r) != nil {
		return "", errs.Invalid("role", "must be ADMIN, READ_ONLY or PUBLISHER, not %q", s)
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

// PublishField is the one GraphQL field a PUBLISHER key may use.
const PublishField = "publishWebhookEvent"

// MayUseField says whether key may use the GraphQL root field named field
// (of a mutation when mutation is set): nil, or the FORBIDDEN error to
// answer. A PUBLISHER key may use publishWebhookEvent only (its event
// type is checked by MayPublish); a READ_ONLY key may query; an ADMIN key
// may do anything.
func MayUseField(key *ent.APIKey, mutation bool, field string) error {
	switch {
	case key != nil && key.Role == RolePublisher:
		if mutation && field == PublishField {
			return nil
		}
		return ErrPublisherOnly
	case mutation && !MayChange(key):
		return ErrReadOnly
	}
	return nil
}

// MayPublish says whether key may publish an event of type eventType: an
// ADMIN key may publish any type, a PUBLISHER key the types its scopes
// allow, a READ_ONLY key none. The refusal is a FORBIDDEN error naming
// the key's scopes.
func MayPublish(key *ent.APIKey, eventType string) error {
	if key == nil {
		return errs.New(errs.Forbidden, "publishing needs an API key")
	}
	switch key.Role {
	case RoleAdmin:
		return nil
	case RolePublisher:
		if InScopes(key.Scopes, eventType) {
			return nil
		}
		return errs.New(errs.Forbidden, "this API key may publish only event types matching "+strings.Join(key.Scopes, ", ")+", not "+eventType)
	}
	return errs.New(errs.Forbidden, "this API key is "+string(key.Role)+": publishing needs a PUBLISHER or ADMIN key")
}
