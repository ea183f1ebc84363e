package console_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/browser"
)

// TestConsoleBrowser drives the console in headless Chromium as an
// operator would, by labels and visible names: sign in with the keyboard
// (Tab to the "API key" field, type, Enter), find the FAILED delivery by
// its event type and status, open its attempts, press "Resend" and see the
// new attempt; rotate the endpoint's secret and see it once; sign out.
// Then a READ_ONLY key sees no action button. axe-core finds no serious or
// critical violation on any page visited.
func TestConsoleBrowser(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := start(t, b, "shop")
		ctx := browser.New(t)
		u := f.env.AdminURL
		run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
			t.Helper()
			if err := chromedp.Do(ctx, steps...); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		axeChecked := map[string]bool{}
		axe := func() {
			t.Helper()
			loc, _ := chromedp.Run(ctx, chromedp.Location())
			v, err := browser.Axe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(v) > 0 {
				t.Fatalf("axe on %s: %v", loc, v)
			}
			axeChecked[loc] = true
		}
		// GATEHOUSE_CONSOLE_SCREENSHOTS=dir writes the pictures of
		// docs/console.md (the SQLite run only).
		shotDir := os.Getenv("GATEHOUSE_CONSOLE_SCREENSHOTS")
		shot := func(name string) {
			t.Helper()
			if shotDir == "" || !b.Embedded() {
				return
			}
			png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(shotDir, "console-"+name+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		focused := func() string {
			t.Helper()
			s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const e = document.activeElement; const l = e.labels && e.labels[0]; return (l ? l.textContent : e.textContent || "").trim(); })()`))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}

		// Sign in with the keyboard only.
		run("open the console", chromedp.Navigate(u+"/console/"), chromedp.WaitVisible(browser.Labelled("API key")))
		axe()
		for i := 0; focused() != "API key"; i++ {
			if i == 10 {
				t.Fatalf("Tab never reached the API key field (at %q)", focused())
			}
			run("tab", chromedp.KeyEvent(kb.Tab))
		}
		run("type the key and press Enter", chromedp.KeyEvent(f.admin), chromedp.KeyEvent(kb.Enter),
			chromedp.WaitVisible(browser.Heading("Delivery log")))
		axe()

		// Find the FAILED delivery by its event type.
		run("filter", chromedp.SetValue(browser.Labelled("Event type"), f.failedEventType), chromedp.SetValue(browser.Labelled("Status"), "FAILED"),
			chromedp.Click(browser.Button("Filter")),
			// The filtered page: its Status field shows FAILED as chosen.
			chromedp.WaitReady(chromedp.Search(`//option[@selected][normalize-space()="FAILED"]`)),
			chromedp.WaitVisible(browser.Link(f.failed.EventID)))
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("main tbody tr").length`))
		if err != nil || rows != 1 {
			t.Fatalf("%d rows for %s FAILED (%v), want 1", rows, f.failedEventType, err)
		}
		run("the row has its status and a Resend button", chromedp.WaitVisible(browser.Cell("FAILED")), chromedp.WaitVisible(browser.ButtonIn(f.failed.EventID, "Resend")))
		axe()
		shot("log")

		// Open its attempts.
		run("open the delivery", chromedp.Click(browser.Link(f.failed.EventID)), chromedp.WaitVisible(browser.Heading("Attempts")),
			chromedp.WaitVisible(browser.Cell("503")))
		axe()
		attempts := func() int {
			n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.evaluate("count(//section[h2='Attempts']//tbody/tr[td[contains(.,' ms')]])", document, null, XPathResult.NUMBER_TYPE).numberValue`))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := attempts(); n != 1 {
			t.Fatalf("%d attempts before Resend, want 1", n)
		}
		// Press Resend, and see the new attempt (the dispatcher makes it).
		run("resend", chromedp.Click(browser.Button("Resend")), chromedp.WaitVisible(chromedp.Search(`//p[@role="status"][contains(., "Queued again")]`)))
		deadline := time.Now().Add(20 * time.Second)
		for attempts() < 2 {
			if time.Now().After(deadline) {
				t.Fatal("no new attempt after Resend")
			}
			time.Sleep(200 * time.Millisecond) // the page is reloaded until the attempt shows: a person would do the same
			run("reload", chromedp.Reload(), chromedp.WaitVisible(browser.Heading("Attempts")))
		}
		run("the new attempt succeeded", chromedp.WaitVisible(browser.Cell("200")))
		shot("detail")

		// Rotate the endpoint's secret: shown once.
		run("endpoints", chromedp.Click(browser.Link("Endpoints")), chromedp.WaitVisible(browser.Heading("Endpoints of shop")))
		axe()
		shot("endpoints")
		run("rotate", chromedp.Click(browser.ButtonIn(f.receiverURL, "Rotate secret")), chromedp.WaitVisible(browser.Heading("Rotate the endpoint secret")))
		axe()
		run("confirm", chromedp.Click(browser.Button("Rotate secret")), chromedp.WaitVisible(browser.Labelled("Signing secret")))
		axe()
		shot("secret")
		secret, err := chromedp.Run(ctx, chromedp.Value(browser.Labelled("Signing secret")))
		if err != nil || !strings.HasPrefix(secret, "whsec_") {
			t.Fatalf("secret %q (%v)", secret, err)
		}
		if got := apptest.WebhookSecrets(t, f.env, f.appID); len(got) == 0 || got[0] != secret {
			t.Fatal("the secret shown is not the endpoint's new secret")
		}
		run("done", chromedp.Click(browser.Link("Done")), chromedp.WaitVisible(browser.Heading("Endpoints of shop")))
		html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
		if strings.Contains(html, secret) {
			t.Fatal("the secret is shown again")
		}

		// Every other page: axe, and a screenshot when asked for (docs).
		for _, name := range []string{"Apps", "API keys", "Users", "Audit log", "API versions", "Event catalogue"} {
			run(name, chromedp.Click(browser.Link(name)), chromedp.WaitVisible(browser.Heading(name)))
			axe()
		}
		run("recover", chromedp.Navigate(u+"/console/deliveries/recover"), chromedp.WaitVisible(browser.Heading("Recover failed deliveries")))
		axe()
		run("continue", chromedp.Click(browser.Button("Continue")), chromedp.WaitVisible(chromedp.Search(`//button[starts-with(normalize-space(), "Recover ")]`)))
		axe()

		// Sign out ends the session.
		run("sign out", chromedp.Click(browser.Button("Sign out")), chromedp.WaitVisible(browser.Labelled("API key")))
		run("signed out", chromedp.Navigate(u+"/console/deliveries"), chromedp.WaitVisible(browser.Labelled("API key")))

		// A READ_ONLY key sees no action button.
		run("sign in read-only", chromedp.SendKeys(browser.Labelled("API key"), f.readOnly), chromedp.Click(browser.Button("Sign in")),
			chromedp.WaitVisible(browser.Heading("Delivery log")))
		for _, path := range []string{"/console/deliveries", "/console/deliveries/" + strconv.Itoa(f.failed.ID), "/console/endpoints", "/console/apps", "/console/keys", "/console/users"} {
			run(path, chromedp.Navigate(u+path), chromedp.WaitVisible(chromedp.Search(`//h1`)))
			names, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("main button")).map(b => b.textContent.trim())`))
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				if n != "Filter" && n != "Show" {
					t.Fatalf("%s shows a READ_ONLY key the button %q", path, n)
				}
			}
			axe()
		}
		if len(axeChecked) < 12 {
			t.Fatalf("axe ran on %d pages", len(axeChecked))
		}
	})
}
