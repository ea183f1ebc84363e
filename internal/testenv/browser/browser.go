// Package browser starts headless Chromium for UI tests (the GraphQL
// Playground, the OAuth login and approval pages).
package browser

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gatehouse/internal/testenv"
)

// Path finds a Chromium or Chrome binary, or "".
func Path() string {
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// New starts a headless browser for the test and returns a chromedp
// context bound to it (at most 90 s). Without a browser the test is skipped
// on a developer machine and fails in CI, which installs Debian's chromium.
// The flags keep Chromium off the network: this machine only allows loopback.
func New(t *testing.T) context.Context {
	t.Helper()
	bin := Path()
	if bin == "" {
		if testenv.Required() {
			t.Fatal("no Chromium/Chrome binary, and browser tests are required in CI (apt-get install chromium)")
		}
		t.Skip("no Chromium/Chrome binary on this machine")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}
