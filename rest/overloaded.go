package rest

import (
	"encoding/json"
	"net/http"
	"strings"

	"gatehouse/internal/httpx"
	"gatehouse/rest/partnerapi"
)

// overloadedDetail is the detail of every refusal by load shedding.
const overloadedDetail = "the server is overloaded: nothing was done, retry later"

// OverloadedDetail is the message of a refusal by load shedding, and
// OverloadedCode the partner envelope's code of one (a refused
// connection's answer carries both: shed.ConnCap).
const (
	OverloadedDetail = overloadedDetail
	OverloadedCode   = partnerapi.CodeSystemError
)

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
	h := w.Header()
	h["Content-Type"] = headerJSON // shared, never modified: Set would allocate
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(overloadedBody)
}

// headerJSON is the refusal's Content-Type value, shared by every reply.
var headerJSON = []string{"application/json; charset=utf-8"}

// overloadedBody is the whole {"error": "overloaded"} reply, built once:
// during an overload most requests get it, and a refusal must cost next
// to nothing beside the request it spares.
var overloadedBody = func() []byte {
	b, err := json.Marshal(httpx.ErrorBody{Error: "overloaded", Message: overloadedDetail})
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}()

// isPartnerPath reports whether path is under a partner API version's
// prefix (/api/v1/…), served in the envelope.
func isPartnerPath(path string) bool {
	rest, ok := strings.CutPrefix(path, partnerapi.PartnerMountPattern+"/v")
	return ok && rest != "" && rest[0] >= '0' && rest[0] <= '9'
}
