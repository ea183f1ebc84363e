package demo_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"gatehouse/internal/testenv"
)

// TestWebhooksPageRunsOnDemo: the endpoint examples of docs/webhooks.md
// ("Endpoints": add one to the demo app, change, disable, enable, rotate,
// list, delete it) and the recovery call posted with curl (two operations
// and its operationName) run, in the page's order, on a fresh demo
// (make run) without an error: the ids they use exist there.
func TestWebhooksPageRunsOnDemo(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		_, ls, text := seedAndServe(t, b)
		key := regexp.MustCompile(`(?m)^api key:\s+(\S+)$`).FindStringSubmatch(text)
		if key == nil {
			t.Fatalf("no API key in:\n%s", text)
		}
		url := "http://" + ls.Admin.Addr().String() + "/graphql"
		raw, err := os.ReadFile("../../docs/webhooks.md")
		if err != nil {
			t.Fatal(err)
		}
		page := string(raw)
		section := func(title string) string {
			i := strings.Index(page, "\n## "+title+"\n")
			if i < 0 {
				t.Fatalf("no section %q", title)
			}
			rest := page[i+len(title)+5:]
			if j := strings.Index(rest, "\n## "); j >= 0 {
				rest = rest[:j]
			}
			return rest
		}
		var ops []string
		for _, m := range regexp.MustCompile("(?s)```graphql\n(.*?)```").FindAllStringSubmatch(section("Endpoints"), -1) {
			ops = append(ops, topLevel(m[1])...)
		}
		if len(ops) < 8 {
			t.Fatalf("found %d operations in the Endpoints section: %q", len(ops), ops)
		}
		for _, op := range ops {
			body, _ := json.Marshal(map[string]any{"query": op})
			if status, out := send(t, url, key[1], string(body)); status != 200 || strings.Contains(out, `"errors"`) {
				t.Errorf("%s\n→ %d %s", op, status, out)
			}
		}
		m := regexp.MustCompile(`(?s)-d '(\{"operationName".*?)'\n`).FindStringSubmatch(section("Recovery and auto-disable"))
		if m == nil {
			t.Fatal("no curl call with operationName in the Recovery section")
		}
		if !json.Valid([]byte(m[1])) {
			t.Fatalf("the curl body is not JSON: %s", m[1])
		}
		if status, out := send(t, url, key[1], m[1]); status != 200 || strings.Contains(out, `"errors"`) || !strings.Contains(out, `"resendFailedWebhookDeliveries":0`) {
			t.Errorf("the recovery call: %d %s", status, out)
		}
	})
}

// topLevel cuts a block into its operations: each ends where its
// outermost braces close (the page's examples hold no brace in a string).
func topLevel(block string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range block {
		switch c {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				out = append(out, strings.TrimSpace(block[start:i+1]))
				start = i + 1
			}
		}
	}
	return out
}
