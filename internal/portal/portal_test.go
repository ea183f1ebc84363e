package portal_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
)

// TestPortalLinkAndSession: a link opens a session for its app alone
// (cookie HttpOnly, SameSite=Lax, /portal/ only), works once (a replay is
// refused and logged as a warning), expires, and its session ends.
func TestPortalLinkAndSession(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := start(t, b, func(c *config.Config) { c.Portal.SessionTTL = 2 * time.Second })
		link := f.link(t, f.appA, false, 0)
		c := newClient(t, f.env.PublicURL)
		// Opening the link (a GET, as a mail scanner or a link preview
		// sends) spends nothing: it names the app and offers a button. It
		// stores no session either (scs sets its cookie whenever it stores
		// one): the button's token is in a form cookie of its own.
		scanner := newClient(t, f.env.PublicURL)
		for range 2 {
			if g := scanner.get(link); g.status != http.StatusOK || !strings.Contains(g.body, "Open the portal") || !strings.Contains(g.body, "shop-a") {
				t.Fatalf("link page: %d %s", g.status, g.body)
			}
			if fresh := newClient(t, f.env.PublicURL).get(link); strings.Contains(strings.Join(fresh.header.Values("Set-Cookie"), "\n"), "gatehouse_portal=") ||
				!strings.Contains(fresh.header.Get("Set-Cookie"), "gatehouse_portal_form=") {
				t.Fatalf("link page's cookies: %q", fresh.header.Values("Set-Cookie"))
			}
		}
		if r := scanner.get("/portal/endpoints"); r.status != http.StatusUnauthorized {
			t.Fatalf("a GET of the link opened a session: %d", r.status)
		}
		// The button's POST needs its page's CSRF token and the same origin.
		lu, _ := url.Parse(link)
		form := url.Values{"token": {lu.Query().Get("token")}}
		if r := scanner.do("POST", "/portal/enter", form, "Origin", scanner.base); r.status != http.StatusForbidden {
			t.Fatalf("POST without the CSRF token: %d", r.status)
		}
		form.Set("csrf", scanner.get(link).csrf(t))
		if r := scanner.do("POST", "/portal/enter", form, "Origin", "https://evil.example"); r.status != http.StatusForbidden {
			t.Fatalf("cross-origin POST: %d", r.status)
		}
		r := c.open(link)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/portal/endpoints" {
			t.Fatalf("enter: %d %s", r.status, r.header.Get("Location"))
		}
		var set string // the session's cookie (beside the form cookie's deletion)
		for _, v := range r.header.Values("Set-Cookie") {
			if strings.HasPrefix(v, "gatehouse_portal=") {
				set = v
			}
		}
		for _, want := range []string{"gatehouse_portal=", "HttpOnly", "SameSite=Lax", "Path=/portal/"} {
			if !strings.Contains(set, want) {
				t.Fatalf("Set-Cookie %q lacks %s", set, want)
			}
		}
		p := c.get("/portal/endpoints")
		if p.status != http.StatusOK || !strings.Contains(p.body, f.receiverURL) || !strings.Contains(p.body, "shop-a") {
			t.Fatalf("endpoints: %d %s", p.status, p.body)
		}

		// A second use of the same link, from another browser, is refused.
		other := newClient(t, f.env.PublicURL)
		if r := other.get(link); r.status != http.StatusGone || !strings.Contains(r.body, "already used") {
			t.Fatalf("replay: %d %s", r.status, r.body)
		}
		if r := scanner.do("POST", "/portal/enter", form, "Origin", scanner.base); r.status != http.StatusGone {
			t.Fatalf("replay by the button: %d %s", r.status, r.body)
		}
		if r := other.get("/portal/endpoints"); r.status != http.StatusUnauthorized {
			t.Fatalf("after a replay: %d", r.status)
		}
		if !strings.Contains(f.env.Logs.String(), "portal: a used portal link was opened again") {
			t.Fatal("a replayed link is not logged")
		}
		// Pages anyone may fetch store no session (a loop of guesses
		// fills no session store).
		for _, path := range []string{"/portal/enter?token=gpl_guessed", "/portal/no-such-page"} {
			if r := newClient(t, f.env.PublicURL).get(path); r.status != http.StatusNotFound || r.header.Get("Set-Cookie") != "" {
				t.Fatalf("%s: %d, Set-Cookie %q", path, r.status, r.header.Get("Set-Cookie"))
			}
		}
		if token := lu.Query().Get("token"); strings.Contains(f.env.Logs.String(), token) {
			t.Fatal("the link's token is in the log")
		}

		// An expired link is refused.
		short := f.link(t, f.appA, false, 1)
		time.Sleep(1100 * time.Millisecond)
		if r := other.get(short); r.status != http.StatusGone || !strings.Contains(r.body, "expired") {
			t.Fatalf("expired link: %d %s", r.status, r.body)
		}

		// The session ends after its lifetime (2 s here).
		time.Sleep(time.Second)
		if r := c.get("/portal/endpoints"); r.status != http.StatusUnauthorized || strings.Contains(r.body, f.receiverURL) {
			t.Fatalf("expired session: %d", r.status)
		}

		// A disabled app gets no link, and its session ends.
		fresh := newClient(t, f.env.PublicURL)
		fresh.enter(f.link(t, f.appB, false, 0))
		f.gql(t, `mutation($id: ID!) { updatePartnerApp(id: $id, input: {status: 0}) { id } }`, map[string]any{"id": f.appB}, nil)
		if r := fresh.get("/portal/endpoints"); r.status != http.StatusForbidden {
			t.Fatalf("session of a disabled app: %d", r.status)
		}
	})
}

