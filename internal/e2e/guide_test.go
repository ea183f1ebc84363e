package e2e_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerclient"
)

// guideExample returns the code block that follows "<!-- example: lang -->"
// in docs/partner-guide.md.
func guideExample(t *testing.T, lang string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/partner-guide.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- example: " + regexp.QuoteMeta(lang) + " -->\n```[a-z]*\n(.*?)```")
	m := re.FindSubmatch(doc)
	if m == nil {
		t.Fatalf("no %s example in docs/partner-guide.md", lang)
	}
	return string(m[1])
}

// TestPartnerGuideExamples runs the guide's shell, Node.js and Python
// examples, as written, against a live server (each is skipped only when
// its interpreter is not installed), and does what the Go example does.
func TestPartnerGuideExamples(t *testing.T) {
	f := setup(t, testenv.Backend{Name: "sqlite"})
	env := append(os.Environ(), "GATEHOUSE_URL="+f.PublicURL, "APP_KEY="+f.app.AppKey, "APP_SECRET="+f.secret, "ORDER_NO=SO1001")
	dir := t.TempDir()
	for _, ex := range []struct {
		lang, file string
		cmd        []string
		needs      []string
		calls      int
		shows      string // in the output; default the order number
	}{
		{lang: "shell", file: "example.sh", cmd: []string{"bash", "example.sh"}, needs: []string{"bash", "curl", "md5sum", "od"}, calls: 1},
		{lang: "node", file: "example.mjs", cmd: []string{"node", "example.mjs"}, needs: []string{"node"}, calls: 2},
		{lang: "python", file: "example.py", cmd: []string{"python3", "example.py"}, needs: []string{"python3"}, calls: 2},
		// The partner's own webhooks: bodies signed through content_sha256.
		{lang: "shell-webhooks", file: "webhooks.sh", cmd: []string{"bash", "webhooks.sh"}, needs: []string{"bash", "curl", "md5sum", "sha256sum", "od"}, calls: 2, shows: "whsec_"},
		{lang: "node-webhooks", file: "webhooks.mjs", cmd: []string{"node", "webhooks.mjs"}, needs: []string{"node"}, calls: 2, shows: "whsec_"},
		{lang: "python-webhooks", file: "webhooks.py", cmd: []string{"python3", "webhooks.py"}, needs: []string{"python3"}, calls: 2, shows: "whsec_"},
	} {
		t.Run(ex.lang, func(t *testing.T) {
			for _, n := range ex.needs {
				if _, err := exec.LookPath(n); err != nil {
					if testenv.Required() {
						t.Fatalf("%s is not installed (the guide's examples are verified in CI)", n)
					}
					t.Skipf("%s is not installed", n)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, ex.file), []byte(guideExample(t, ex.lang)), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, ex.cmd[0], ex.cmd[1:]...)
			cmd.Dir, cmd.Env = dir, env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %v\n%s", ex.cmd, err, out)
			}
			if n := strings.Count(string(out), `"code":200`) + strings.Count(string(out), `"code": 200`); n != ex.calls {
				t.Fatalf("%d successful replies, want %d:\n%s", n, ex.calls, out)
			}
			shows := ex.shows
			if shows == "" {
				shows = "SO1001"
			}
			if !strings.Contains(string(out), shows) {
				t.Fatalf("%s is not in the output:\n%s", shows, out)
			}
		})
	}

	t.Run("go", func(t *testing.T) {
		ctx := context.Background()
		c := partnerclient.New(f.PublicURL, f.app.AppKey, f.secret)
		o, err := c.OrderV2(ctx, "SO1001")
		if err != nil || o.OrderNo != "SO1001" {
			t.Fatalf("OrderV2: %+v %v", o, err)
		}
		_, err = c.OrderV2(ctx, "SO-MISSING")
		var apiErr *partnerclient.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatus != 404 || apiErr.Code != 5001 || apiErr.RequestID == "" {
			t.Fatalf("missing order: %v", err)
		}
		res, err := c.Deduct(ctx, partnerclient.DeductRequest{BizNo: "B-20261122-0001", SkuID: int64(f.skuID), Quantity: 2})
		if err != nil || res.RemainingStock != 8 {
			t.Fatalf("Deduct: %+v %v", res, err)
		}
		signed, err := partnerclient.Signer{AppKey: f.app.AppKey, AppSecret: f.secret}.SignURL(f.PublicURL + "/api/v1/orders/query?order_no=SO1001")
		if err != nil {
			t.Fatal(err)
		}
		if r := send(t, f.Client, newRequest(t, "GET", signed, "")); r.status != 200 {
			t.Fatalf("signed URL: %d %s", r.status, r.body)
		}
	})

	t.Run("worked example", func(t *testing.T) {
		doc := guideExampleText(t)
		for _, st := range []partnerclient.SignType{partnerclient.MD5, partnerclient.HMACSHA256} {
			p := map[string][]string{"order_no": {"SO1001"}, "page": {"1"}}
			if st == partnerclient.HMACSHA256 {
				p["sign_type"] = []string{"HMAC-SHA256"}
			}
			sig, err := partnerclient.Signature(st, "demo-app-secret-for-local-use-only", strconv.Itoa(1763805600123), "abc", p)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(doc, "sign:           "+sig) {
				t.Errorf("the guide's worked example does not show the %s signature %s", st, sig)
			}
		}
	})
}

func guideExampleText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/partner-guide.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
