package fleettest_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"gatehouse/internal/order"
	"gatehouse/internal/secret"
	"gatehouse/internal/telemetry"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook/dispatch"
	"gatehouse/rest/partnerclient"
)

// TestTracesOverOTLP is the tracing's acceptance test, on each backend:
// the gatehouse binary runs with OTEL_EXPORTER_OTLP_ENDPOINT pointing at
// an OTLP/HTTP receiver of the test, and what reaches the receiver is
// checked.
//   - One trace holds the signed call's server span and, under it, the
//     database's spans (Postgres through otelpgx; embedded, SQLite
//     through otelsql) and, on Postgres + Redis, Redis's (redisotel). The
//     in-process store of the embedded mode makes no spans (its calls are
//     map lookups in the process); none appear.
//   - The payOrder span's trace is the one of the order.paid delivery's
//     attempt span (its child); the webhook receiver, outside the trust
//     boundary, got a fresh traceparent (the trace id the attempt span
//     records, not payOrder's) and no tracestate.
//   - No span name or attribute (of spans, events, links or the
//     resource), nor any byte of an export, holds a secret: the app and
//     webhook secrets, the admin API key, the master key and JWT secret,
//     the signed call's signature and nonce, the webhook's signature, the
//     callback URL's token.
func TestTracesOverOTLP(t *testing.T) {
	t.Parallel()
	bin := gatehouseBinary(t)
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		col := newCollector(t)
		hooks := newHookReceiver(t)
		adminKey := secret.RandomToken("ghk_", 24)
		masterKey := base64.StdEncoding.EncodeToString(secret.RandomBytes(32))
		jwtSecret := hex.EncodeToString(secret.RandomBytes(32))
		env := []string{
			"GATEHOUSE_BOOTSTRAP_API_KEY=" + adminKey, "GATEHOUSE_MASTER_KEY=" + masterKey, "GATEHOUSE_JWT_SECRET=" + jwtSecret,
			"GATEHOUSE_WEBHOOK_ALLOW_PRIVATE=true", "GATEHOUSE_SHUTDOWN_DRAIN=0s",
			"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.URL, "OTEL_BSP_SCHEDULE_DELAY=100",
		}
		if !b.Embedded() {
			env = append(env, "GATEHOUSE_DATABASE_URL="+b.DatabaseURL, "GATEHOUSE_REDIS_URL="+b.RedisURL, "GATEHOUSE_REDIS_PREFIX="+b.KeyPrefix)
		}
		p := launch(t, bin, []string{"serve"}, t.TempDir(), env...)

		// An app whose callback URL is the test's receiver, an order, paid.
		const hookToken = "cb-token-0f3e9a"
		app := gql(t, p, adminKey, `mutation($in: CreatePartnerAppInput!) { createPartnerApp(input: $in) { appSecret webhookSecret app { id appKey } } }`,
			map[string]any{"in": map[string]any{"appName": "OTLP", "callbackURL": hooks.URL + "/hook?token=" + hookToken}})["createPartnerApp"].(map[string]any)
		appSecret, webhookSecret := app["appSecret"].(string), app["webhookSecret"].(string)
		appID, appKey := app["app"].(map[string]any)["id"].(string), app["app"].(map[string]any)["appKey"].(string)
		gql(t, p, adminKey, `mutation($app: ID!) { createOrder(input: {appID: $app, orderNo: "OT-1", amount: "9.90"}) { id } }`, map[string]any{"app": appID})
		gql(t, p, adminKey, `mutation { payOrder(orderNo: "OT-1") { status } }`, nil)

		// The signed call.
		q, err := partnerclient.Signer{AppKey: appKey, AppSecret: appSecret}.Sign(url.Values{"order_no": {"OT-1"}})
		if err != nil {
			t.Fatal(err)
		}
		if r := p.get(t, "/api/v1/orders/query?"+q.Encode()); r.status != 200 {
			t.Fatalf("signed query: %s", r)
		}

		// The signed call's trace: the server span, the database's and Redis's spans under it.
		srv := col.wait(t, "the signed call's server span", func(s span) bool {
			return s.Name == "GET /api/v1/orders/query" && s.Kind == tracepb.Span_SPAN_KIND_SERVER && s.attr("gatehouse.app_key") == appKey
		})
		dbScope, kvScope := "otelsql", "redisotel"
		if !b.Embedded() {
			dbScope = "otelpgx"
		}
		col.wait(t, "a "+dbScope+" span under the signed call", func(s span) bool {
			return strings.Contains(s.scope, dbScope) && col.under(s, srv)
		})
		if b.Embedded() {
			for _, s := range col.all() {
				if strings.Contains(s.scope, kvScope) {
					t.Errorf("a Redis span on the in-process store: %s", s.Name)
				}
			}
		} else {
			col.wait(t, "a Redis span under the signed call", func(s span) bool {
				return strings.Contains(s.scope, kvScope) && col.under(s, srv)
			})
		}

		// payOrder → the delivery's attempt → the receiver's traceparent.
		pay := col.wait(t, "payOrder", func(s span) bool { return s.Name == "payOrder" })
		attempt := col.wait(t, "the order.paid attempt", func(s span) bool {
			return s.Name == dispatch.SpanAttempt && s.attr("gatehouse.webhook.event_type") == order.EventPaid
		})
		if !bytes.Equal(attempt.TraceId, pay.TraceId) || !bytes.Equal(attempt.ParentSpanId, pay.SpanId) {
			t.Errorf("attempt span %x/%x (parent %x), want a child of payOrder %x/%x", attempt.TraceId, attempt.SpanId, attempt.ParentSpanId, pay.TraceId, pay.SpanId)
		}
		hook := hooks.wait(t)
		if want := fmt.Sprintf("00-%s-", attempt.attr(telemetry.AttrExternalTraceID)); !strings.HasPrefix(hook.Get("traceparent"), want) ||
			strings.Contains(hook.Get("traceparent"), fmt.Sprintf("%x", pay.TraceId)) || hook.Get("tracestate") != "" {
			t.Errorf("receiver's traceparent %q (tracestate %q), want a fresh trace %s… and no tracestate (not payOrder's %x)", hook.Get("traceparent"), hook.Get("tracestate"), want, pay.TraceId)
		}

		// No secret anywhere in what was exported.
		secrets := map[string]string{
			"app secret": appSecret, "webhook secret": webhookSecret, "admin API key": adminKey,
			"master key": masterKey, "JWT secret": jwtSecret, "callback token": hookToken,
			"signature": q.Get(partnerclient.ParamSign), "nonce": q.Get(partnerclient.ParamNonce),
		}
		for name, vs := range hook {
			if strings.Contains(strings.ToLower(name), "signature") {
				secrets["webhook header "+name] = strings.Join(vs, ",")
			}
		}
		p.stop(t, syscall.SIGTERM) // flushes the last spans
		scopes := map[string]int{}
		for _, s := range col.all() {
			scopes[s.scope]++
		}
		t.Logf("%d spans exported, by scope: %v", len(col.all()), scopes)
		for what, v := range secrets {
			if len(v) < 8 {
				t.Fatalf("%s %q is too short to search for", what, v)
			}
			for _, s := range col.all() {
				for _, text := range s.texts() {
					if strings.Contains(text, v) {
						t.Errorf("span %q holds the %s: %s", s.Name, what, text)
					}
				}
			}
			if col.rawContains(v) {
				t.Errorf("an OTLP export holds the %s", what)
			}
		}
	})
}