// TestPortalHostile: the session of app A can neither read nor change B
// (guessed ids are not found and nothing changes), a POST without the
// CSRF token is refused, a read-only session shows no action and is
// refused any, the app secret appears nowhere, text renders as text, and
// the portal and console cookies do not work on each other's listener.
func TestPortalHostile(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := start(t, b)
		c := newClient(t, f.env.PublicURL)
		p := c.enter(f.link(t, f.appA, false, 0))
		if strings.Contains(p.body, "<script>alert(1)</script>") || !strings.Contains(p.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Fatal("the description is not rendered as text")
		}
		if strings.Contains(p.body, "shop-b") {
			t.Fatal("app B shows in A's portal")
		}
		csrf := p.csrf(t)
		a, bID := strconv.Itoa(f.endpointA), strconv.Itoa(f.endB)

		// Guessing B's ids: not found, nothing changes.
		for _, path := range []string{"/portal/endpoints/" + bID, "/portal/deliveries/" + strconv.Itoa(f.failedB.ID)} {
			if r := c.get(path); r.status != http.StatusNotFound {
				t.Fatalf("GET %s: %d", path, r.status)
			}
		}
		for _, path := range []string{"/portal/deliveries/" + strconv.Itoa(f.failedB.ID) + "/resend", "/portal/endpoints/" + bID + "/delete",
			"/portal/endpoints/" + bID + "/disable", "/portal/endpoints/" + bID + "/rotate", "/portal/endpoints/" + bID, "/portal/endpoints/" + bID + "/test"} {
			r := c.do("POST", path, url.Values{"csrf": {csrf}, "confirmed": {"yes"}, "url": {"https://evil.example/"}})
			if r.status != http.StatusNotFound {
				t.Fatalf("POST %s: %d", path, r.status)
			}
		}
		if st := f.status(t, f.failedB.ID); st != webhookdelivery.StatusFAILED {
			t.Fatalf("B's delivery is %s", st)
		}
		epB, err := f.env.App.DB.Client.WebhookEndpoint.Get(t.Context(), f.endB)
		if err != nil || !epB.Enabled || epB.URL != f.receiverURL {
			t.Fatalf("B's endpoint changed: %+v %v", epB, err)
		}

		// A POST without the CSRF token (or from another origin) is refused.
		resend := "/portal/deliveries/" + strconv.Itoa(f.failedA.ID) + "/resend"
		if r := c.do("POST", resend, url.Values{}); r.status != http.StatusForbidden {
			t.Fatalf("no CSRF: %d", r.status)
		}
		if r := c.do("POST", resend, url.Values{"csrf": {csrf}}, "Sec-Fetch-Site", "cross-site"); r.status != http.StatusForbidden {
			t.Fatalf("cross-site: %d", r.status)
		}
		if st := f.status(t, f.failedA.ID); st != webhookdelivery.StatusFAILED {
			t.Fatalf("refused resend changed the delivery: %s", st)
		}

		// Every page; the app secret in none.
		for _, path := range []string{"/portal/endpoints/" + a, "/portal/deliveries", "/portal/deliveries?status=FAILED",
			"/portal/deliveries/" + strconv.Itoa(f.failedA.ID), "/portal/events", "/portal/usage"} {
			if r := c.get(path); r.status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, r.status, r.body)
			}
		}
		// A read-only link: no action button, and actions refused.
		ro := newClient(t, f.env.PublicURL)
		rp := ro.enter(f.link(t, f.appA, true, 0))
		roCSRF := rp.csrf(t)
		for _, path := range []string{"/portal/endpoints", "/portal/endpoints/" + a, "/portal/deliveries", "/portal/deliveries/" + strconv.Itoa(f.failedA.ID)} {
			r := ro.get(path)
			for _, label := range []string{">Resend<", ">Delete<", ">Disable<", ">Rotate secret<", ">Send test<", ">Add endpoint<", ">Save<"} {
				if strings.Contains(r.body, label) {
					t.Fatalf("read-only %s shows %s", path, label)
				}
			}
		}
		for _, path := range []string{resend, "/portal/endpoints/" + a + "/disable", "/portal/endpoints/" + a + "/delete"} {
			if r := ro.do("POST", path, url.Values{"csrf": {roCSRF}, "confirmed": {"yes"}}); r.status != http.StatusForbidden {
				t.Fatalf("read-only POST %s: %d", path, r.status)
			}
		}
		if st := f.status(t, f.failedA.ID); st != webhookdelivery.StatusFAILED {
			t.Fatalf("a read-only resend changed the delivery: %s", st)
		}
		if ep, _ := f.env.App.DB.Client.WebhookEndpoint.Get(t.Context(), f.endpointA); ep == nil || !ep.Enabled {
			t.Fatal("a read-only session changed the endpoint")
		}

		// The resend of A's own delivery works.
		if r := c.do("POST", resend, url.Values{"csrf": {csrf}}); r.status != http.StatusSeeOther {
			t.Fatalf("resend: %d %s", r.status, r.body)
		}
		if st := f.status(t, f.failedA.ID); st == webhookdelivery.StatusFAILED {
			t.Fatal("resend did not queue the delivery")
		}
		if f.appSecretA == "" || strings.Contains(c.seen.String(), f.appSecretA) {
			t.Fatal("the app secret is shown in the portal")
		}

		// The portal cookie on the admin listener: neither a console
		// session nor a portal (there is none there).
		pc := c.cookie("gatehouse_portal", "/portal/")
		if pc == nil {
			t.Fatal("no portal cookie")
		}
		adm := newClient(t, f.env.AdminURL)
		for _, name := range []string{"gatehouse_portal", "gatehouse_console"} {
			r := adm.do("GET", "/console/deliveries", nil, "Cookie", name+"="+pc.Value)
			if r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), "sign-in") {
				t.Fatalf("portal cookie as %s on the console: %d", name, r.status)
			}
			if r := adm.do("GET", "/portal/endpoints", nil, "Cookie", name+"="+pc.Value); r.status != http.StatusNotFound {
				t.Fatalf("/portal/ on the admin listener: %d", r.status)
			}
		}
		// A console cookie on the portal.
		cons := newClient(t, f.env.AdminURL)
		sp := cons.get("/console/sign-in")
		if r := cons.do("POST", "/console/sign-in", url.Values{"api_key": {f.admin}, "csrf": {sp.csrf(t)}}); r.status != http.StatusSeeOther {
			t.Fatalf("console sign-in: %d", r.status)
		}
		cc := cons.cookie("gatehouse_console", "/console/")
		if cc == nil {
			t.Fatal("no console cookie")
		}
		pub := newClient(t, f.env.PublicURL)
		for _, name := range []string{"gatehouse_portal", "gatehouse_console"} {
			if r := pub.do("GET", "/portal/endpoints", nil, "Cookie", name+"="+cc.Value); r.status != http.StatusUnauthorized {
				t.Fatalf("console cookie as %s on the portal: %d", name, r.status)
			}
		}
	})
}

