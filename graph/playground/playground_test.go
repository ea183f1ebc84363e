package playground_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gatehouse/graph/playground"

	"gatehouse/graph/graphtest"
	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/browser"
)

// TestPlaygroundInBrowser drives the Playground in headless Chromium from
// the admin listener alone (no CDN: the page must work offline), as an
// operator would: it opens with the tabs of the everyday tasks and asks
// for a key, without an "Error fetching schema"; the key is typed into the
// key bar, the schema is fetched at once, and a tab runs and shows data;
// after a reload the key is still there and the schema loads by itself.
// Skipped only when no browser is installed (CI installs Debian's chromium).
func TestPlaygroundInBrowser(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		ctx := context.Background()
		if _, _, err := a.App.Partners.Create(ctx, partner.CreateInput{AppName: "Browser Partner", AppKey: "browser-partner"}); err != nil {
			t.Fatal(err)
		}
		// Something for the audit log tab to show.
		a.GQL(t, `mutation { createSku(input: {name: "browser mug", stock: 2}) { id } }`, nil).OK(t, "createSku")
		keyRow, err := a.App.APIKeys.Authenticate(ctx, a.Key) // counts 1 use: subtracted below
		if err != nil {
			t.Fatal(err)
		}

		bctx := browser.New(t)
		js := func(expr string) chromedp.Action[chromedp.Void] { return chromedp.Evaluate[chromedp.Void](expr) }
		poll := func(what, expr string) {
			t.Helper()
			if _, err := chromedp.Run(bctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
				dump(t, bctx, a.Key)
				t.Fatalf("%s: %v", what, err)
			}
		}
		// runFor presses run until the response pane shows want: GraphiQL
		// takes a moment after a tab switch to pick up the tab's operation
		// (a run at once may name the previous tab's), so a run whose answer
		// lacks want is pressed again, at most every 500 ms.
		runFor := func(want string) string {
			t.Helper()
			v, err := chromedp.Run(bctx, chromedp.Poll[string](`(() => {
				const el = document.querySelector('.graphiql-response .CodeMirror');
				const v = el && el.CodeMirror.getValue();
				if (v && v.includes(`+jsString(want)+`)) return v;
				const now = Date.now();
				if (!window.lastRun || now - window.lastRun > 500) {
					window.lastRun = now;
					document.querySelector('.graphiql-execute-button').click();
				}
				return false;
			})()`, chromedp.WithPollingTimeout(20*time.Second)))
			if err != nil {
				dump(t, bctx, a.Key)
				t.Fatalf("the response pane does not show %q: %v", want, err)
			}
			return v
		}
		openTab := func(name string) chromedp.Action[chromedp.Void] {
			return chromedp.Poll[chromedp.Void](`(() => {
				const b = [...document.querySelectorAll('.graphiql-tab-button')].find(b => b.textContent.trim() === `+jsString(name)+`);
				if (!b) return false;
				if (!b.closest('.graphiql-tab').classList.contains('graphiql-tab-active')) { b.click(); return false; }
				return true;
			})()`, chromedp.WithPollingTimeout(10*time.Second))
		}

		// First visit: the tabs of the everyday tasks, a prompt for the key,
		// no schema error.
		if err := chromedp.Do(bctx,
			chromedp.Navigate(a.AdminURL+"/"),
			chromedp.WaitVisible(chromedp.CSS("#api-key")),
			chromedp.WaitVisible(chromedp.CSS(".graphiql-execute-button")),
		); err != nil {
			t.Fatalf("load the Playground: %v", err)
		}
		tabs, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('.graphiql-tab-button')].map(b => b.textContent.trim())`))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"FailedDeliveries", "ResendDelivery", "RotateAppSecret", "UsagePerVersion", "AuditLog", "CreateReadOnlyKey", "EventTypes", "EndpointsOfApp", "FailedSince"} {
			if !strings.Contains(strings.Join(tabs, ","), want) {
				t.Fatalf("tabs %v lack %s", tabs, want)
			}
		}
		poll("the key bar asks for a key", `document.getElementById('key-status').textContent.includes('Enter an admin API key')`)
		// Running a tab without a key: the server's refusal, shown plainly.
		if err := chromedp.Do(bctx, openTab("UsagePerVersion")); err != nil {
			t.Fatal(err)
		}
		runFor("missing_api_key")
		if bad, _ := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.body.innerText.includes('Error fetching schema')`)); bad {
			t.Fatal(`"Error fetching schema" without a key`)
		}

		// A wrong key is said to be wrong.
		if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.CSS("#api-key"), "ghk_not-a-real-key")); err != nil {
			t.Fatal(err)
		}
		poll("a wrong key is refused in the key bar", `document.getElementById('key-status').textContent.includes('invalid_api_key')`)

		// The real key, typed: the schema is fetched at once, a tab runs.
		if err := chromedp.Do(bctx,
			js(`document.getElementById('api-key').value = ''`),
			chromedp.SendKeys(chromedp.CSS("#api-key"), a.Key),
		); err != nil {
			t.Fatal(err)
		}
		poll("the schema is loaded right after the key is typed", `window.gatehouse.keyAccepted && window.gatehouse.schemaLoaded`)
		if err := chromedp.Do(bctx, openTab("AuditLog")); err != nil {
			t.Fatal(err)
		}
		result := runFor("createSku")
		var shown struct {
			Data struct {
				AuditEvents struct {
					TotalCount int `json:"totalCount"`
				} `json:"auditEvents"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(result), &shown); err != nil || shown.Data.AuditEvents.TotalCount < 1 || !strings.Contains(result, `"outcome": "SUCCESS"`) {
			t.Fatalf("audit log tab: %s (%v)", result, err)
		}
		screenshot(t, bctx, "playground-"+b.Name+".png")

		// Reload: the key is still there, the schema loads by itself, and a
		// tab runs with it.
		if err := chromedp.Do(bctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#api-key"))); err != nil {
			t.Fatal(err)
		}
		kept, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById('api-key').value`))
		if err != nil || kept != a.Key {
			t.Fatalf("after a reload the key field holds %d characters (%v)", len(kept), err)
		}
		poll("the schema loads after a reload", `window.gatehouse.keyAccepted && window.gatehouse.schemaLoaded`)
		if err := chromedp.Do(bctx, openTab("UsagePerVersion")); err != nil {
			t.Fatal(err)
		}
		runFor("callCountLast30Days")
		if bad, _ := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.body.innerText.includes('Error fetching schema')`)); bad {
			t.Fatal(`"Error fetching schema" with a key`)
		}
		// The icon.
		icon, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector('link[rel=icon]').href`))
		if err != nil || !strings.HasSuffix(icon, "/favicon.svg") {
			t.Fatalf("icon link %q: %v", icon, err)
		}
		if r := a.Do(t, "GET", a.AdminURL+"/favicon.svg", ""); r.Status != 200 || r.Header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(string(r.Body), "<svg") {
			t.Fatalf("favicon: %d %s", r.Status, r.Header.Get("Content-Type"))
		}

		// Forget: the key leaves the browser's storage.
		if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#forget-key"))); err != nil {
			t.Fatal(err)
		}
		poll("the key is forgotten", `![...Array(localStorage.length).keys()].some(i => localStorage.getItem(localStorage.key(i)) === `+jsString(a.Key)+`)`)

		// The browser's requests carried the key: its uses were counted.
		if err := a.App.KeyUsage.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		row, err := a.App.DB.APIKey.Get(ctx, keyRow.ID)
		if err != nil {
			t.Fatal(err)
		}
		if row.UsageCount < 4 { // 1 from Authenticate and the setup, the rest from the browser
			t.Fatalf("usage_count %d after the browser's queries", row.UsageCount)
		}
	})
}

