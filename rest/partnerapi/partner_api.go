package partnerapi

import (
	"fmt"
	"net/http"
	"time"

	"gatehouse/internal/order"
	"gatehouse/internal/partner"
)

// PartnerAPI is the signed partner API: every version, oldest first, and
// per version each endpoint. It is the one place where a version or an
// endpoint is added; a new reply shape adds one presenter beside it
// (present_v{n}.go). docs/versioning.md walks through adding a version.
var PartnerAPI = []PartnerVersion{
	// v1 and v2 shipped together, in the partner API's first release
	// (2026-11-22); apiVersions shows that day as their release.
	{Name: "v1", Released: "2026-11-22", Endpoints: []PartnerEndpoint{
		{http.MethodGet, "/orders/query", orderQuery(presentOrderV1, order.Summary)},
		{http.MethodPost, "/inventory/deduct", stockDeduction},
	}},
	// v2 only adds fields to the order; the deduction is v1's (same rules,
	// same idempotency records: a biz_no used on v1 replays on v2).
	{Name: "v2", Released: "2026-11-22", Endpoints: []PartnerEndpoint{
		{http.MethodGet, "/orders/query", orderQuery(presentOrderV2, order.AllFields)},
		{http.MethodPost, "/inventory/deduct", stockDeduction},
	}},
	// v3 removes customer_info from the order (personal data leaves the
	// order query); it stays for 6 months from the release, announced by
	// Deprecated-Fields. The deduction is v1's.
	// v3 also lets a partner manage its own webhooks and read its usage
	// (partner_webhooks.go).
	{Name: "v3", Released: "2026-11-27", Removes: []string{fieldCustomerInfo}, Endpoints: append([]PartnerEndpoint{
		{http.MethodGet, "/orders/query", orderQueryCarrying(presentOrderV3, order.AllFields)},
		{http.MethodPost, "/inventory/deduct", stockDeduction},
	}, webhookEndpoints...)},
}

// PartnerVersion is one version of the partner API, served under
// /api/{Name}/.
type PartnerVersion struct {
	Name string
	// Released is the day the version ships (YYYY-MM-DD); required when it
	// removes fields, replaced by GATEHOUSE_API_RELEASED when set there.
	Released string
	// Removes names the fields of the previous version this one removes:
	// its replies still carry them for 6 months from Released (the
	// presenter asks Carries), with the Deprecated-Fields header.
	Removes   []string
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

// PartnerServed is PartnerAPI as the version lifecycle reads it: names,
// release days and removed fields, oldest first.
func PartnerServed() []partner.Served {
	out := make([]partner.Served, len(PartnerAPI))
	for i, v := range PartnerAPI {
		out[i] = partner.Served{Name: v.Name, Removes: v.Removes}
		if v.Released != "" {
			d, err := time.Parse(time.DateOnly, v.Released)
			if err != nil {
				panic(fmt.Sprintf("rest.PartnerAPI: %s: Released %q is not YYYY-MM-DD", v.Name, v.Released))
			}
			out[i].Released = d
		}
	}
	return out
}
