package signin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"gatehouse/ent"
	"gatehouse/internal/oauth"
)

// Where pending authorization requests are kept. A browser that has not
// signed in carries each of its pending requests in its own sealed cookie
// and the service keeps nothing, so strangers cannot fill the session
// store. At sign-in the cookies move into the (server-side) session, bound
// to the user; a signed-in user's new requests go there directly.
const (
	sessionUserID = "uid"
	// sessionSignedInAt is when the user signed in (unix ms): a session
	// older than the user's last revocation is signed out.
	sessionSignedInAt = "signed_in_at"
	// sessionSecurityVersion is the user's security version read by the
	// login: a session whose user has another one now is signed out.
	sessionSecurityVersion = "sv"
	sessionPending         = "oauth_pending" // JSON map of id → oauth.Pending

	pendingCookiePrefix = "gatehouse_oauth_"
	// maxPendingCookies bounds the cookies of one browser (older ones are
	// dropped); maxPendingPerSession the requests of one session.
	maxPendingCookies    = 5
	maxPendingPerSession = 20
	// maxPendingCookieLen keeps a cookie under the 4 KiB browsers store
	// (name and attributes included).
	maxPendingCookieLen = 3800
)

// keepPending stores the new pending request p: in the session of the
// signed-in user u, or, when nobody is signed in, in a sealed cookie.
func (h OAuth) keepPending(w http.ResponseWriter, r *http.Request, p oauth.Pending, u *ent.User) error {
	if u != nil {
		p.UserID = u.ID
		return h.putSessionPending(r, p)
	}
	v, err := h.Svc.SealPending(p)
	if err != nil {
		return err
	}
	if len(v) > maxPendingCookieLen {
		// The redirect URI is registered: the client hears of it.
		return &oauth.Error{Code: oauth.CodeInvalidRequest, Description: "the authorization request is too large (shorten state)", Redirectable: true}
	}
	cookies := h.pendingCookies(r)
	for len(cookies) >= maxPendingCookies {
		expireCookie(w, pendingCookiePrefix+cookies[0].ID)
		cookies = cookies[1:]
	}
	http.SetCookie(w, &http.Cookie{
		Name: pendingCookiePrefix + p.ID, Value: v, Path: "/",
		MaxAge: int(oauth.PendingTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteLaxMode,
	})
	return nil
}

func expireCookie(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

// pendingCookie returns the pending request id from its sealed cookie.
func (h OAuth) pendingCookie(r *http.Request, id string) (oauth.Pending, bool) {
	if id == "" {
		return oauth.Pending{}, false
	}
	c, err := r.Cookie(pendingCookiePrefix + id)
	if err != nil {
		return oauth.Pending{}, false
	}
	return h.Svc.OpenPending(id, c.Value)
}

// pendingCookies returns the valid pending requests in the browser's
// cookies, oldest first.
func (h OAuth) pendingCookies(r *http.Request) []oauth.Pending {
	var out []oauth.Pending
	for _, c := range r.Cookies() {
		id, ok := strings.CutPrefix(c.Name, pendingCookiePrefix)
		if !ok {
			continue
		}
		if p, ok := h.Svc.OpenPending(id, c.Value); ok {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b oauth.Pending) int { return a.Created.Compare(b.Created) })
	return out
}

// adoptPending moves the browser's pending cookies into the session of u,
// who just signed in (or was already), and returns the newest one's id.
func (h OAuth) adoptPending(w http.ResponseWriter, r *http.Request, u *ent.User) (string, error) {
	newest := ""
	for _, p := range h.pendingCookies(r) {
		p.UserID = u.ID
		if err := h.putSessionPending(r, p); err != nil {
			return "", err
		}
		expireCookie(w, pendingCookiePrefix+p.ID)
		newest = p.ID
	}
	return newest, nil
}

// sessionPending returns the session's unexpired pending request id, if
// it is u's.
func (h OAuth) sessionPending(r *http.Request, id string, u *ent.User) (oauth.Pending, bool) {
	p, ok := h.loadSessionPending(r)[id]
	if !ok || id == "" || p.UserID != u.ID || p.ExpiredAt(h.Svc.Now()) {
		return oauth.Pending{}, false
	}
	return p, true
}

// pendingOf finds the pending request a login page continues to (next is
// its approval page), for showing the application's name.
func (h OAuth) pendingOf(r *http.Request, next string, u *ent.User) (oauth.Pending, bool) {
	nu, err := url.Parse(next)
	if next == "" || err != nil || nu.Path != approvePath {
		return oauth.Pending{}, false
	}
	id := nu.Query().Get(paramRequestID)
	if p, ok := h.pendingCookie(r, id); ok {
		return p, true
	}
	if u != nil {
		return h.sessionPending(r, id, u)
	}
	return oauth.Pending{}, false
}

func (h OAuth) loadSessionPending(r *http.Request) map[string]oauth.Pending {
	m := map[string]oauth.Pending{}
	if b := h.Sessions.GetBytes(r.Context(), sessionPending); b != nil {
		_ = json.Unmarshal(b, &m) // unreadable: as if none
	}
	return m
}

func (h OAuth) saveSessionPending(r *http.Request, m map[string]oauth.Pending) error {
	if len(m) == 0 {
		h.Sessions.Remove(r.Context(), sessionPending)
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode pending requests: %w", err)
	}
	h.Sessions.Put(r.Context(), sessionPending, b)
	return nil
}

// putSessionPending adds p to the session, dropping expired requests and,
// past maxPendingPerSession, the oldest.
func (h OAuth) putSessionPending(r *http.Request, p oauth.Pending) error {
	m := h.loadSessionPending(r)
	now := h.Svc.Now()
	for id, q := range m {
		if q.ExpiredAt(now) {
			delete(m, id)
		}
	}
	for len(m) >= maxPendingPerSession {
		oldest := ""
		for id, q := range m {
			if oldest == "" || q.Created.Before(m[oldest].Created) {
				oldest = id
			}
		}
		delete(m, oldest)
	}
	m[p.ID] = p
	return h.saveSessionPending(r, m)
}

// dropPending removes a decided request from the session.
func (h OAuth) dropPending(r *http.Request, id string) error {
	m := h.loadSessionPending(r)
	delete(m, id)
	return h.saveSessionPending(r, m)
}