// screenshot saves the page when GATEHOUSE_SCREENSHOT_DIR is set.
func screenshot(t *testing.T, bctx context.Context, name string) {
	dir := os.Getenv("GATEHOUSE_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	if png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)); err == nil {
		_ = os.WriteFile(filepath.Join(dir, name), png, 0o644)
	}
}

// dump logs what the page shows (the key masked), to tell a UI change
// from a server fault.
func dump(t *testing.T, bctx context.Context, key string) {
	dbg, _ := chromedp.Run(context.WithoutCancel(bctx), chromedp.Evaluate[string](`JSON.stringify({status: document.getElementById('key-status')?.textContent,
		state: window.gatehouse, editors: [...document.querySelectorAll('.CodeMirror')].map(e => [e.parentElement.className, e.CodeMirror.getValue().slice(0, 400)])})`))
	t.Logf("page: %s", strings.ReplaceAll(dbg, key, "<key>"))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// The Playground page refuses to be framed by another site (clickjacking:
// the API key sits in its local storage).
func TestPlaygroundRefusesFraming(t *testing.T) {
	rec := httptest.NewRecorder()
	playground.PlaygroundPage("gatehouse admin", "/graphql").ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	if got := rec.Header().Get("X-Frame-Options"); got != "DENY" {
		t.Fatalf("X-Frame-Options %q, want DENY", got)
	}
	if got := rec.Header().Get("Content-Security-Policy"); !strings.Contains(got, "frame-ancestors 'none'") {
		t.Fatalf("Content-Security-Policy %q, want frame-ancestors 'none'", got)
	}
}