// TestCreatePortalLinkRules: the TTL's bounds, a disabled or unknown app,
// a READ_ONLY key refused; each call audited.
func TestCreatePortalLinkRules(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := start(t, b)
		bad := func(vars map[string]any, code string) {
			t.Helper()
			body := `{"query":"mutation($app: ID!, $ttl: Int) { createPortalLink(appID: $app, ttl: $ttl) { url } }","variables":` + mustJSON(vars) + `}`
			r := f.env.Do(t, "POST", f.env.AdminURL+"/graphql", body, "Content-Type", "application/json", "X-API-Key", f.admin)
			if !strings.Contains(string(r.Body), code) {
				t.Fatalf("%v: %s", vars, r.Body)
			}
		}
		bad(map[string]any{"app": f.appA, "ttl": 86401}, "VALIDATION_FAILED")
		bad(map[string]any{"app": f.appA, "ttl": 0}, "VALIDATION_FAILED")
		bad(map[string]any{"app": 999999}, "NOT_FOUND")
		f.gql(t, `mutation($id: ID!) { updatePartnerApp(id: $id, input: {status: 0}) { id } }`, map[string]any{"id": f.appB}, nil)
		bad(map[string]any{"app": f.appB}, "INVALID_STATE")
		f.link(t, f.appA, false, 86400)
		var audit struct {
			AuditEvents struct {
				Edges []struct {
					Node struct{ Mutation, Outcome, TargetID string }
				}
			}
		}
		f.gql(t, `{ auditEvents(first: 100) { edges { node { mutation outcome targetID } } } }`, nil, &audit)
		n := 0
		for _, e := range audit.AuditEvents.Edges {
			if e.Node.Mutation == "createPortalLink" {
				n++
			}
		}
		if n != 5 {
			t.Fatalf("%d createPortalLink audit events, want 5: %+v", n, audit)
		}
	})
}

