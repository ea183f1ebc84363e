// Package partnerapi is the signed partner API on the public listener
// (/api/v1, /api/v2, /api/v3): one table of versions and endpoints
// (partner_api.go), a presenter per version (present_v*.go), the order
// query, the idempotent stock deduction, the partner's own webhook
// endpoints, deliveries and usage (v3), and the envelope every reply is
// written in, with the one code → HTTP table (envelope.go). The rules
// live in internal/partner, internal/order, internal/inventory and
// internal/webhook; handlers decode, call one service method, encode.
package partnerapi
