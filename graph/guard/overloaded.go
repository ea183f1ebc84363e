package guard

import (
	"net/http"
)

// CodeOverloaded is extensions.code of a request refused by load
// shedding (internal/shed): nothing ran, the same request may be retried
// after Retry-After.
const CodeOverloaded = "OVERLOADED"

// overloadedBody is the whole reply of a refused request: built once, a
// refusal must cost next to nothing.
var overloadedBody = []byte(`{"errors":[{"message":"the server is overloaded: nothing was done, retry later","extensions":{"code":"` + CodeOverloaded + `"}}],"data":null}` + "\n")

// WriteOverloaded answers a GraphQL request refused by load shedding:
// HTTP 503 with Retry-After (retryAfter seconds), and an error whose
// extensions.code is OVERLOADED.
func WriteOverloaded(w http.ResponseWriter, retryAfter string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Retry-After", retryAfter)
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(overloadedBody)
}