// TestPortalTheme: the company's name is on every page (the link's
// refusal page too) and its colour in the portal's stylesheet, which the
// pages link to.
func TestPortalTheme(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := start(t, b, func(c *config.Config) { c.Portal.Name = "Acme <partners>"; c.Portal.Color = "#aa3300" })
		c := newClient(t, f.env.PublicURL)
		p := c.enter(f.link(t, f.appA, false, 0))
		for _, want := range []string{"Acme &lt;partners&gt;", `href="/portal/theme.css"`} {
			if !strings.Contains(p.body, want) {
				t.Fatalf("endpoints page lacks %s", want)
			}
		}
		css := c.get("/portal/theme.css")
		if css.status != http.StatusOK || !strings.Contains(css.body, "#aa3300") || !strings.HasPrefix(css.header.Get("Content-Type"), "text/css") {
			t.Fatalf("theme.css: %d %q %s", css.status, css.body, css.header.Get("Content-Type"))
		}
	})
}

// TestPortalEndpointActions: a partner adds an endpoint with a filter
// from the catalogue (its secret shown once), edits the filter, disables,
// sends a test to the first endpoint, and deletes after confirming; the
// usage page shows its own calls and not another app's.
func TestPortalEndpointActions(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := start(t, b, func(c *config.Config) { c.API.Deprecated = "v1=2026-06-30"; c.API.Sunset = "v1=2030-12-31" })
		c := newClient(t, f.env.PublicURL)
		csrf := c.enter(f.link(t, f.appA, false, 0)).csrf(t)
		r := c.do("POST", "/portal/endpoints", url.Values{"csrf": {csrf}, "url": {f.receiverURL + "/2"}, "description": {"second"}, "event_type": {"order.paid"}})
		if r.status != http.StatusOK || !strings.Contains(r.body, "whsec_") {
			t.Fatalf("add: %d %s", r.status, r.body)
		}
		eps, err := f.env.App.Webhooks.AppEndpoints(t.Context(), f.appA)
		if err != nil || len(eps) != 2 || eps[1].Description != "second" || len(eps[1].EventTypes) != 1 || eps[1].EventTypes[0] != "order.paid" {
			t.Fatalf("after add: %+v %v", eps, err)
		}
		id := strconv.Itoa(eps[1].ID)
		if r := c.do("POST", "/portal/endpoints/"+id, url.Values{"csrf": {csrf}, "url": {f.receiverURL + "/2"}, "description": {"second"},
			"event_type": {"order.paid", "order.refunded"}}); r.status != http.StatusSeeOther {
			t.Fatalf("edit: %d %s", r.status, r.body)
		}
		if r := c.do("POST", "/portal/endpoints", url.Values{"csrf": {csrf}, "url": {"ftp://nope"}}); r.status != http.StatusUnprocessableEntity {
			t.Fatalf("bad URL: %d", r.status)
		}
		if r := c.do("POST", "/portal/endpoints/"+id+"/disable", url.Values{"csrf": {csrf}}); r.status != http.StatusSeeOther {
			t.Fatalf("disable: %d", r.status)
		}
		ep, _ := f.env.App.Webhooks.AppEndpoint(t.Context(), f.appA, eps[1].ID)
		if ep.Enabled || len(ep.EventTypes) != 2 {
			t.Fatalf("after edit and disable: %+v", ep)
		}
		if r := c.do("POST", "/portal/endpoints/"+strconv.Itoa(f.endpointA)+"/test", url.Values{"csrf": {csrf}}); r.status != http.StatusSeeOther {
			t.Fatalf("send test: %d %s", r.status, r.body)
		}
		if r := c.do("POST", "/portal/endpoints/"+id+"/delete", url.Values{"csrf": {csrf}}); r.status != http.StatusOK || !strings.Contains(r.body, "Delete endpoint") {
			t.Fatalf("delete asks to confirm: %d", r.status)
		}
		if _, err := f.env.App.Webhooks.AppEndpoint(t.Context(), f.appA, eps[1].ID); err != nil {
			t.Fatal("deleted before confirming")
		}
		if r := c.do("POST", "/portal/endpoints/"+id+"/delete", url.Values{"csrf": {csrf}, "confirmed": {"yes"}}); r.status != http.StatusSeeOther {
			t.Fatalf("delete: %d", r.status)
		}
		if _, err := f.env.App.Webhooks.AppEndpoint(t.Context(), f.appA, eps[1].ID); err == nil {
			t.Fatal("not deleted")
		}

		// Paging: 25 more deliveries push the FAILED one to the second page.
		for i := range 25 {
			f.env.App.DB.Client.WebhookDelivery.Create().SetAppID(f.appA).SetEndpointID(f.endpointA).SetEventID("evt_page_" + strconv.Itoa(i)).
				SetEventType("order.paid").SetBizData(`{}`).SetCallbackURL(f.receiverURL).
				SetStatus(webhookdelivery.StatusSUCCESS).SetAttemptCount(1).ExecX(t.Context())
		}
		first := c.get("/portal/deliveries?status=&type=&endpoint=" + strconv.Itoa(f.endpointA))
		next := regexp.MustCompile(`href="([^"]+)" rel="next"`).FindStringSubmatch(first.body)
		if first.status != http.StatusOK || next == nil || strings.Contains(first.body, f.failedA.EventID) {
			t.Fatalf("first page: %d %v", first.status, next)
		}
		second := c.get(html.UnescapeString(next[1]))
		if second.status != http.StatusOK || !strings.Contains(second.body, f.failedA.EventID) || !strings.Contains(second.body, `rel="prev"`) {
			t.Fatalf("second page (%s): %d", next[1], second.status)
		}

		day := time.Now().UTC().Format(time.DateOnly)
		cl := f.env.App.DB.Client
		cl.APIUsage.Create().SetAppID(f.appA).SetVersion("v3").SetDay(day).SetCount(4242).ExecX(t.Context())
		cl.APIUsage.Create().SetAppID(f.appB).SetVersion("v3").SetDay(day).SetCount(9797).ExecX(t.Context())
		u := c.get("/portal/usage")
		if u.status != http.StatusOK || !strings.Contains(u.body, "4242") || strings.Contains(u.body, "9797") ||
			!strings.Contains(u.body, "every version you call is current") {
			t.Fatalf("usage: %d %s", u.status, u.body)
		}
		// Calls to a deprecated version: listed with its sunset.
		cl.APIUsage.Create().SetAppID(f.appA).SetVersion("v1").SetDay(day).SetCount(31).ExecX(t.Context())
		u = c.get("/portal/usage")
		if !strings.Contains(u.body, "2030-12-31") || strings.Contains(u.body, "every version you call is current") {
			t.Fatalf("usage with v1 calls: %s", u.body)
		}
	})
}