// launch runs the gatehouse binary with args on dataDir, free loopback
// ports and an environment without the caller's GATEHOUSE_* and OTEL_*
// variables (the embedded store unless env says otherwise), plus env; it
// waits for the listening line.
func launch(t *testing.T, bin string, args []string, dataDir string, env ...string) *process {
	t.Helper()
	p := &process{done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GATEHOUSE_") && !strings.HasPrefix(kv, "OTEL_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Env = append(p.cmd.Env, "GATEHOUSE_DATA_DIR="+dataDir, "GATEHOUSE_ADDR=127.0.0.1:0", "GATEHOUSE_ADMIN_ADDR=127.0.0.1:0", "GATEHOUSE_LOG_LEVEL=info")
	p.cmd.Env = append(p.cmd.Env, env...)
	return p.start(t)
}

// gql runs an admin GraphQL operation and returns its data (failing on errors).
func gql(t *testing.T, p *process, key, query string, vars map[string]any) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest("POST", p.admin+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Data   map[string]any
		Errors []any
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || len(out.Errors) > 0 || res.StatusCode != 200 {
		t.Fatalf("%s: %d %v %v", query, res.StatusCode, out.Errors, err)
	}
	return out.Data
}

// span is an exported span with its instrumentation scope and resource.
type span struct {
	*tracepb.Span
	scope    string
	resource []*commonpb.KeyValue
}

func (s span) attr(k string) string {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// texts are the span's name and every attribute (span, events, links,
// resource) as key=value text.
func (s span) texts() []string {
	out := []string{s.Name}
	add := func(kvs []*commonpb.KeyValue) {
		for _, kv := range kvs {
			out = append(out, kv.Key+"="+kv.Value.String())
		}
	}
	add(s.Attributes)
	add(s.resource)
	for _, e := range s.Events {
		out = append(out, e.Name)
		add(e.Attributes)
	}
	for _, l := range s.Links {
		add(l.Attributes)
	}
	if s.Status != nil {
		out = append(out, s.Status.Message)
	}
	return out
}

// collector is an OTLP/HTTP trace receiver (protobuf, optionally gzip).
type collector struct {
	*httptest.Server
	mu    sync.Mutex
	spans []span
	raw   [][]byte
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rd io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			rd = zr
		}
		b, err := io.ReadAll(rd)
		if err != nil || r.URL.Path != "/v1/traces" {
			http.Error(w, "bad export", 400)
			return
		}
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		c.mu.Lock()
		c.raw = append(c.raw, b)
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					c.spans = append(c.spans, span{Span: s, scope: ss.GetScope().GetName(), resource: rs.GetResource().GetAttributes()})
				}
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *collector) all() []span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]span(nil), c.spans...)
}

