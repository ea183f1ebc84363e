package rest

import (
	"net/http"

	"gatehouse/internal/order"
)

// PartnerAPI is the signed partner API: every version, oldest first, and
// per version each endpoint. It is the one place where a version or an
// endpoint is added; a new reply shape adds one presenter beside it
// (present_v{n}.go). docs/versioning.md walks through adding a version.
var PartnerAPI = []PartnerVersion{
	{Name: "v1", Endpoints: []PartnerEndpoint{
		{http.MethodGet, "/orders/query", orderQuery(presentOrderV1, order.Summary)},
		{http.MethodPost, "/inventory/deduct", stockDeduction},
	}},
	// v2 only adds fields to the order; the deduction is v1's (same rules,
	// same idempotency records: a biz_no used on v1 replays on v2).
	{Name: "v2", Endpoints: []PartnerEndpoint{
		{http.MethodGet, "/orders/query", orderQuery(presentOrderV2, order.AllFields)},
		{http.MethodPost, "/inventory/deduct", stockDeduction},
	}},
}

// PartnerVersion is one version of the partner API, served under
// /api/{Name}/.
type PartnerVersion struct {
	Name      string
	Endpoints []PartnerEndpoint
}

// PartnerEndpoint is one signed endpoint of a version; Path is relative to
// /api/{version}.
type PartnerEndpoint struct {
	Method, Path string
	// Handler builds the endpoint's handler from the partner API's
	// services; it runs once the signed-request gate admitted the call.
	Handler func(Partner) http.Handler
}

// PartnerVersionNames lists the versions of PartnerAPI, oldest first.
func PartnerVersionNames() []string {
	names := make([]string, len(PartnerAPI))
	for i, v := range PartnerAPI {
		names[i] = v.Name
	}
	return names
}
