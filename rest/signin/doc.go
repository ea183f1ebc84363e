// Package signin is the public listener's sign-in front door: user login
// and tokens (Auth: /api/auth/…, /auth/logout) and the OAuth 2.0
// authorization server's routes and browser pages (OAuth: /oauth/…,
// /login, /.well-known/oauth-authorization-server), with their HTML
// templates. The rules live in internal/identity and internal/oauth.
package signin

import (
	"net/http"

	"gatehouse/internal/httpx"
)

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	httpx.WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method "+r.Method+" is not allowed here")
}
