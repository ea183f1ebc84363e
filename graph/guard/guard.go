package guard

import (
	"errors"
	"log/slog"
	"net/http"

	"gatehouse/internal/apikey"
	"gatehouse/internal/errs"
	"gatehouse/internal/httpx"
)

// HeaderAPIKey carries the admin API key.
const HeaderAPIKey = "X-API-Key"

// APIKeyGuard lets a request through only with an enabled key in
// X-API-Key; each accepted request is counted once by keys, and carries
// the key in its context (apikey.FromContext). Refusals are
// 401 {"error": "missing_api_key" | "invalid_api_key"}.
func APIKeyGuard(keys *apikey.Service, log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			values := r.Header.Values(HeaderAPIKey)
			var key string
			switch len(values) {
			case 0:
			case 1:
				key = values[0]
			default:
				// Two keys: which one is meant is anyone's guess.
				authError(w, "invalid_api_key", "send exactly one X-API-Key header")
				return
			}
			row, err := keys.Authenticate(r.Context(), key)
			switch {
			case err == nil:
				if sp := httpx.SpanOf(r.Context()); sp != nil {
					sp.SetAttributes(httpx.AttrAPIKeyName.String(row.Name))
				}
				// The key rides along: the role rule and the audit log read it.
				next.ServeHTTP(w, r.WithContext(apikey.NewContext(r.Context(), row)))
			case errors.Is(err, apikey.ErrMissing):
				authError(w, "missing_api_key", "send an admin API key in the X-API-Key header")
			case errors.Is(err, apikey.ErrInvalid):
				authError(w, "invalid_api_key", "the API key is unknown or disabled")
			case httpx.ClientGone(r):
				httpx.Abandon(w, r, log, "graphql: check API key", err)
			default:
				if errs.KindOf(err) == errs.Unavailable {
					httpx.DependencyRefused(r.Context(), log, "graphql: check API key", err)
				} else {
					log.ErrorContext(r.Context(), "check API key", "err", err, "request_id", httpx.GetRequestID(r.Context()))
				}
				// Both shapes: the listener's {"error"} and a GraphQL error
				// with its code, for clients that only read "errors".
				w.Header().Set("Retry-After", "1")
				httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{
					"error":             "unavailable",
					"error_description": "the API key could not be checked; retry later",
					"errors":            []map[string]any{{"message": "a dependency is unavailable, retry later", "extensions": map[string]string{"code": CodeUnavailable}}},
				})
			}
		})
	}
}

func authError(w http.ResponseWriter, code, desc string) {
	httpx.WriteJSON(w, http.StatusUnauthorized, map[string]string{"error": code, "error_description": desc})
}
