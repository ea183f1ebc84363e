package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gatehouse/internal/demo"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
)

// TestDemoFromTheOutside is a newcomer's `make run`, with the binary run as
// its own process: every command the banner prints is run as printed (by
// sh, with curl), including the refund and the cancel, the webhook
// receiver it names and the OAuth flow ending on the receiver's callback
// page. Then the demo app's secrets are rotated over GraphQL and the demo
// restarted with the receiver on another address: the banner prints the secret in force and orders its refund
// and cancel commands can still change, and every command works again.
// Then `serve --demo --reset` starts the demo afresh (embedded: the seeded
// secret and orders are back, the old database is in before-reset/;
// Postgres: refused, nothing touched), and a reset while the demo runs is
// refused.
func TestDemoFromTheOutside(t *testing.T) {
	for _, tool := range []string{"sh", "curl", "sed", "md5sum", "od"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed; the printed shell commands cannot run", tool)
		}
	}
	work := t.TempDir()
	bin := filepath.Join(work, "bin", "gatehouse")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		dir := t.TempDir() // the newcomer's checkout: ./bin/gatehouse and ./data
		if err := os.Symlink(filepath.Dir(bin), filepath.Join(dir, "bin")); err != nil {
			t.Fatal(err)
		}
		env := []string{
			"GATEHOUSE_DATA_DIR=" + filepath.Join(dir, "data"),
			"GATEHOUSE_ADDR=127.0.0.1:0", "GATEHOUSE_ADMIN_ADDR=127.0.0.1:0",
			"GATEHOUSE_DEMO_RECEIVER=" + freeLoopback(t),
			"GATEHOUSE_DATABASE_URL=" + b.DatabaseURL, "GATEHOUSE_REDIS_URL=" + b.RedisURL,
		}
		if !b.Embedded() {
			env = append(env, "GATEHOUSE_REDIS_PREFIX="+b.KeyPrefix,
				"GATEHOUSE_MASTER_KEY="+base64.StdEncoding.EncodeToString(secret.RandomBytes(32)),
				"GATEHOUSE_JWT_SECRET="+base64.RawURLEncoding.EncodeToString(secret.RandomBytes(48)))
		}

		// 1. The first start: every printed command works.
		p := startDemo(t, bin, dir, env)
		if b.Embedded() { // the README's tour is make run's: the embedded demo
			runTour(t, dir, p)
		}
		rcv := startReceiver(t, dir, p.banner)
		runBanner(t, dir, p.banner, rcv)
		oauthViaCallbackPage(t, dir, p.banner)
		seeded := field(t, p.banner, "app_secret")
		for _, want := range []string{"refund " + demo.DemoRefundOrderNo, "cancel " + demo.DemoCancelOrderNo} {
			if !strings.Contains(p.banner, "# "+want+" ") {
				t.Errorf("the first banner does not offer to %s:\n%s", want, p.banner)
			}
		}

		// 2. The Playground's rotate tab, as a curl: the seeded secrets die.
		rotated, rotatedHook := rotateDemoSecrets(t, p)
		if rotated == "" || rotated == seeded || !strings.HasPrefix(rotatedHook, "whsec_") {
			t.Fatalf("rotation gave %q, %q (seeded %q)", rotated, rotatedHook, seeded)
		}
		p.stop(t)
		rcv.stop(t)

		// 3. A restart, with the receiver moved (GATEHOUSE_DEMO_RECEIVER, as
		// `make run` takes it): the banner prints what is true now, and the
		// demo app calls back the receiver where it now is.
		env = append(env, "GATEHOUSE_DEMO_RECEIVER="+freeLoopback(t))
		p = startDemo(t, bin, dir, env)
		if strings.Contains(p.banner, seeded) || field(t, p.banner, "app_secret") != rotated {
			t.Fatalf("after a rotation the banner prints a dead secret (want %q):\n%s", rotated, p.banner)
		}
		if !strings.Contains(bannerLine(t, p.banner, "./bin/gatehouse webhook listen "), "--secret '"+rotatedHook+"'") {
			t.Fatalf("after a rotation the banner's receiver does not verify with the webhook secret in force %q:\n%s", rotatedHook, p.banner)
		}
		for _, stale := range []string{"refund " + demo.DemoRefundOrderNo, "cancel " + demo.DemoCancelOrderNo} {
			if strings.Contains(p.banner, "# "+stale+" ") {
				t.Errorf("after the refund and the cancel ran, the banner still offers to %s:\n%s", stale, p.banner)
			}
		}
		orders := field(t, p.banner, "orders")
		offered := regexp.MustCompile(`(?m)^# (refund|cancel|2\. pay order) (SO\d+) \((PAID|CREATED)`).FindAllStringSubmatch(p.banner, -1)
		if len(offered) != 3 {
			t.Fatalf("want a refund, a cancel and a pay example in the banner:\n%s", p.banner)
		}
		for _, m := range offered {
			if !strings.Contains(orders, m[2]+" ("+m[3]+")") {
				t.Errorf("the banner offers to %s %s, which its orders line does not list as %s: %s", m[1], m[2], m[3], orders)
			}
		}
		rcv = startReceiver(t, dir, p.banner)
		runBanner(t, dir, p.banner, rcv)
		oauthViaCallbackPage(t, dir, p.banner)

		// 4. A reset while the demo runs is refused, and changes nothing.
		if b.Embedded() {
			busy := append(slicesClone(env), "GATEHOUSE_ADDR="+strings.TrimPrefix(p.public, "http://"))
			out, err := runOnce(t, bin, dir, busy, "serve", "--demo", "--reset")
			if err == nil || !strings.Contains(out, "is the demo still running") {
				t.Fatalf("reset while the demo runs: %v\n%s", err, out)
			}
			if _, err := os.Stat(filepath.Join(dir, "data", demo.ResetDir)); !os.IsNotExist(err) {
				t.Fatalf("a refused reset moved the database: %v", err)
			}
		}
		p.stop(t)
		rcv.stop(t)

		// 5. --reset.
		if !b.Embedded() {
			out, err := runOnce(t, bin, dir, env, "serve", "--demo", "--reset")
			if err == nil || !strings.Contains(out, "refused with a Postgres database") || !strings.Contains(out, "dropdb") {
				t.Fatalf("reset on Postgres: %v\n%s", err, out)
			}
			p = startDemo(t, bin, dir, env) // nothing was touched
			if field(t, p.banner, "app_secret") != rotated {
				t.Fatalf("a refused reset changed the demo:\n%s", p.banner)
			}
			p.stop(t)
			return
		}
		out, err := runOnce(t, bin, dir, env, "serve", "--reset")
		if err == nil || !strings.Contains(out, "needs --demo") {
			t.Fatalf("--reset without --demo: %v\n%s", err, out)
		}
		p = startDemo(t, bin, dir, env, "--reset")
		if field(t, p.banner, "app_secret") != seeded || strings.Contains(p.banner, "rotated since") {
			t.Fatalf("after --reset the banner does not print the seeded secret %q:\n%s", seeded, p.banner)
		}
		if !strings.Contains(p.banner, "SO1004 (PAID)") || !strings.Contains(p.banner, "SO1005 (CREATED)") || strings.Contains(p.banner, "SO1006") {
			t.Fatalf("after --reset the orders are not the seeded ones:\n%s", p.banner)
		}
		if _, err := os.Stat(filepath.Join(dir, "data", demo.ResetDir, "gatehouse.db")); err != nil {
			t.Fatalf("the previous database was not kept aside: %v", err)
		}
		runTour(t, dir, p)
		rcv = startReceiver(t, dir, p.banner)
		runBanner(t, dir, p.banner, rcv)
		p.stop(t)
		rcv.stop(t)
	})
}

