package webhook_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stripe/smokescreen/pkg/smokescreen"
	"github.com/stripe/smokescreen/pkg/smokescreen/conntrack"

	"gatehouse/ent/partnerapp"
	"gatehouse/ent/webhookendpoint"
	"gatehouse/internal/errs"
	"gatehouse/internal/outbound"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
	"gatehouse/internal/webhook/sender"
)

// TestCustomHeadersArrive: an endpoint's custom headers reach the
// receiver with every delivery, beside the signature headers; their
// values are sealed at rest (the stored row does not hold them), stored
// with the attempt as [redacted], and only their names are shown back.
func TestCustomHeadersArrive(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		rcv := newReceiver(t, always(http.StatusOK))
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: time.Hour})
		appID, secret := e.newApp(t, rcv.URL)
		id := e.firstEndpoint(t, appID)
		const token = "Bearer s3cret-token-of-the-receiver"
		hs := map[string]string{"authorization": token, "X-Tenant": "acme"}
		if _, err := e.svc.UpdateEndpoint(ctx, id, webhook.EndpointInput{Headers: &hs}); err != nil {
			t.Fatal(err)
		}
		d := e.pay(t, appID)
		e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
		got := rcv.requests()[0]
		if got.header.Get("Authorization") != token || got.header.Get("X-Tenant") != "acme" {
			t.Fatalf("the receiver got %v, want the custom headers", got.header)
		}
		ts, _ := strconv.ParseInt(got.header.Get(sender.HeaderTimestamp), 10, 64)
		if sig := sender.Sign(got.header.Get(sender.HeaderID), time.Unix(ts, 0), got.body, secret); sig != got.header.Get(sender.HeaderSignature) {
			t.Fatalf("the signature header is %q with custom headers, want %q", got.header.Get(sender.HeaderSignature), sig)
		}
		as := e.attempts(t, d.ID)
		if strings.Contains(as[0].RequestHeaders, "s3cret") || !strings.Contains(as[0].RequestHeaders, `"Authorization":"[redacted]"`) {
			t.Errorf("stored request headers %s, want Authorization [redacted]", as[0].RequestHeaders)
		}
		ep, err := e.db.WebhookEndpoint.Get(ctx, id)
		if err != nil || ep.Headers == nil || strings.Contains(string(*ep.Headers), "s3cret") {
			t.Fatalf("stored headers %v (%v), want them sealed", ep.Headers, err)
		}
		names, err := e.svc.HeaderNames(ctx, id)
		if err != nil || strings.Join(names, ",") != "Authorization,X-Tenant" {
			t.Fatalf("header names %v (%v)", names, err)
		}
		// {} removes them.
		none := map[string]string{}
		if _, err := e.svc.UpdateEndpoint(ctx, id, webhook.EndpointInput{Headers: &none}); err != nil {
			t.Fatal(err)
		}
		d = e.pay(t, appID)
		e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
		if h := rcv.requests()[1].header; h.Get("Authorization") != "" || h.Get("X-Tenant") != "" {
			t.Fatalf("after removing them the receiver still got %v", h)
		}
	})
}

