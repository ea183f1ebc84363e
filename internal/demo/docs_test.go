package demo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"gatehouse/internal/app"
	"gatehouse/internal/config"
	"gatehouse/internal/demo"
	"gatehouse/internal/testenv"
)

// The docs' GraphQL examples name ids of `make run`'s demo. The tests
// below run them on a freshly seeded demo, so that an id drifting out of
// the demo (or onto something of the demo's own) fails here.

// graphqlBlockRE matches a ```graphql block of a page.
var graphqlBlockRE = regexp.MustCompile("(?s)```graphql\n(.*?)```")

// mutationRE finds a mutation in a block (a line that starts one).
var mutationRE = regexp.MustCompile(`(?m)^mutation\b`)

// docDemo is a demo seeded once, as on a fresh data dir's first start,
// with the payment sandbox serve --demo starts (the refund examples call
// it), and the demo's API key.
type docDemo struct {
	a        *app.App
	url, key string
}

func freshDemo(t *testing.T, b testenv.Backend) docDemo {
	t.Helper()
	if !b.Embedded() { // a database and key prefix of its own (SQLite's data dir is new each time)
		b.DatabaseURL, b.KeyPrefix = testenv.PostgresURL(t), testenv.KeyPrefix(t)
	}
	a, ls, text := serveDemo(t, b, 1, func(c *config.Config) {
		sb, err := demo.StartPaymentSandbox(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil || sb == nil {
			t.Fatalf("sandbox: %v", err)
		}
		t.Cleanup(func() { sb.Close() })
	})
	key := regexp.MustCompile(`(?m)^api key:\s+(\S+)$`).FindStringSubmatch(text)
	if key == nil {
		t.Fatalf("no API key in:\n%s", text)
	}
	return docDemo{a: a, url: "http://" + ls.Admin.Addr().String() + "/graphql", key: key[1]}
}

// run posts a GraphQL request body.
func (d docDemo) run(t *testing.T, body string) (int, string) {
	t.Helper()
	return send(t, d.url, d.key, body)
}

// runOp runs one operation of a page and fails the test on an error.
func (d docDemo) runOp(t *testing.T, op string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": op})
	status, out := d.run(t, string(body))
	if status != 200 || strings.Contains(out, `"errors"`) {
		t.Errorf("%s\n→ %d %s", op, status, out)
	}
	return out
}

// demoOwnQuery reads what the demo seeded and its banner's commands use:
// no example of the docs may change it.
const demoOwnQuery = `{
  partnerApps(where: {idIn: [1, 2]}, orderBy: {field: CREATE_TIME, direction: ASC}) { edges { node { id appKey status rateLimit expireDate
    previousSecretExpiresAt scopes redirectURIs webhookEndpoints { id url enabled eventTypes rateLimit previousSecretExpiresAt } } } }
  skus(where: {idIn: [1, 2, 3]}) { edges { node { id name stock } } }
  orders(where: {orderNoIn: ["SO1001", "SO1002", "SO1003", "SO1004", "SO1005", "SO2001"]}) { edges { node { orderNo status } } }
  users(where: {id: 1}) { edges { node { id username roles status tokensRevokedAt } } }
  apiKeys(where: {id: 1}) { edges { node { id name status role } } }
}`

// demoOwn is the demo's own state: demoOwnQuery's answer and its
// credentials, which GraphQL never shows.
func (d docDemo) demoOwn(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	e := demo.Env{App: d.a}
	state := d.runOp(t, demoOwnQuery)
	sec, err := d.a.Partners.CurrentSecret(ctx, demo.DemoAppKey)
	if err != nil {
		t.Fatal(err)
	}
	whsec, err := d.a.Partners.CurrentWebhookSecret(ctx, demo.DemoAppKey)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.a.Users.Authenticate(ctx, demo.DemoUsername, demo.DemoUserPassword(e))
	var lines bytes.Buffer // one value a line, so that a change reads as one
	if err := json.Indent(&lines, []byte(state), "", " "); err != nil {
		t.Fatal(err)
	}
	return lines.String() + "\napp secret seeded: " + yes(sec == demo.DemoSecret(e)) +
		"\nwebhook secret seeded: " + yes(whsec == demo.DemoWebhookSecret(e)) +
		"\ndemo user signs in: " + yes(err == nil)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// TestWebhooksPageRunsOnDemo: the endpoint examples of docs/webhooks.md
// ("Endpoints": add one to the demo app, change, disable, enable, rotate,
// list, delete it) and the recovery call posted with curl (two operations
// and its operationName) run, in the page's order, on a fresh demo
// (make run) without an error: the ids they use exist there.
func TestWebhooksPageRunsOnDemo(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		d := freshDemo(t, b)
		page := readPage(t, "webhooks.md")
		var ops []string
		for _, m := range graphqlBlockRE.FindAllStringSubmatch(pageSection(t, page, "Endpoints"), -1) {
			ops = append(ops, topLevel(m[1])...)
		}
		if len(ops) < 8 {
			t.Fatalf("found %d operations in the Endpoints section: %q", len(ops), ops)
		}
		for _, op := range ops {
			d.runOp(t, op)
		}
		m := regexp.MustCompile(`(?s)-d '(\{"operationName".*?)'\n`).FindStringSubmatch(pageSection(t, page, "Recovery and auto-disable"))
		if m == nil {
			t.Fatal("no curl call with operationName in the Recovery section")
		}
		if !json.Valid([]byte(m[1])) {
			t.Fatalf("the curl body is not JSON: %s", m[1])
		}
		if status, out := d.run(t, m[1]); status != 200 || strings.Contains(out, `"errors"`) || !strings.Contains(out, `"resendFailedWebhookDeliveries":0`) {
			t.Errorf("the recovery call: %d %s", status, out)
		}
	})
}

// TestAdminGraphQLPageRunsOnDemo: every operation of every ```graphql
// block of docs/admin-graphql.md runs without an error on a fresh demo
// (make run), a block's lines in order (each block that holds a mutation
// on a demo of its own, as a reader pastes it), so every id and key it
// names exists there; and none of them changes what the demo seeded (its
// apps, their secrets and endpoints, SKUs, orders, user and API key):
// the examples act on what they create.
func TestAdminGraphQLPageRunsOnDemo(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		page := readPage(t, "admin-graphql.md")
		var (
			d      docDemo
			before string
			n      int
		)
		check := func() {
			if before == "" {
				return
			}
			if after := d.demoOwn(t); after != before {
				b, a := strings.Split(before, "\n"), strings.Split(after, "\n")
				for i := range min(len(b), len(a)) {
					if b[i] != a[i] {
						t.Errorf("the examples changed the demo's own data: %s → %s", strings.TrimSpace(b[i]), strings.TrimSpace(a[i]))
					}
				}
				if len(b) != len(a) {
					t.Errorf("the examples changed the demo's own data:\n%s\n→\n%s", before, after)
				}
			}
		}
		for _, m := range graphqlBlockRE.FindAllStringSubmatch(page, -1) {
			if before == "" || mutationRE.MatchString(m[1]) {
				check()
				d = freshDemo(t, b)
				before = d.demoOwn(t)
			}
			for _, op := range topLevel(m[1]) {
				n++
				d.runOp(t, op)
			}
		}
		check()
		if n < 40 {
			t.Fatalf("found only %d operations in the page", n)
		}
	})
}

// readPage reads docs/name.
func readPage(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// pageSection returns the "## title" section of page.
func pageSection(t *testing.T, page, title string) string {
	t.Helper()
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
