package graph_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gatehouse/internal/partner"
	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/browser"
)

// TestPlaygroundInBrowser loads the Playground (GraphiQL) in headless
// Chromium from the admin listener alone (no CDN: the page must work
// offline), runs a query without a key and sees missing_api_key, puts the
// key in the Headers tab, runs the query again and sees the data; the
// key's use is counted. Skipped only when no browser is installed (CI
// installs Debian's chromium).
func TestPlaygroundInBrowser(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b)
		ctx := context.Background()
		if _, _, err := a.App.Partners.Create(ctx, partner.CreateInput{AppName: "Browser Partner", AppKey: "browser-partner"}); err != nil {
			t.Fatal(err)
		}
		keyRow, err := a.App.APIKeys.Authenticate(ctx, a.Key) // counts 1 use: subtracted below
		if err != nil {
			t.Fatal(err)
		}

		bctx := browser.New(t)

		// The variables and headers editors share the tool area; the one
		// not shown has the class "hidden".
		const headersEditor = ".graphiql-editor-tool .graphiql-editor:not(.hidden) .CodeMirror"
		const query = `{ partnerApps(first: 5) { totalCount edges { node { appKey appName } } } }`
		setEditor := func(selector, value string) chromedp.Action[chromedp.Void] {
			return chromedp.Evaluate[chromedp.Void](`(() => {
				const el = [...document.querySelectorAll(` + jsString(selector) + `)].find(e => e.offsetParent !== null);
				el.CodeMirror.setValue(` + jsString(value) + `);
			})()`)
		}
		responseWith := func(want string) chromedp.Action[string] {
			return chromedp.Poll[string](`(() => {
				const el = document.querySelector('.graphiql-response .CodeMirror');
				const v = el && el.CodeMirror.getValue();
				return v && v.includes(`+jsString(want)+`) ? v : false;
			})()`, chromedp.WithPollingTimeout(30*time.Second))
		}
		if err := chromedp.Do(bctx,
			chromedp.Navigate(a.AdminURL+"/"),
			chromedp.WaitVisible(chromedp.CSS(".graphiql-execute-button")),
			chromedp.Poll[chromedp.Void](`!!document.querySelector('.graphiql-query-editor .CodeMirror')`),
			setEditor(".graphiql-query-editor .CodeMirror", query),
			chromedp.Click(chromedp.CSS(".graphiql-execute-button")),
		); err != nil {
			t.Fatalf("load the Playground and run a query: %v", err)
		}
		// The headers editor starts with an empty X-API-Key: refused.
		if _, err := chromedp.Run(bctx, responseWith("missing_api_key")); err != nil {
			t.Fatalf("the keyless query did not show missing_api_key: %v", err)
		}

		// Open the Headers tab, check the template, paste the key, run again.
		if err := chromedp.Do(bctx,
			chromedp.Click(chromedp.Search(`//div[contains(@class,"graphiql-editor-tools")]//button[normalize-space(.)="Headers"]`)),
			chromedp.Poll[chromedp.Void](`[...document.querySelectorAll(`+jsString(headersEditor)+`)].some(e => e.offsetParent !== null && e.CodeMirror.getValue().includes('X-API-Key'))`,
				chromedp.WithPollingTimeout(10*time.Second)),
			setEditor(headersEditor, `{"X-API-Key": "`+a.Key+`"}`),
			chromedp.Click(chromedp.CSS(".graphiql-execute-button")),
		); err != nil {
			t.Fatalf("set the X-API-Key header: %v", err)
		}
		result, err := chromedp.Run(bctx, responseWith("browser-partner"))
		if err != nil {
			// Show what the page holds, to tell a UI change from a server fault.
			dbg, _ := chromedp.Run(context.WithoutCancel(bctx), chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll('.CodeMirror')].map(e => [e.parentElement.className, e.CodeMirror.getValue()]))`))
			t.Logf("editors: %s", strings.ReplaceAll(dbg, a.Key, "<key>"))
			t.Fatalf("the query with the key did not show the app: %v", err)
		}
		var shown struct {
			Data struct {
				PartnerApps struct {
					TotalCount int `json:"totalCount"`
				} `json:"partnerApps"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(result), &shown); err != nil || shown.Data.PartnerApps.TotalCount != 1 || !strings.Contains(result, "Browser Partner") {
			t.Fatalf("result pane: %s (%v)", result, err)
		}
		if dir := os.Getenv("GATEHOUSE_SCREENSHOT_DIR"); dir != "" {
			png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
			if err == nil {
				_ = os.WriteFile(filepath.Join(dir, "playground-"+b.Name+".png"), png, 0o644)
			}
		}

		// The browser's requests carried the key: its uses were counted.
		if err := a.App.KeyUsage.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		row, err := a.App.DB.APIKey.Get(ctx, keyRow.ID)
		if err != nil {
			t.Fatal(err)
		}
		if row.UsageCount < 2 { // 1 from Authenticate above, at least 1 from the browser
			t.Fatalf("usage_count %d after the browser's query", row.UsageCount)
		}
	})
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
