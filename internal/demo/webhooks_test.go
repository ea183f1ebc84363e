package demo_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
)

// TestDemoWebhooks runs the GraphQL calls the demo prints for webhooks
// (with the callback pointed at a local receiver): the order is paid and
// its webhook arrives and is listed.
func TestDemoWebhooks(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		var got atomic.Int64
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("webhook-signature") != "" {
				got.Add(1)
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		defer rcv.Close()

		_, _, text := seedAndServe(t, b, func(c *config.Config) { c.WebhookAllowPrivate = true })

		section := text[strings.Index(text, "# Webhooks"):]
		calls := regexp.MustCompile(`(?m)^curl -s (\S+) -H 'Content-Type: application/json' -H 'X-API-Key: ([^']+)' \\\n  -d '([^']+)'$`).
			FindAllStringSubmatch(section, -1)
		if len(calls) != 5 {
			t.Fatalf("want 5 GraphQL calls in the webhooks section:\n%s", section)
		}
		post := func(c []string) string {
			body := strings.ReplaceAll(c[3], "http://127.0.0.1:9099/hook", rcv.URL+"/hook")
			req, _ := http.NewRequest(http.MethodPost, c[1], strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-API-Key", c[2])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || strings.Contains(string(b), `"errors"`) {
				t.Fatalf("%s: %d %s", body, resp.StatusCode, b)
			}
			return string(b)
		}
		post(calls[0]) // callback URL
		if r := post(calls[1]); !strings.Contains(r, `"status":"PAID"`) {
			t.Fatalf("payOrder: %s", r)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(post(calls[2]), `"status":"SUCCESS"`) {
			if time.Now().After(deadline) {
				t.Fatalf("the demo order's webhook was not delivered: %s", post(calls[2]))
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got.Load() != 1 {
			t.Errorf("receiver got %d signed webhooks, want 1", got.Load())
		}
		post(calls[4]) // resend failed: none
	})
}