// TestEgressInputRefused: bad retry schedules, headers and certificates
// are validation errors naming the field, and nothing is stored: the
// endpoint is not created, or not changed.
func TestEgressInputRefused(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		e := newEnv(t, b, webhook.Options{AllowPrivate: false, RetryBase: time.Hour})
		appID, _ := e.newApp(t, "https://partner.example.com/cb")
		id := e.firstEndpoint(t, appID)
		ca := testenv.NewCA(t, "receiver CA")
		certPEM, keyPEM, _ := ca.Issue(t, "gatehouse", false, time.Now().Add(time.Hour))
		_, otherKey, _ := ca.Issue(t, "someone else", false, time.Now().Add(time.Hour))
		oldPEM, oldKey, _ := ca.Issue(t, "expired", false, time.Now().Add(-time.Minute))
		str := func(b []byte) *string { s := string(b); return &s }
		sched := func(w ...int) *[]int { return &w }
		hdr := func(k, v string) *map[string]string { return &map[string]string{k: v} }
		many := make([]int, sender.MaxAttempts)
		for _, c := range []struct {
			name  string
			in    webhook.EndpointInput
			field string
		}{
			{"20 retries", webhook.EndpointInput{RetrySchedule: &many}, "retrySchedule"},
			{"over 30 days", webhook.EndpointInput{RetrySchedule: sched(86400*20, 86400*10+1)}, "retrySchedule"},
			{"negative", webhook.EndpointInput{RetrySchedule: sched(1, -5)}, "retrySchedule"},
			{"unknown preset", webhook.EndpointInput{RetryPreset: new(sender.RetryPreset("NIGHTLY"))}, "retryPreset"},
			{"signature header", webhook.EndpointInput{Headers: hdr("webhook-signature", "v1,forged")}, "headers"},
			{"legacy signature header", webhook.EndpointInput{Headers: hdr("X-Webhook-Signature", "v1,forged")}, "headers"},
			{"like a signature", webhook.EndpointInput{Headers: hdr("X-Signature-Override", "x")}, "headers"},
			{"webhook-id", webhook.EndpointInput{Headers: hdr("Webhook-Id", "msg_x")}, "headers"},
			{"svix header", webhook.EndpointInput{Headers: hdr("svix-id", "msg_x")}, "headers"},
			{"Host", webhook.EndpointInput{Headers: hdr("Host", "internal")}, "headers"},
			{"hop-by-hop", webhook.EndpointInput{Headers: hdr("Transfer-Encoding", "chunked")}, "headers"},
			{"bad name", webhook.EndpointInput{Headers: hdr("X Tenant", "a")}, "headers"},
			{"line break", webhook.EndpointInput{Headers: hdr("X-Tenant", "a\r\nX-Injected: 1")}, "headers"},
			{"not a certificate", webhook.EndpointInput{ClientCertificate: new("hello"), ClientKey: str(keyPEM)}, "clientCertificate"},
			{"key of another certificate", webhook.EndpointInput{ClientCertificate: str(certPEM), ClientKey: str(otherKey)}, "clientKey"},
			{"not a key", webhook.EndpointInput{ClientCertificate: str(certPEM), ClientKey: str(certPEM)}, "clientKey"},
			{"expired", webhook.EndpointInput{ClientCertificate: str(oldPEM), ClientKey: str(oldKey)}, "clientCertificate"},
			{"certificate without key", webhook.EndpointInput{ClientCertificate: str(certPEM)}, "clientKey"},
		} {
			before, err := e.db.WebhookEndpoint.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.svc.UpdateEndpoint(ctx, id, c.in)
			if errs.KindOf(err) != errs.Validation || errs.Field(err) != c.field {
				t.Errorf("%s: %v (field %q), want a validation error of %s", c.name, err, errs.Field(err), c.field)
			}
			for _, k := range [][]byte{keyPEM, otherKey, oldKey} {
				if body := string(k[40:80]); err != nil && strings.Contains(err.Error(), body) {
					t.Errorf("%s: the error shows a key: %v", c.name, err)
				}
			}
			after, _ := e.db.WebhookEndpoint.Get(ctx, id)
			hasHeaders := after.Headers != nil && len(*after.Headers) > 0
			if !after.UpdateTime.Equal(before.UpdateTime) || after.RetrySchedule != nil || hasHeaders || after.ClientCertificate != nil {
				t.Errorf("%s: the endpoint changed: update time %s → %s, schedule %v, headers %v, certificate %v", c.name,
					before.UpdateTime, after.UpdateTime, after.RetrySchedule, hasHeaders, after.ClientCertificate != nil)
			}
			in := c.in
			u := "https://new.example.com/" + strings.ReplaceAll(c.name, " ", "-")
			in.URL = &u
			if _, _, err := e.svc.CreateEndpoint(ctx, appID, in); errs.Field(err) != c.field {
				t.Errorf("create with %s: %v", c.name, err)
			}
			if n, _ := e.db.WebhookEndpoint.Query().Where(webhookendpoint.URL(u)).Count(ctx); n != 0 {
				t.Errorf("create with %s stored an endpoint", c.name)
			}
		}
	})
}

// connectProxy is Stripe's smokescreen (the egress proxy Svix runs for
// static IPs) serving on loopback, allowed to reach loopback receivers,
// recording the target of every CONNECT it is asked for.
type connectProxy struct {
	*httptest.Server
	mu       sync.Mutex
	connects []string
}

func startProxy(t testing.TB) *connectProxy {
	t.Helper()
	cfg := smokescreen.NewConfig()
	cfg.Log = logrus.New()
	cfg.Log.Out = io.Discard
	if err := cfg.SetAllowRanges([]string{"127.0.0.0/8"}); err != nil { // the test's receivers
		t.Fatal(err)
	}
	cfg.ConnTracker = conntrack.NewTracker(cfg.IdleTimeout, cfg.MetricsClient, cfg.Log, atomic.Value{}, nil)
	p := &connectProxy{}
	h := smokescreen.BuildProxy(cfg)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.connects = append(p.connects, r.Method+" "+r.Host)
		p.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *connectProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.connects...)
}

// TestDeliveriesGoThroughProxy: with a proxy configured
// (GATEHOUSE_WEBHOOK_PROXY), deliveries arrive through a CONNECT tunnel
// the proxy (smokescreen) opened to the receiver's checked address.
func TestDeliveriesGoThroughProxy(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		rcv := newReceiver(t, always(http.StatusOK))
		proxy := startProxy(t)
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: time.Hour, Proxy: proxy.URL})
		appID, _ := e.newApp(t, rcv.URL)
		d := e.pay(t, appID)
		e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
		target := strings.TrimPrefix(rcv.URL, "http://")
		if got := proxy.seen(); len(got) != 1 || got[0] != "CONNECT "+target {
			t.Fatalf("the proxy saw %v, want one CONNECT %s", got, target)
		}
		if rcv.count() != 1 {
			t.Fatalf("the receiver got %d requests", rcv.count())
		}
	})
}

