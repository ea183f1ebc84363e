package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// api calls the admin GraphQL handler in-process, as any client would over
// HTTP: the request goes through the API key guard, the pricing, the role
// rule and the audit log. The console holds no rule of its own.
type api struct {
	h http.Handler
}

// apiError is a GraphQL error (or the guard's refusal) as the console shows it.
type apiError struct {
	Status  int
	Code    string
	Message string
	Field   string
}

func (e *apiError) Error() string { return e.Message }

// errSignedOut: the session's key no longer authenticates (disabled, or
// the session is gone): the console signs the browser out.
var errSignedOut = errors.New("the API key is unknown or disabled")

// bufferedResponse is the http.ResponseWriter the in-process call writes to.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) WriteHeader(s int) {
	if b.status == 0 {
		b.status = s
	}
}
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// do runs query with vars as key and decodes data into out. The inner
// request keeps the browser request's context (request id, client
// address, deadline) so that the audit log and traces name the same
// request.
func (a api) do(r *http.Request, key, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "/graphql", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.RemoteAddr = r.RemoteAddr
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	if ua := r.Header.Get("User-Agent"); ua != "" {
		req.Header.Set("User-Agent", ua)
	}
	res := &bufferedResponse{header: http.Header{}}
	a.h.ServeHTTP(res, req)
	if res.status == http.StatusUnauthorized {
		return errSignedOut
	}
	var reply struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message    string         `json:"message"`
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.Unmarshal(res.body.Bytes(), &reply); err != nil {
		return fmt.Errorf("graphql reply (HTTP %d): %w", res.status, err)
	}
	if len(reply.Errors) > 0 {
		e := reply.Errors[0]
		ae := &apiError{Status: res.status, Message: e.Message}
		ae.Code, _ = e.Extensions["code"].(string)
		ae.Field, _ = e.Extensions["field"].(string)
		return ae
	}
	if reply.Error != "" {
		return &apiError{Status: res.status, Code: reply.Error, Message: reply.Description}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(reply.Data, out)
}
