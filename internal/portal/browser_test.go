package portal_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/browser"
)

// TestPortalBrowser drives the portal in headless Chromium as a partner
// would, by labels and visible names: the link opens the app's endpoints
// (the hostile description shows as text, no script runs); the same link
// again is refused; the deliveries page lists the FAILED delivery and its
// "Resend" sends it again to the receiver; a secret rotation shows the
// new secret once; the app secret appears on no page; a read-only link
// shows no action button. axe-core finds no serious or critical
// violation on any page visited.
func TestPortalBrowser(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := start(t, b, func(c *config.Config) { c.Portal.Name = "Acme partners"; c.Portal.Color = "#aa3300" })
		ctx := browser.New(t)
		u := f.env.PublicURL
		run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
			t.Helper()
			if err := chromedp.Do(ctx, steps...); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		var bodies strings.Builder
		axeChecked := map[string]bool{}
		axe := func() {
			t.Helper()
			loc, _ := chromedp.Run(ctx, chromedp.Location())
			html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
			bodies.WriteString(html)
			if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.scripts.length`)); n != 0 {
				t.Fatalf("%s has %d scripts before axe", loc, n)
			}
			v, err := browser.Axe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(v) > 0 {
				t.Fatalf("axe on %s: %v", loc, v)
			}
			axeChecked[loc] = true
		}

		link := f.link(t, f.appA, false, 0)
		run("open the link", chromedp.Navigate(u+link), chromedp.WaitVisible(browser.Button("Open the portal")))
		axe()
		run("its button", chromedp.Click(browser.Button("Open the portal")), chromedp.WaitVisible(browser.Heading("Webhook endpoints")))
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		if strings.Contains(loc, "token") {
			t.Fatalf("the token stays in the address: %s", loc)
		}
		run("the endpoint and its description as text", chromedp.WaitVisible(browser.Cell(f.receiverURL)),
			chromedp.WaitVisible(browser.Cell("<script>alert(1)</script>")), chromedp.WaitVisible(chromedp.Search(`//*[normalize-space()="Acme partners"]`)))
		axe()

		// Deliveries: the FAILED one, found by its status; Resend.
		run("deliveries", chromedp.Click(browser.Link("Deliveries")), chromedp.WaitVisible(browser.Heading("Deliveries")))
		axe()
		run("filter", chromedp.SetValue(browser.Labelled("Status"), "FAILED"), chromedp.Click(browser.Button("Filter")),
			chromedp.WaitReady(chromedp.Search(`//option[@selected][normalize-space()="FAILED"]`)),
			chromedp.WaitVisible(browser.Link(f.failedA.EventID)))
		axe()
		run("open it", chromedp.Click(browser.Link(f.failedA.EventID)), chromedp.WaitVisible(browser.Heading("Attempts")), chromedp.WaitVisible(browser.Cell("503")))
		axe()
		run("back", chromedp.Click(browser.Link("Back to the deliveries")), chromedp.WaitVisible(browser.Heading("Deliveries")))
		for len(f.received) > 0 {
			<-f.received
		}
		run("resend", chromedp.Click(browser.ButtonIn(f.failedA.EventID, "Resend")),
			chromedp.WaitVisible(chromedp.Search(`//p[@role="status"][contains(., "queued to be sent again")]`)))
		select {
		case <-f.received:
		case <-time.After(20 * time.Second):
			t.Fatal("the receiver got nothing after Resend")
		}
		deadline := time.Now().Add(10 * time.Second)
		for f.status(t, f.failedA.ID) != webhookdelivery.StatusSUCCESS {
			if time.Now().After(deadline) {
				t.Fatalf("delivery is %s after Resend", f.status(t, f.failedA.ID))
			}
			time.Sleep(100 * time.Millisecond)
		}

		// Rotate the endpoint's secret: confirmed, then shown once.
		run("endpoints", chromedp.Click(browser.Link("Endpoints")), chromedp.WaitVisible(browser.Heading("Webhook endpoints")))
		run("rotate", chromedp.Click(browser.ButtonIn(f.receiverURL, "Rotate secret")), chromedp.WaitVisible(browser.Heading("Rotate the signing secret")))
		axe()
		run("confirm", chromedp.Click(browser.Button("Rotate secret")), chromedp.WaitVisible(browser.Labelled("Signing secret")))
		axe()
		secret, err := chromedp.Run(ctx, chromedp.Value(browser.Labelled("Signing secret")))
		if err != nil || !strings.HasPrefix(secret, "whsec_") {
			t.Fatalf("secret %q (%v)", secret, err)
		}
		run("done", chromedp.Click(browser.Link("Done")), chromedp.WaitVisible(browser.Heading("Webhook endpoints")))

		// The endpoint's own page, the catalogue and usage.
		run("endpoint page", chromedp.Click(browser.Link(f.receiverURL)), chromedp.WaitVisible(browser.Heading("Settings")))
		axe()
		for _, name := range []string{"Event catalogue", "Usage"} {
			run(name, chromedp.Click(browser.Link(name)), chromedp.WaitVisible(browser.Heading(name)))
			axe()
		}
		run("catalogue lists order.paid", chromedp.Click(browser.Link("Event catalogue")), chromedp.WaitVisible(browser.Heading("order.paid")))

		// The same link again is refused.
		run("replay", chromedp.Navigate(u+link), chromedp.WaitVisible(browser.Heading("Link already used")))
		axe()

		// A read-only link: no action button.
		run("read-only link", chromedp.Navigate(u+f.link(t, f.appA, true, 0)), chromedp.WaitVisible(chromedp.Search(`//p[contains(., "to read only")]`)),
			chromedp.Click(browser.Button("Open the portal")), chromedp.WaitVisible(browser.Heading("Webhook endpoints")))
		for _, path := range []string{"/portal/endpoints", "/portal/endpoints/" + itoa(f.endpointA), "/portal/deliveries", "/portal/deliveries/" + itoa(f.failedA.ID)} {
			run(path, chromedp.Navigate(u+path), chromedp.WaitVisible(chromedp.Search(`//h1`)))
			names, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("main button")).map(b => b.textContent.trim())`))
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				if n != "Filter" {
					t.Fatalf("%s shows a read-only session the button %q", path, n)
				}
			}
			axe()
		}
		if strings.Contains(bodies.String(), f.appSecretA) {
			t.Fatal("the app secret is on a portal page")
		}
		if len(axeChecked) < 9 {
			t.Fatalf("axe ran on %d pages", len(axeChecked))
		}
	})
}