// runTour runs the README's ten-minute tour (its second sh block) as
// printed, against p's listeners in place of make run's 8080 and 8081.
func runTour(t *testing.T, dir string, p *proc) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) < 2 || !strings.Contains(blocks[1][1], "/api/tickets") {
		t.Fatalf("the README's tour is not its second sh block")
	}
	pub, adm := strings.TrimPrefix(p.public, "http://"), strings.TrimPrefix(p.admin, "http://")
	tour := strings.NewReplacer("localhost:8080", pub, "127.0.0.1:8080", pub, "localhost:8081", adm, "127.0.0.1:8081", adm).Replace(blocks[1][1])
	sh := exec.Command("sh", "-c", "set -e\n"+tour)
	sh.Dir = dir
	out, err := sh.CombinedOutput()
	bad := regexp.MustCompile(`"errors"|"error":"[^"]|"code":[45]\d\d\d|HTTP/1\.1 [45]\d\d`)
	if err != nil || bad.MatchString(string(out)) {
		t.Fatalf("the README's tour: %v\n%s", err, out)
	}
	for _, want := range []string{`"status":"DOING"`, `"order_no":"SO1001"`, "Deprecated-Fields: customer_info", `"remaining_stock":`, `"issuer":`, `"database":"ok"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the README's tour printed no %s:\n%s", want, out)
		}
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// syncBuf is a buffer written by a process's pipe and read by the test.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a process the test started, with its output.
type proc struct {
	cmd    *exec.Cmd
	out    *syncBuf
	done   chan struct{}
	banner string // serve --demo: the banner
	public string // serve: the listeners' base URLs
	admin  string
}

func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s did not stop within 30 s:\n%s", p.cmd.Args, p.out.String())
	}
}

// start starts cmd and waits until its output matches ready.
func start(t *testing.T, cmd *exec.Cmd, ready *regexp.Regexp) (*proc, []string) {
	t.Helper()
	p := &proc{cmd: cmd, out: &syncBuf{}, done: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			_, _ = p.out.Write([]byte(sc.Text() + "\n"))
			if m := ready.FindStringSubmatch(p.out.String()); m != nil {
				select {
				case found <- m:
				default:
				}
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		_ = pw.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
	select {
	case m := <-found:
		return p, m
	case <-p.done:
		t.Fatalf("%s exited at start:\n%s", cmd.Args, p.out.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("%s not ready within 90 s:\n%s", cmd.Args, p.out.String())
	}
	return nil, nil
}

var (
	bannerRE    = regexp.MustCompile(`(?s)(=== gatehouse demo ===\n.*?\n======================\n).*msg=listening public=(\S+) admin=(\S+)`)
	listeningRE = regexp.MustCompile(`listening on http://`)
)

