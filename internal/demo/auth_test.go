package demo_test

import (
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"gatehouse/internal/demo"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
)

// The demo hashes its user's password; at the production cost (and under
// the race detector) that dominates the test. The algorithm is the same.
func init() { secret.PasswordCost = bcrypt.MinCost }

// TestDemoAuth: seeding twice is harmless, and the printed commands work:
// the login curl, /api/auth/me and logout; the authorize URL through the
// login and approval pages; the token curl with the code and userinfo.
func TestDemoAuth(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a, ls, text := seedAndServe(t, b)
		password := regexp.MustCompile(`(?m)^password: (\S+)$`).FindStringSubmatch(text)
		if password == nil || !strings.Contains(text, "username: "+demo.DemoUsername) {
			t.Fatalf("no demo user in:\n%s", text)
		}
		if b.Embedded() && password[1] != demo.DemoPassword {
			t.Fatalf("embedded demo must print the documented password:\n%s", text)
		}
		if strings.Contains(text, "was changed") {
			t.Fatalf("fresh demo says its password changed:\n%s", text)
		}
		line := func(prefix string) string {
			t.Helper()
			for _, l := range strings.Split(text, "\n") {
				if strings.HasPrefix(l, prefix) {
					return l
				}
			}
			t.Fatalf("no line starting %q in:\n%s", prefix, text)
			return ""
		}
		authorize := line("http://" + ls.Public.Addr().String() + "/oauth/authorize?")

		// The OAuth part, as a browser would do it.
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Get(authorize)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 302 {
			t.Fatalf("authorize URL: HTTP %d", resp.StatusCode)
		}
		next, _ := url.Parse(resp.Header.Get("Location"))
		approve := next.Query().Get("next")
		ap, _ := url.Parse(approve)
		base := "http://" + ls.Public.Addr().String()
		resp, err = c.PostForm(base+"/login", url.Values{"username": {demo.DemoUsername}, "password": {password[1]}, "next": {approve}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		resp, err = c.PostForm(base+"/oauth/confirm", url.Values{"approved": {"true"}, "request_id": {ap.Query().Get("request_id")}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, err := url.Parse(resp.Header.Get("Location"))
		redirect := demo.DemoRedirectURI(demo.Env{App: a})
		if err != nil || !strings.HasPrefix(loc.String(), redirect+"?") || loc.Query().Get("code") == "" {
			t.Fatalf("approve: HTTP %d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}

		for _, tool := range []string{"sh", "curl", "sed"} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skipf("%s is not installed; the printed shell commands cannot run", tool)
			}
		}
		sh := func(script string) string {
			t.Helper()
			outb, err := exec.Command("sh", "-c", script).CombinedOutput()
			if err != nil {
				t.Fatalf("%s\n%v: %s", script, err, outb)
			}
			return string(outb)
		}
		login := line("TOKEN=$(")
		me := line("curl -s " + base + "/api/auth/me")
		logout := line("curl -s -X POST " + base + "/auth/logout")
		if got := sh(login + "\n" + me); !strings.Contains(got, `"username":"demo"`) {
			t.Fatalf("printed login + me: %s", got)
		}
		if got := sh(login + "\n" + logout + "\n" + me); !strings.Contains(got, `"code":200`) || !strings.Contains(got, "invalid_token") {
			t.Fatalf("printed logout: %s", got)
		}
		exchange := line("ACCESS=$(")
		userinfo := line("curl -s " + base + "/oauth/userinfo")
		if got := sh("CODE='" + loc.Query().Get("code") + "'\n" + exchange + "\n" + userinfo); !strings.Contains(got, `"username":"demo"`) {
			t.Fatalf("printed token exchange + userinfo: %s", got)
		}

		// The browser's way: approve again and land on the demo receiver's
		// callback page (as the banner's listen command runs it), whose
		// commands, pasted, exchange the code and call userinfo.
		code := approveAgain(t, c, base, authorize)
		page := callbackPage(t, a.Cfg.Demo.Receiver, line("./bin/gatehouse webhook listen "), redirect+"?code="+url.QueryEscape(code)+"&state=demo-state")
		cmds := regexp.MustCompile(`(?s)<pre>(.*?)</pre>`).FindStringSubmatch(page)
		if cmds == nil || !strings.Contains(page, code) {
			t.Fatalf("callback page shows no code and commands:\n%s", page)
		}
		if got := sh(html.UnescapeString(cmds[1])); !strings.Contains(got, `"username":"demo"`) {
			t.Fatalf("the callback page's commands: %s", got)
		}
		// A crafted code is shown as text and put into no command.
		page = callbackPage(t, a.Cfg.Demo.Receiver, line("./bin/gatehouse webhook listen "), redirect+"?code="+url.QueryEscape("x$(touch /tmp/pwned)x"))
		if strings.Contains(page, "<pre>") || !strings.Contains(page, "not one gatehouse issues") {
			t.Fatalf("callback page with a crafted code:\n%s", page)
		}
		page = callbackPage(t, a.Cfg.Demo.Receiver, line("./bin/gatehouse webhook listen "), redirect+"?error=access_denied&state=demo-state")
		if !strings.Contains(page, "access_denied") || strings.Contains(page, "<pre>") {
			t.Fatalf("callback page with an error:\n%s", page)
		}
	})
}

// approveAgain runs the authorize URL through the approval as the signed-in
// browser c and returns the code of the redirect.
func approveAgain(t *testing.T, c *http.Client, base, authorize string) string {
	t.Helper()
	resp, err := c.Get(authorize)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if next := loc.Query().Get("next"); next != "" { // the login page: the session ended
		t.Fatalf("authorize asks to sign in again: %s", loc)
	}
	resp, err = c.PostForm(base+"/oauth/confirm", url.Values{"approved": {"true"}, "request_id": {loc.Query().Get("request_id")}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ = url.Parse(resp.Header.Get("Location"))
	code := loc.Query().Get("code")
	if code == "" {
		t.Fatalf("approve again: HTTP %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return code
}

// callbackPage serves the demo receiver's callback page on addr with the
// OAuth flags of the banner's listen command, and GETs target from it.
func callbackPage(t *testing.T, addr, listen, target string) string {
	t.Helper()
	flag := func(name string) string {
		m := regexp.MustCompile(`--` + name + ` '([^']*)'`).FindStringSubmatch(listen)
		if m == nil {
			return ""
		}
		return m[1]
	}
	tok := flag("oauth-token-url")
	if tok == "" {
		tok = demo.DefaultTokenURL
	}
	cb := &demo.Callback{TokenURL: tok, ClientID: demo.DemoAppKey, ClientSecret: flag("oauth-client-secret"), RedirectURI: "http://" + addr + demo.CallbackPath, Out: io.Discard}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: cb}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	resp, err := http.Get(target)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("callback page: %d %s", resp.StatusCode, b)
	}
	return string(b)
}
