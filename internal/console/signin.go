package console

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
)

// signInData is the sign-in page's.
type signInData struct{ Error string }

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	if c.sessions.Exists(r.Context(), keySealed) {
		http.Redirect(w, r, Base+"deliveries", http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "signin", "Sign in", signInData{})
}

// signIn checks the key by asking the API who it is (viewer): an unknown
// or disabled key is refused there, by the same guard as every call. The
// session then gets a new token (no fixation), the sealed key, and a new
// CSRF token.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimSpace(r.PostFormValue("api_key"))
	if key == "" {
		c.render(w, r, http.StatusUnprocessableEntity, "signin", "Sign in", signInData{Error: "Enter an API key."})
		return
	}
	var out struct {
		Viewer struct{ Name, Role string }
	}
	err := c.api.do(r, key, `query ConsoleSignIn { viewer { name role } }`, nil, &out)
	if errors.Is(err, errSignedOut) {
		c.render(w, r, http.StatusUnauthorized, "signin", "Sign in", signInData{Error: "The API key is unknown or disabled."})
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	sealed, err := c.sealer.Seal([]byte(key))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	if err := c.sessions.RenewToken(ctx); err != nil {
		c.fail(w, r, err)
		return
	}
	c.sessions.Put(ctx, keySealed, base64.RawStdEncoding.EncodeToString(sealed))
	c.sessions.Put(ctx, keyName, out.Viewer.Name)
	c.sessions.Put(ctx, keyRole, out.Viewer.Role)
	c.sessions.NewCSRF(ctx)
	c.sessions.DropFormCSRF(w, r)
	http.Redirect(w, r, Base+"deliveries", http.StatusSeeOther)
}

// signOut ends the session: its record is deleted from the store, so the
// cookie (if kept) no longer opens anything.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if err := c.sessions.Destroy(r.Context()); err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, Base+"sign-in", http.StatusSeeOther)
}