// startDemo runs `gatehouse serve --demo` in dir (the newcomer's checkout).
func startDemo(t *testing.T, bin, dir string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--demo"}, args...)...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	p, m := start(t, cmd, bannerRE)
	p.banner, p.public, p.admin = m[1], "http://"+m[2], "http://"+m[3]
	return p
}

// runOnce runs the binary to its end and returns its output.
func runOnce(t *testing.T, bin, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s still running after 60 s:\n%s", args, out)
	}
	return string(out), err
}

// startReceiver runs the banner's `webhook listen` command as printed.
func startReceiver(t *testing.T, dir, banner string) *proc {
	t.Helper()
	line := bannerLine(t, banner, "./bin/gatehouse webhook listen ")
	cmd := exec.Command("sh", "-c", "exec "+line)
	cmd.Dir = dir
	p, _ := start(t, cmd, listeningRE)
	return p
}

// bannerLine is the banner's first line starting with prefix.
func bannerLine(t *testing.T, banner, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(banner, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("no line starting %q in the banner:\n%s", prefix, banner)
	return ""
}

// field is the value of a "name: value" line of the banner.
func field(t *testing.T, banner, name string) string {
	t.Helper()
	return strings.TrimSpace(strings.TrimPrefix(bannerLine(t, banner, name+":"), name+":"))
}

// bannerCommand is one command the banner prints, with the comment above it.
type bannerCommand struct{ comment, line string }

// commandStarts are how the banner's commands begin; other lines are
// values (app_key: …), comments, or the authorize URL for a browser.
var commandStarts = []string{"curl ", "ID=$(", "TOKEN=$(", "TS=$("}

// bannerCommands lists the commands to paste, continuation lines joined.
// The OAuth code exchange needs a browser's code (oauthViaCallbackPage
// runs the page's version of it) and the receiver runs on its own.
func bannerCommands(banner string) []bannerCommand {
	var out []bannerCommand
	comment := ""
	for _, l := range strings.Split(strings.ReplaceAll(banner, " \\\n  ", " "), "\n") {
		if strings.HasPrefix(l, "#") {
			comment = l
			continue
		}
		for _, s := range commandStarts {
			if strings.HasPrefix(l, s) && !strings.Contains(l, "$ACCESS") {
				out = append(out, bannerCommand{comment, l})
			}
		}
	}
	return out
}

// runBanner runs every command of the banner in one shell, in order (the
// later ones use $ID and $TOKEN of the earlier), and checks each outcome:
// a success, or the failure its comment announces.
func runBanner(t *testing.T, dir, banner string, rcv *proc) {
	t.Helper()
	cmds := bannerCommands(banner)
	if len(cmds) < 20 {
		t.Fatalf("only %d commands found in the banner:\n%s", len(cmds), banner)
	}
	var script strings.Builder
	for i, c := range cmds {
		fmt.Fprintf(&script, "echo '@@cmd %d'\n%s\necho; echo \"@@rc $?\"\n", i, c.line)
		if strings.Contains(c.comment, "run this twice") {
			fmt.Fprintf(&script, "echo '@@again %d'\n%s\necho; echo \"@@rc $?\"\n", i, c.line)
		}
	}
	sh := exec.Command("sh", "-c", script.String())
	sh.Dir = dir
	outb, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("the banner's commands: %v\n%s", err, outb)
	}
	parts := regexp.MustCompile(`(?m)^@@(cmd|again) (\d+)\n`).Split(string(outb), -1)[1:]
	heads := regexp.MustCompile(`(?m)^@@(cmd|again) (\d+)\n`).FindAllStringSubmatch(string(outb), -1)
	if len(parts) != len(heads) {
		t.Fatalf("cannot split the output:\n%s", outb)
	}
	bad := regexp.MustCompile(`"errors"|"error":"[^"]|"code":[45]\d\d\d|HTTP/1\.1 [45]\d\d`)
	for i, h := range heads {
		var n int
		fmt.Sscan(h[2], &n)
		c, out := cmds[n], parts[i]
		if !strings.Contains(out, "@@rc 0\n") {
			t.Errorf("exit status not 0: %s\n%s", c.line, out)
			continue
		}
		out = strings.TrimSpace(out[:strings.LastIndex(out, "@@rc")])
		switch {
		case strings.Contains(c.line, "# 401 invalid_token"):
			if !strings.Contains(out, "invalid_token") {
				t.Errorf("want invalid_token: %s\n%s", c.line, out)
			}
		case strings.Contains(c.comment, "more than the stock"):
			if !strings.Contains(out, `"code":5002`) {
				t.Errorf("want 5002: %s\n%s", c.line, out)
			}
		case h[1] == "again":
			if !strings.Contains(out, "Idempotent-Replayed: true") || bad.MatchString(out) {
				t.Errorf("the repeat is not replayed: %s\n%s", c.line, out)
			}
		case strings.HasPrefix(c.line, "TOKEN=$("):
			if out != "" {
				t.Errorf("login printed %s", out)
			}
		case strings.HasPrefix(c.line, "ID=$("):
			if !regexp.MustCompile(`^ticket \d+$`).MatchString(out) {
				t.Errorf("ticket create: %s\n%s", c.line, out)
			}
		case out == "" || bad.MatchString(out):
			t.Errorf("printed command failed: %s\n%s", c.line, out)
		}
	}
	// The paid order's webhook reached the receiver the banner names, verified.
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(rcv.out.String(), "eventType: order.paid") || !strings.Contains(rcv.out.String(), "signature:         verified") {
		if time.Now().After(deadline) {
			t.Fatalf("no verified order.paid delivery at the receiver:\n%s", rcv.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(rcv.out.String(), "INVALID") {
		t.Errorf("the receiver refused a delivery:\n%s", rcv.out.String())
	}
}

// oauthViaCallbackPage opens the banner's authorize URL as a browser would,
// signs in as the demo user, approves, lands on the demo receiver's
// callback page, and runs the commands the page shows.
func oauthViaCallbackPage(t *testing.T, dir, banner string) {
	t.Helper()
	authorize := regexp.MustCompile(`(?m)^(http://\S+/oauth/authorize\?\S+)$`).FindStringSubmatch(banner)
	if authorize == nil {
		t.Fatalf("no authorize URL in the banner:\n%s", banner)
	}
	au, _ := url.Parse(authorize[1])
	base := au.Scheme + "://" + au.Host
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	location := func(resp *http.Response, err error) *url.URL {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || resp.StatusCode/100 != 3 {
			t.Fatalf("%s: HTTP %d to %q", resp.Request.URL, resp.StatusCode, resp.Header.Get("Location"))
		}
		return loc
	}
	approve, _ := url.Parse(location(c.Get(authorize[1])).Query().Get("next"))
	location(c.PostForm(base+"/login", url.Values{"username": {field(t, banner, "username")}, "password": {field(t, banner, "password")}, "next": {approve.String()}}))
	back := location(c.PostForm(base+"/oauth/confirm", url.Values{"approved": {"true"}, "request_id": {approve.Query().Get("request_id")}}))
	resp, err := http.Get(back.String()) // the browser follows to the receiver
	if err != nil {
		t.Fatalf("the callback page %s: %v", back, err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cmds := regexp.MustCompile(`(?s)<pre>(.*?)</pre>`).FindSubmatch(page)
	if resp.StatusCode != 200 || cmds == nil || !strings.Contains(string(page), back.Query().Get("code")) {
		t.Fatalf("the callback page %s: HTTP %d\n%s", back, resp.StatusCode, page)
	}
	sh := exec.Command("sh", "-c", html.UnescapeString(string(cmds[1])))
	sh.Dir = dir
	out, err := sh.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"username":"demo"`) {
		t.Fatalf("the callback page's commands: %v\n%s", err, out)
	}
}

// rotateDemoSecrets rotates the demo app's secret and webhook secret over
// GraphQL with the banner's API key (what the Playground's rotate tab
// does) and returns the new ones.
func rotateDemoSecrets(t *testing.T, p *proc) (string, string) {
	t.Helper()
	key := field(t, p.banner, "api key")
	q := func(query string) map[string]any {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"query": query})
		req, _ := http.NewRequest(http.MethodPost, p.admin+"/graphql", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out["errors"] != nil {
			t.Fatalf("%s: %v %v", query, out, err)
		}
		return out["data"].(map[string]any)
	}
	apps := q(`{ partnerApps(where: {appKey: "` + demo.DemoAppKey + `"}) { edges { node { id } } } }`)
	id := apps["partnerApps"].(map[string]any)["edges"].([]any)[0].(map[string]any)["node"].(map[string]any)["id"].(string)
	rot := q(`mutation { rotatePartnerAppSecret(id: "` + id + `") { appSecret } }`)
	hook := q(`mutation { rotateWebhookSecret(id: "` + id + `") { webhookSecret } }`)
	return rot["rotatePartnerAppSecret"].(map[string]any)["appSecret"].(string),
		hook["rotateWebhookSecret"].(map[string]any)["webhookSecret"].(string)
}
