package rest

import (
	"net/http"
	"strings"

	"gatehouse/internal/httpx"
	"gatehouse/rest/partnerapi"
)

// overloadedDetail is the detail of every refusal by load shedding.
const overloadedDetail = "the server is overloaded: nothing was done, retry later"

// WriteOverloaded answers a request of the public listener refused by
// load shedding (internal/shed), in its route's error shape: 503/6000 in
// the partner envelope under /api/v{n}/, {"error": "overloaded"}
// elsewhere; always with Retry-After (retryAfter seconds).
func WriteOverloaded(w http.ResponseWriter, r *http.Request, retryAfter string) {
	w.Header().Set("Retry-After", retryAfter)
	if isPartnerPath(r.URL.Path) {
		partnerapi.WriteEnvelopeErrorStatus(w, r, http.StatusServiceUnavailable, partnerapi.CodeSystemError, partnerapi.Message(partnerapi.CodeSystemError, overloadedDetail))
		return
	}
	httpx.WriteError(w, http.StatusServiceUnavailable, "overloaded", overloadedDetail)
}

// isPartnerPath reports whether path is under a partner API version's
// prefix (/api/v1/…), served in the envelope.
func isPartnerPath(path string) bool {
	rest, ok := strings.CutPrefix(path, partnerapi.PartnerMountPattern+"/v")
	return ok && rest != "" && rest[0] >= '0' && rest[0] <= '9'
}
