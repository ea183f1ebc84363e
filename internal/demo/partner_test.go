package demo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"gatehouse/internal/demo"
	"gatehouse/internal/testenv"
)

// TestDemoPartner: seeding twice is harmless, and the printed calls work:
// the ready-made signed URL and the shell snippet (when sh, md5sum, od and
// curl are installed, as on the Linux machines `make run` targets).
func TestDemoPartner(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		_, _, text := seedAndServe(t, b)
		if !strings.Contains(text, "app_key:    "+demo.DemoAppKey) {
			t.Fatalf("demo output lacks the app key:\n%s", text)
		}
		if b.Embedded() && !strings.Contains(text, "app_secret: "+demo.DemoAppSecret) {
			t.Fatalf("embedded demo must print the documented secret:\n%s", text)
		}
		if strings.Contains(text, "was rotated") {
			t.Fatalf("fresh demo says its secret was rotated:\n%s", text)
		}

		ready := regexp.MustCompile(`(?m)^curl -s '([^']+)'$`).FindStringSubmatch(text)
		if ready == nil {
			t.Fatalf("no ready-made call in:\n%s", text)
		}
		resp, err := http.Get(ready[1])
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Code int `json:"code"`
			Data struct {
				OrderNo string `json:"order_no"`
				Status  string `json:"status"`
			} `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if err != nil || env.Code != 200 || env.Data.OrderNo != "SO1001" || env.Data.Status != "PAID" {
			t.Fatalf("ready-made call: %+v %v", env, err)
		}

		for _, tool := range []string{"sh", "md5sum", "od", "curl"} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Logf("%s not installed: the shell snippet is not run", tool)
				return
			}
		}
		// The snippet stamps milliseconds (date +%s%3N): a request stamped
		// before the replay memory started (on a fresh Redis prefix, when
		// the server opened it) would be refused 4003, and whole seconds
		// would stamp up to 999 ms early.
		line := regexp.MustCompile(`(?m)^TS=.*$`).FindString(text)
		if line == "" {
			t.Fatalf("no shell snippet in:\n%s", text)
		}
		got, err := exec.Command("sh", "-c", line).Output()
		if err != nil {
			t.Fatalf("shell snippet: %v", err)
		}
		if !strings.Contains(string(got), `"code":200`) || !strings.Contains(string(got), `"order_no":"SO1001"`) {
			t.Fatalf("shell snippet answered %s", got)
		}
	})
}

// TestDemoBannerAfterRotation: once the demo app's secret was rotated, the
// banner prints the secret in force, never the dead seeded one, and its
// ready-made call is signed with it.
func TestDemoBannerAfterRotation(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a, ls, _ := seedAndServe(t, b)
		ctx := context.Background()
		app, err := a.Partners.GetByKey(ctx, demo.DemoAppKey)
		if err != nil {
			t.Fatal(err)
		}
		dead := demo.DemoSecret(demo.Env{App: a})
		_, live, err := a.Partners.RotateSecret(ctx, app.ID)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := demo.Seed(ctx, a, ls, &out); err != nil {
			t.Fatal(err)
		}
		text := out.String()
		if strings.Contains(text, dead) {
			t.Fatalf("banner prints the dead secret %q:\n%s", dead, text)
		}
		if !strings.Contains(text, "app_secret: "+live+"\n") || !strings.Contains(text, "rotated since the demo was seeded") {
			t.Fatalf("banner lacks the live secret:\n%s", text)
		}
		ready := regexp.MustCompile(`(?m)^curl -s '([^']+)'$`).FindStringSubmatch(text)
		if ready == nil {
			t.Fatalf("no ready-made call in:\n%s", text)
		}
		resp, err := http.Get(ready[1])
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `"code":200`) {
			t.Fatalf("ready-made call after rotation answered %s", body)
		}
	})
}
