package apikey

import (
	"regexp"
	"strings"

	"gatehouse/internal/errs"
)

// Limits of a key's scopes.
const (
	// MaxScopes bounds the scopes of one key.
	MaxScopes = 32
	// maxScopeLen is an event type name's limit (64) plus ".*".
	maxScopeLen = 66
)

// scopeForm is an event type name ("order.paid": two or more
// dot-separated parts, as webhook event types are named) or a prefix of
// names ending in ".*" ("order.*", "billing.invoice.*").
var scopeForm = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*\.\*$|^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)

// NormalizeScopes checks the scopes of a new key: at most MaxScopes, each
// an event type name or a "prefix.*" pattern; duplicates are dropped. An
// empty list means every type. Only PUBLISHER keys carry scopes: an ADMIN
// key may publish anything anyway and a READ_ONLY key nothing.
func NormalizeScopes(role Role, scopes []string) ([]string, error) {
	if len(scopes) == 0 {
		return nil, nil
	}
	if role != RolePublisher {
		return nil, errs.Invalid("scopes", "only a PUBLISHER key has scopes")
	}
	if len(scopes) > MaxScopes {
		return nil, errs.Invalid("scopes", "at most %d", MaxScopes)
	}
	out := make([]string, 0, len(scopes))
	seen := make(map[string]bool, len(scopes))
	for _, s := range scopes {
		if len(s) > maxScopeLen || !scopeForm.MatchString(s) {
			return nil, errs.Invalid("scopes", "%q is neither an event type name (order.paid) nor a prefix pattern (order.*)", s)
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out, nil
}

// InScopes reports whether eventType matches scopes: empty scopes match
// every type; "order.paid" matches that type only; "order.*" matches every
// type whose name starts with "order." (order.paid, order.refund.failed),
// not "order" itself nor "orders.x".
func InScopes(scopes []string, eventType string) bool {
	if len(scopes) == 0 {
		return true
	}
	for _, s := range scopes {
		if prefix, ok := strings.CutSuffix(s, "*"); ok {
			if strings.HasPrefix(eventType, prefix) && len(eventType) > len(prefix) {
				return true
			}
		} else if s == eventType {
			return true
		}
	}
	return false
}
