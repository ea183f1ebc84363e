package graph_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"gatehouse/graph/graphtest"
	"gatehouse/internal/testenv"
)

// TestWebhookEndpointEgressFields: an endpoint's retry schedule (as a
// list, the LONG preset, null for the default, [] for one attempt), its
// custom headers (names shown, values never) and its client certificate
// (the key never shown) over GraphQL; bad input is VALIDATION_FAILED
// naming the field, and nothing is stored.
func TestWebhookEndpointEgressFields(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		app := a.GQL(t, `mutation { createPartnerApp(input: {appName: "egress"}) { app { id } } }`, nil).OK(t, "createPartnerApp")
		appID := graphtest.Str(app, "app", "id")
		ca := testenv.NewCA(t, "receiver CA")
		certPEM, keyPEM, _ := ca.Issue(t, "gatehouse", false, time.Now().Add(time.Hour))
		const fields = `id retrySchedule headerNames clientCertificate`

		created := a.GQL(t, `mutation($app: ID!, $h: JSON, $cert: String, $key: String) { createWebhookEndpoint(appID: $app, input: {url: "https://r.example.com/h",
			retrySchedule: [1, 1, 1], headers: $h, clientCertificate: $cert, clientKey: $key}) { endpoint { `+fields+` } } }`,
			map[string]any{"app": appID, "h": map[string]any{"Authorization": "Bearer s3cret", "x-tenant": "acme"}, "cert": string(certPEM), "key": string(keyPEM)}).OK(t, "createWebhookEndpoint")
		ep := graphtest.Dig(created, "endpoint")
		id := graphtest.Str(ep, "id")
		if fmt.Sprint(graphtest.Dig(ep, "retrySchedule")) != "[1 1 1]" || fmt.Sprint(graphtest.Dig(ep, "headerNames")) != "[Authorization X-Tenant]" ||
			graphtest.Str(ep, "clientCertificate") != string(certPEM) {
			t.Fatalf("created %v", ep)
		}
		for _, c := range []struct {
			input, want string
		}{
			{`{retryPreset: LONG}`, "[5 300 1800 7200 18000 36000 36000]"},
			{`{retrySchedule: []}`, "[]"},
			{`{retrySchedule: null}`, "<nil>"},
			{`{retrySchedule: [2]}`, "[2]"},
			{`{retryPreset: DEFAULT}`, "<nil>"},
		} {
			up := a.GQL(t, `mutation($id: ID!) { updateWebhookEndpoint(id: $id, input: `+c.input+`) { `+fields+` } }`, map[string]any{"id": id}).OK(t, "updateWebhookEndpoint")
			if got := fmt.Sprint(graphtest.Dig(up, "retrySchedule")); got != c.want {
				t.Errorf("%s: retrySchedule %s, want %s", c.input, got, c.want)
			}
		}
		up := a.GQL(t, `mutation($id: ID!) { updateWebhookEndpoint(id: $id, input: {headers: {}, clearClientCertificate: true}) { `+fields+` } }`,
			map[string]any{"id": id}).OK(t, "updateWebhookEndpoint")
		if len(graphtest.Dig(up, "headerNames").([]any)) != 0 || graphtest.Dig(up, "clientCertificate") != nil {
			t.Fatalf("after removing the headers and the certificate: %v", up)
		}
		r := a.GQL(t, `{ __type(name: "WebhookEndpoint") { fields { name } } }`, nil).OK(t, "__type")
		for _, f := range graphtest.Dig(r, "fields").([]any) {
			if n := strings.ToLower(graphtest.Str(f, "name")); strings.Contains(n, "key") || n == "headers" {
				t.Errorf("WebhookEndpoint shows %s", graphtest.Str(f, "name"))
			}
		}

		ones := make([]any, 20)
		for i := range ones {
			ones[i] = 1
		}
		for _, c := range []struct {
			input map[string]any
			field string
		}{
			{map[string]any{"retrySchedule": ones}, "retrySchedule"},
			{map[string]any{"retrySchedule": []any{86400 * 30, 1}}, "retrySchedule"},
			{map[string]any{"retrySchedule": []any{5, -1}}, "retrySchedule"},
			{map[string]any{"retrySchedule": []any{5}, "retryPreset": "LONG"}, "retrySchedule"},
			{map[string]any{"headers": map[string]any{"webhook-signature": "v1,forged"}}, "headers"},
			{map[string]any{"headers": map[string]any{"X-Webhook-Signature": "v1,forged"}}, "headers"},
			{map[string]any{"headers": map[string]any{"Content-Length": "1"}}, "headers"},
			{map[string]any{"headers": map[string]any{"X-Count": 1}}, "headers"},
			{map[string]any{"headers": "Authorization: x"}, "headers"},
			{map[string]any{"clientCertificate": "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----", "clientKey": string(keyPEM)}, "clientCertificate"},
			{map[string]any{"clientCertificate": string(certPEM), "clientKey": string(certPEM)}, "clientKey"},
		} {
			c.input["url"] = "https://bad.example.com/h"
			e := a.GQL(t, `mutation($app: ID!, $in: CreateWebhookEndpointInput!) { createWebhookEndpoint(appID: $app, input: $in) { secret } }`,
				map[string]any{"app": appID, "in": c.input}).Fails(t, "VALIDATION_FAILED")
			if e.Extensions["field"] != c.field || !strings.HasPrefix(e.Message, c.field+": ") {
				t.Errorf("%v: %q (field %v), want VALIDATION_FAILED naming %s", c.input, e.Message, e.Extensions["field"], c.field)
			}
			delete(c.input, "url")
			e = a.GQL(t, `mutation($id: ID!, $in: UpdateWebhookEndpointInput!) { updateWebhookEndpoint(id: $id, input: $in) { id } }`,
				map[string]any{"id": id, "in": c.input}).Fails(t, "VALIDATION_FAILED")
			if e.Extensions["field"] != c.field {
				t.Errorf("update %v: %q (field %v), want VALIDATION_FAILED naming %s", c.input, e.Message, e.Extensions["field"], c.field)
			}
		}
		r = a.GQL(t, `query($id: ID!) { partnerApps(where: {id: $id}) { edges { node { webhookEndpoints { url `+fields+` } } } } }`, map[string]any{"id": appID}).OK(t, "partnerApps")
		eps := graphtest.Dig(r, "edges", 0, "node", "webhookEndpoints").([]any)
		if len(eps) != 1 || graphtest.Dig(eps[0], "retrySchedule") != nil || len(graphtest.Dig(eps[0], "headerNames").([]any)) != 0 {
			t.Fatalf("after refused input the app's endpoints are %v, want the one, unchanged", eps)
		}
	})
}
