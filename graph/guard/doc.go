// Package guard is everything around the admin GraphQL resolvers on the
// admin listener, from the HTTP request to the answer: the API-key guard
// (APIKeyGuard), the transport (GET and JSON POST only, bodies read and
// bounded, duplicate keys and trailing bytes refused), the document's
// bounds before validation (document.go, nul.go), the price of an
// operation (limits.go), the mutation gate (role rule and audit log,
// mutations_gate.go) and the audit of refused documents (refusals.go),
// the one translation of domain errors to extensions.code (errors.go),
// 503 for UNAVAILABLE and the OVERLOADED refusal, webhook warnings and
// a span per root field. NewHandler assembles them around a gqlgen
// schema; package graph hands it the resolvers.
package guard
