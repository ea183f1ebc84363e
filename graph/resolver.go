// Package graph holds the admin GraphQL resolvers. Each resolver is a few
// lines over an internal/ service or the Ent client; gqlgen generates the
// executor (generated.go) from web-schema/*.graphql.
package graph

import (
	"gatehouse/ent"
	"gatehouse/internal/apikey"
	"gatehouse/internal/audit"
	"gatehouse/internal/identity"
	"gatehouse/internal/inventory"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/payment"
	"gatehouse/internal/portal"
	"gatehouse/internal/telemetry"
	"gatehouse/internal/webhook"
)

// Resolver is the root resolver; its fields are the services the admin
// schema reaches.
type Resolver struct {
	Client   *ent.Client
	Partners *partner.Service
	Orders   *order.Service
	APIKeys  *apikey.Service
	Users    *identity.Users
	// Inventory creates SKUs and sets their stock.
	Inventory *inventory.Service
	// Webhooks re-queues deliveries.
	Webhooks *webhook.Service
	// Versions are the partner API's versions and their lifecycle; Usage
	// counts their calls.
	Versions partner.Versions
	Usage    *partner.Usage
	// Payments refunds orders through the payment provider.
	Payments *payment.Service
	// Audit records every mutation (see mutationGate).
	Audit *audit.Service
	// PortalLinks mints partner portal links; PublicURL (no trailing
	// slash, "" when not configured) is the base of their URLs.
	PortalLinks *portal.Links
	PublicURL   string
	// Tracing makes a span per root field (nil: off).
	Tracing *telemetry.Tracing
}