func (c *collector) rawContains(v string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.raw {
		if bytes.Contains(b, []byte(v)) {
			return true
		}
	}
	return false
}

// wait polls for a span matching (within 20 s).
func (c *collector) wait(t *testing.T, what string, match func(span) bool) span {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, s := range c.all() {
			if match(s) {
				return s
			}
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, s := range c.all() {
				fmt.Fprintf(&b, "  %s [%s] %x parent %x scope %s\n", s.Name, s.Kind, s.SpanId, s.ParentSpanId, s.scope)
			}
			t.Fatalf("no span %s among:\n%s", what, b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// under reports whether s descends from ancestor, in its trace.
func (c *collector) under(s, ancestor span) bool {
	if !bytes.Equal(s.TraceId, ancestor.TraceId) {
		return false
	}
	byID := map[string]span{}
	for _, x := range c.all() {
		if bytes.Equal(x.TraceId, s.TraceId) {
			byID[string(x.SpanId)] = x
		}
	}
	for p := s.ParentSpanId; len(p) > 0; {
		if bytes.Equal(p, ancestor.SpanId) {
			return true
		}
		next, ok := byID[string(p)]
		if !ok {
			return false
		}
		p = next.ParentSpanId
	}
	return false
}

// hookReceiver is a webhook receiver that answers 204 and keeps the
// headers of what it got.
type hookReceiver struct {
	*httptest.Server
	got chan http.Header
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{got: make(chan http.Header, 16)}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case h.got <- r.Header.Clone():
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookReceiver) wait(t *testing.T) http.Header {
	t.Helper()
	select {
	case hd := <-h.got:
		return hd
	case <-time.After(20 * time.Second):
		t.Fatal("the webhook receiver got nothing within 20 s")
		return nil
	}
}
