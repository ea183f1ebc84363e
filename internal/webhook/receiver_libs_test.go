package webhook_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
)

// receiverLibs is the directory holding node_modules with the svix and
// standardwebhooks npm packages (.ci/run installs them there):
// GATEHOUSE_WEBHOOK_LIBS, or the CI cache.
func receiverLibs(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("GATEHOUSE_WEBHOOK_LIBS")
	if dir == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(cache, "gatehouse-ci", "webhook-libs")
	}
	_, errNode := exec.LookPath("node")
	_, errSvix := os.Stat(filepath.Join(dir, "node_modules", "svix"))
	_, errSW := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks"))
	if err := firstErr(errNode, errSvix, errSW); err != nil {
		if testenv.Required() {
			t.Fatalf("node with the svix and standardwebhooks packages in %s is required in CI: %v", dir, err)
		}
		t.Skipf("node with the svix and standardwebhooks packages in %s: %v (npm install --prefix %s svix standardwebhooks)", dir, err, dir)
	}
	return dir
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// receiverJS is a webhook receiver as a partner would write it with the
// two reference libraries. Each path is an endpoint; config.json (read on
// every request, so the test can follow a rotation) names, per path, the
// secrets that must each verify the delivery on their own (a receiver
// holding any one of them accepts it) and those that must not. Both
// libraries must agree; anything else is a 400 saying why.
const receiverJS = `
import http from "node:http";
import fs from "node:fs";
import { Webhook as Svix } from "svix";
import { Webhook as Standard } from "standardwebhooks";

const server = http.createServer((req, res) => {
  let body = "";
  req.setEncoding("utf8");
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    const cfg = JSON.parse(fs.readFileSync("config.json", "utf8"))[req.url] || { accept: [], reject: [] };
    const headers = {};
    for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(", ") : v;
    const problems = [];
    const check = (secret, want) => {
      for (const [name, Lib] of [["svix", Svix], ["standardwebhooks", Standard]]) {
        let ok = true;
        try { new Lib(secret).verify(body, headers); } catch (e) { ok = false; }
        if (ok !== want) problems.push(name + (want ? " refused a secret it holds" : " accepted a secret it should not"));
      }
    };
    cfg.accept.forEach((s) => check(s, true));
    cfg.reject.forEach((s) => check(s, false));
    if (cfg.accept.length === 0) problems.push("no secret configured for " + req.url);
    res.writeHead(problems.length ? 400 : 200, { "content-type": "text/plain" });
    res.end(problems.length ? problems.join("; ") : "verified");
  });
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
`

// nodeReceiver runs receiverJS and returns its base URL and a function
// that writes its configuration (path → secrets).
func nodeReceiver(t *testing.T) (string, func(map[string]receiverSecrets)) {
	t.Helper()
	libs := receiverLibs(t)
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(libs, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "receiver.mjs"), []byte(receiverJS), 0o600); err != nil {
		t.Fatal(err)
	}
	configure := func(cfg map[string]receiverSecrets) {
		b, _ := json.Marshal(cfg)
		tmp := filepath.Join(dir, "config.json.tmp")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "config.json")); err != nil {
			t.Fatal(err)
		}
	}
	configure(map[string]receiverSecrets{})
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", "receiver.mjs")
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	port := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		port <- strings.TrimSpace(line)
	}()
	select {
	case p := <-port:
		if p == "" {
			t.Fatal("the node receiver did not start")
		}
		return "http://127.0.0.1:" + p, configure
	case <-time.After(20 * time.Second):
		t.Fatal("the node receiver did not print its port")
	}
	return "", nil
}

type receiverSecrets struct {
	Accept []string `json:"accept"`
	Reject []string `json:"reject"`
}

// TestReferenceLibrariesVerifyEveryEndpoint: receivers written with the
// svix and standardwebhooks npm libraries verify every delivery of both
// endpoints of an app, before, during and after a rotation of one of
// them (during it, the old and the new secret each verify on their own;
// after endWebhookEndpointSecretOverlap, only the new one), and neither
// endpoint's secret verifies the other's deliveries.
func TestReferenceLibrariesVerifyEveryEndpoint(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		base, configure := nodeReceiver(t)
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: time.Hour})
		ctx := context.Background()
		appID, secA := e.newApp(t, base+"/a")
		epB, secB := e.endpoint(t, appID, base+"/b")
		round := 0
		deliverAll := func(what string, cfg map[string]receiverSecrets) {
			t.Helper()
			configure(cfg)
			round++
			var nos []string
			for i := range 3 {
				nos = append(nos, e.orderEvent(t, appID, i == 2))
			}
			for _, no := range nos {
				ds, err := e.db.WebhookDelivery.Query().Where(webhookdelivery.BizDataContains(`"` + no + `"`)).All(ctx)
				if err != nil || len(ds) != 2 {
					t.Fatalf("%s: %d deliveries of %s (%v), want one per endpoint", what, len(ds), no, err)
				}
				for _, d := range ds {
					waitFor(t, 15*time.Second, func() bool {
						d = e.delivery(t, d.ID)
						return d.Status != dispatch.StatusPending
					}, func() string { return fmt.Sprintf("%s: delivery %d not attempted", what, d.ID) })
					if d.Status != dispatch.StatusSuccess {
						as := e.attempts(t, d.ID)
						t.Fatalf("%s: delivery %d to %s is %s: %s", what, d.ID, d.CallbackURL, d.Status, as[len(as)-1].ResponseBody)
					}
				}
			}
		}
		deliverAll("two endpoints", map[string]receiverSecrets{
			"/a": {Accept: []string{secA}, Reject: []string{secB}},
			"/b": {Accept: []string{secB}, Reject: []string{secA}},
		})
		_, secB2, err := e.svc.RotateEndpointSecret(ctx, epB)
		if err != nil {
			t.Fatal(err)
		}
		deliverAll("during the rotation of /b", map[string]receiverSecrets{
			"/a": {Accept: []string{secA}, Reject: []string{secB, secB2}},
			"/b": {Accept: []string{secB, secB2}, Reject: []string{secA}},
		})
		if _, err := e.svc.EndEndpointSecretOverlap(ctx, epB); err != nil {
			t.Fatal(err)
		}
		deliverAll("after the overlap of /b", map[string]receiverSecrets{
			"/a": {Accept: []string{secA}, Reject: []string{secB2}},
			"/b": {Accept: []string{secB2}, Reject: []string{secB, secA}},
		})
		// The deprecated rotation of the app's webhook secret is the first
		// endpoint's.
		_, secA2, err := e.partners.RotateWebhookSecret(ctx, appID)
		if err != nil {
			t.Fatal(err)
		}
		deliverAll("during the rotation of the app's webhook secret (/a)", map[string]receiverSecrets{
			"/a": {Accept: []string{secA, secA2}, Reject: []string{secB2}},
			"/b": {Accept: []string{secB2}, Reject: []string{secA, secA2}},
		})
	})
}