// TestProxyKeepsURLGuard: through the proxy, without AllowPrivate, a
// receiver on loopback is a forbidden target (by IP literal or by name):
// refused here, the proxy never asked, though the proxy itself is on
// loopback (the operator configured it).
func TestProxyKeepsURLGuard(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		rcv := newReceiver(t, always(http.StatusOK))
		guarded := startProxy(t)
		g := newEnv(t, b, webhook.Options{AllowPrivate: false, RetryBase: time.Hour, Proxy: guarded.URL})
		port := rcv.URL[strings.LastIndexByte(rcv.URL, ':'):]
		for _, u := range []string{rcv.URL + "/ip-literal", "http://localhost" + port + "/name"} {
			appID, _ := g.newApp(t, "https://partner.example.com/cb")
			// Bypass registration, as a name that resolved elsewhere then would.
			if err := g.db.PartnerApp.Update().Where(partnerapp.ID(appID)).SetCallbackURL(u).Exec(ctx); err != nil {
				t.Fatal(err)
			}
			if err := webhook.SyncFirstEndpoint(ctx, g.db.Client, appID); err != nil {
				t.Fatal(err)
			}
			d := g.pay(t, appID)
			g.waitStatus(t, d.ID, dispatch.StatusRetrying, 10*time.Second)
			as := g.attempts(t, d.ID)
			if len(as) != 1 || !strings.Contains(as[0].Error, "forbidden callback address") || as[0].ResponseStatus != nil {
				t.Errorf("%s through the proxy: attempts %+v, want one refused by the URL guard", u, as)
			}
		}
		if got := guarded.seen(); len(got) != 0 {
			t.Errorf("the proxy was asked for forbidden targets: %v", got)
		}
		if rcv.count() != 0 {
			t.Errorf("the forbidden receiver got %d requests", rcv.count())
		}
	})
}

// TestMutualTLSToReceiver: a receiver that requires a client certificate
// signed by its CA gets the deliveries of the endpoint holding one; an
// endpoint of the same receiver without a certificate fails the TLS
// handshake, although a connection authenticated with the other's
// certificate is open to that host (connections are not shared across
// certificates). The certificate's key is sealed at rest and not shown.
func TestMutualTLSToReceiver(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		ca := testenv.NewCA(t, "receiver CA")
		_, _, serverPair := ca.Issue(t, "receiver", true, time.Now().Add(time.Hour))
		certPEM, keyPEM, _ := ca.Issue(t, "gatehouse", false, time.Now().Add(time.Hour))
		var got atomic.Int32
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if len(r.TLS.PeerCertificates) == 1 && r.TLS.PeerCertificates[0].Subject.CommonName == "gatehouse" {
				got.Add(1)
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverPair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool}
		srv.StartTLS()
		t.Cleanup(srv.Close)

		out := outbound.DefaultConfig()
		out.TLS = &tls.Config{RootCAs: ca.Pool}
		e := newEnv(t, b, webhook.Options{AllowPrivate: true, RetryBase: time.Hour, Outbound: &out})
		withCert, _ := e.newApp(t, srv.URL+"/with")
		cp, kp := string(certPEM), string(keyPEM)
		if _, err := e.svc.UpdateEndpoint(ctx, e.firstEndpoint(t, withCert), webhook.EndpointInput{ClientCertificate: &cp, ClientKey: &kp}); err != nil {
			t.Fatal(err)
		}
		d := e.pay(t, withCert)
		e.waitStatus(t, d.ID, dispatch.StatusSuccess, 10*time.Second)
		if got.Load() != 1 {
			t.Fatalf("the receiver saw %d deliveries with the client certificate", got.Load())
		}

		without, _ := e.newApp(t, srv.URL+"/without")
		d = e.pay(t, without)
		d = e.waitStatus(t, d.ID, dispatch.StatusRetrying, 10*time.Second)
		as := e.attempts(t, d.ID)
		if len(as) != 1 || as[0].ResponseStatus != nil || !strings.Contains(as[0].Error, "certificate") {
			t.Fatalf("without a certificate: attempts %+v, want one failed TLS handshake", as)
		}
		if got.Load() != 1 {
			t.Fatalf("the receiver saw %d deliveries, want only the one with the certificate", got.Load())
		}

		ep, err := e.db.WebhookEndpoint.Get(ctx, e.firstEndpoint(t, withCert))
		if err != nil || ep.ClientKey == nil || strings.Contains(string(*ep.ClientKey), "PRIVATE KEY") || *ep.ClientCertificate != cp {
			t.Fatalf("stored client certificate %v (%v), want the certificate and the key sealed", ep, err)
		}
		// Cleared, the endpoint sends none: its next delivery fails too.
		if _, err := e.svc.UpdateEndpoint(ctx, ep.ID, webhook.EndpointInput{ClearClientCertificate: true}); err != nil {
			t.Fatal(err)
		}
		d = e.pay(t, withCert)
		e.waitStatus(t, d.ID, dispatch.StatusRetrying, 10*time.Second)
		if got.Load() != 1 {
			t.Fatalf("a delivery arrived with the certificate cleared")
		}
	})
}
