package graph_test

import (
	"strconv"
	"strings"
	"testing"

	"gatehouse/graph/graphtest"
	"gatehouse/internal/testenv"
)

// TestIDArgumentOutOfRange: an ID argument that is no id (beyond 64 bits,
// not a number), as a literal, a variable or inside an input or filter, is
// VALIDATION_FAILED naming the argument, never strconv's text.
func TestIDArgumentOutOfRange(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		const huge = "99999999999999999999999"
		for _, c := range []struct {
			doc   string
			vars  map[string]any
			field string
		}{
			{`{ webhookDeliveries(where: {id: "` + huge + `"}) { totalCount } }`, nil, "where.id"},
			{`mutation($id: ID!) { disableWebhookEndpoint(id: $id) { id } }`, map[string]any{"id": huge}, "id"},
			{`mutation { deleteWebhookEndpoint(id: "x1") { id } }`, nil, "id"},
			{`mutation { createWebhookEndpoint(appID: "` + huge + `", input: {url: "https://x.example.com"}) { secret } }`, nil, "appID"},
			{`mutation { publishWebhookEvent(appID: "` + huge + `", eventType: "a.b", bizData: {}) { eventID } }`, nil, "appID"},
			{`mutation { sendTestWebhook(appID: "1", endpointID: "` + huge + `") { id } }`, nil, "endpointID"},
			{`mutation { resendFailedWebhookDeliveries(appID: "` + huge + `") }`, nil, "appID"},
			{`mutation { createOrder(input: {appID: "` + huge + `", orderNo: "X1", amount: "1.00"}) { id } }`, nil, "input.appID"},
			{`{ partnerApps(where: {idIn: ["1", "` + huge + `"]}) { totalCount } }`, nil, "where.idIn[1]"},
		} {
			e := a.GQL(t, c.doc, c.vars).Fails(t, "VALIDATION_FAILED")
			if e.Extensions["field"] != c.field || !strings.HasPrefix(e.Message, c.field+": must be an ID") ||
				strings.Contains(e.Message, "strconv") || strings.Contains(e.Message, "parsing") {
				t.Errorf("%s: %q field %v, want field %s and no strconv text", c.doc, e.Message, e.Extensions["field"], c.field)
			}
		}
		// An id in range that no row has stays NOT_FOUND.
		a.GQL(t, `mutation { deleteWebhookEndpoint(id: "9223372036854775807") { id } }`, nil).Fails(t, "NOT_FOUND")
	})
}

// TestUnreadableScalarNamesTheArgument: an Int64 or Time argument that
// cannot be read (wrong type, bad format, out of range), as a literal, a
// variable, inside an input, a filter or a list, or on a nested field, is
// VALIDATION_FAILED naming the argument as an unreadable ID is, never with
// strconv's or time's text.
func TestUnreadableScalarNamesTheArgument(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		// An app, so that its nested orders field is resolved.
		a.GQL(t, `mutation { createPartnerApp(input: {appName: "scalars", callbackURL: "https://first.example.com/h"}) { app { id } } }`, nil).OK(t, "createPartnerApp")
		nested := func(where string) string {
			return `{ partnerApps(first: 1) { edges { node { orders(first: 1, where: ` + where + `) { totalCount } } } } }`
		}
		for _, c := range []struct {
			doc    string
			vars   map[string]any
			field  string
			scalar string
		}{
			// Time.
			{`mutation { resendFailedWebhookDeliveries(since: "yesterday") }`, nil, "since", "Time"},
			{`mutation($s: Time) { resendFailedWebhookDeliveries(since: $s) }`, map[string]any{"s": 1763805600}, "since", "Time"},
			{`mutation($s: Time) { resendFailedWebhookDeliveries(since: $s) }`, map[string]any{"s": "2026-13-01"}, "since", "Time"},
			{`{ webhookDeliveries(where: {createTimeGT: "22/11/2026"}) { totalCount } }`, nil, "where.createTimeGT", "Time"},
			{`{ webhookDeliveries(where: {createTimeIn: ["2026-11-22", "now"]}) { totalCount } }`, nil, "where.createTimeIn[1]", "Time"},
			{`query($w: WebhookDeliveryWhereInput) { webhookDeliveries(where: $w) { totalCount } }`,
				map[string]any{"w": map[string]any{"and": []any{map[string]any{"createTimeLT": true}}}}, "where.and[0].createTimeLT", "Time"},
			{`mutation { createPartnerApp(input: {appName: "t", expireDate: "2027-02-29"}) { appSecret } }`, nil, "input.expireDate", "Time"},
			{createAppMutation, map[string]any{"in": map[string]any{"appName": "t", "expireDate": "next year"}}, "input.expireDate", "Time"},
			{nested(`{createTimeGT: "soon"}`), nil, "where.createTimeGT", "Time"},
			// Int64.
			{`{ orders(where: {amountMinor: "1e3"}) { totalCount } }`, nil, "where.amountMinor", "Int64"},
			{`{ orders(where: {amountMinorGT: 1.5}) { totalCount } }`, nil, "where.amountMinorGT", "Int64"},
			{`{ orders(where: {amountMinorIn: ["1", "9223372036854775808"]}) { totalCount } }`, nil, "where.amountMinorIn[1]", "Int64"},
			{`query($v: Int64!) { orders(where: {amountMinor: $v}) { totalCount } }`, map[string]any{"v": "9223372036854775808"}, "where.amountMinor", "Int64"},
			{`query($v: Int64!) { orders(where: {amountMinorLTE: $v}) { totalCount } }`, map[string]any{"v": true}, "where.amountMinorLTE", "Int64"},
			{`query($w: APIKeyWhereInput) { apiKeys(where: $w) { totalCount } }`, map[string]any{"w": map[string]any{"requestCountGT": "+5"}}, "where.requestCountGT", "Int64"},
			{nested(`{amountMinorGTE: "-"}`), nil, "where.amountMinorGTE", "Int64"},
			// An ID on a nested field is named among its own arguments too.
			{nested(`{id: "99999999999999999999999"}`), nil, "where.id", "ID"},
		} {
			e := a.GQL(t, c.doc, c.vars).Fails(t, "VALIDATION_FAILED")
			want := c.field + ": must be a"
			if c.scalar != "Time" {
				want += "n"
			}
			want += " " + c.scalar + ": "
			if e.Extensions["field"] != c.field || !strings.HasPrefix(e.Message, want) ||
				strings.Contains(e.Message, "strconv") || strings.Contains(e.Message, "parsing") {
				t.Errorf("%s %v: %q field %v, want field %s and a message starting %q", c.doc, c.vars, e.Message, e.Extensions["field"], c.field, want)
			}
		}
		// Readable values still pass.
		a.GQL(t, `mutation($s: Time) { resendFailedWebhookDeliveries(since: $s) }`, map[string]any{"s": "2026-11-22"}).OK(t, "resendFailedWebhookDeliveries")
		a.GQL(t, `query($v: Int64!) { orders(where: {amountMinor: $v}) { totalCount } }`, map[string]any{"v": "9223372036854775807"}).OK(t, "orders")
	})
}

// TestEndpointEventTypesNeverNull: an endpoint receiving every type reads
// eventTypes: [] whether its filter was never given (createWebhookEndpoint
// without it, createPartnerApp's callbackURL) or emptied by an update.
func TestEndpointEventTypesNeverNull(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		app := a.GQL(t, `mutation { createPartnerApp(input: {appName: "all", callbackURL: "https://first.example.com/h"}) { app { id } } }`, nil).OK(t, "createPartnerApp")
		appID := graphtest.Str(app, "app", "id")
		created := a.GQL(t, `mutation($app: ID!) { createWebhookEndpoint(appID: $app, input: {url: "https://second.example.com/h"}) { endpoint { id eventTypes } } }`,
			map[string]any{"app": appID}).OK(t, "createWebhookEndpoint")
		if v, ok := graphtest.Dig(created, "endpoint", "eventTypes").([]any); !ok || len(v) != 0 {
			t.Fatalf("created without a filter: eventTypes %#v, want []", graphtest.Dig(created, "endpoint", "eventTypes"))
		}
		r := a.GQL(t, `query($id: ID!) { partnerApps(where: {id: $id}) { edges { node { webhookEndpoints { id eventTypes } } } } }`,
			map[string]any{"id": appID}).OK(t, "partnerApps")
		eps := graphtest.Dig(r, "edges", 0, "node", "webhookEndpoints").([]any)
		if len(eps) != 2 {
			t.Fatalf("endpoints %v", eps)
		}
		for _, ep := range eps {
			if v, ok := graphtest.Dig(ep, "eventTypes").([]any); !ok || len(v) != 0 {
				t.Errorf("endpoint %s: eventTypes %#v, want []", graphtest.Str(ep, "id"), graphtest.Dig(ep, "eventTypes"))
			}
		}
		up := a.GQL(t, `mutation($id: ID!) { updateWebhookEndpoint(id: $id, input: {eventTypes: []}) { eventTypes } }`,
			map[string]any{"id": graphtest.Str(created, "endpoint", "id")}).OK(t, "updateWebhookEndpoint")
		if v, ok := graphtest.Dig(up, "eventTypes").([]any); !ok || len(v) != 0 {
			t.Fatalf("after an update to []: %#v", graphtest.Dig(up, "eventTypes"))
		}
	})
}

// TestUnknownEventTypeEchoBounded: an unknown or malformed event type in
// publishWebhookEvent, sendTestWebhook or an endpoint's eventTypes filter
// is named in the error by its first 64 characters only, quoted (a newline
// comes back escaped).
func TestUnknownEventTypeEchoBounded(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		app := a.GQL(t, `mutation { createPartnerApp(input: {appName: "echo", callbackURL: "https://first.example.com/h"}) { app { id } } }`, nil).OK(t, "createPartnerApp")
		vars := map[string]any{"app": graphtest.Str(app, "app", "id")}
		long := "invoice.issued" + strings.Repeat("x", 5000)
		badName := "Bad\nName" + strings.Repeat("y", 5000)
		for _, c := range []struct {
			doc, code, typ string
		}{
			{`mutation($app: ID!, $t: String!) { publishWebhookEvent(appID: $app, eventType: $t, bizData: {}) { eventID } }`, "NOT_FOUND", long},
			{`mutation($app: ID!, $t: String!) { publishWebhookEvent(appID: $app, eventType: $t, bizData: {}) { eventID } }`, "NOT_FOUND", "invoice.issued_" + strings.Repeat("z", 100)},
			{`mutation($app: ID!, $t: String!) { sendTestWebhook(appID: $app, eventType: $t) { id } }`, "NOT_FOUND", long},
			{`mutation($app: ID!, $t: String!) { createWebhookEndpoint(appID: $app, input: {url: "https://x.example.com", eventTypes: [$t]}) { secret } }`, "VALIDATION_FAILED", badName},
		} {
			vars["t"] = c.typ
			e := a.GQL(t, c.doc, vars).Fails(t, c.code)
			if len(e.Message) > 300 || !strings.Contains(e.Message, strconv.Quote(c.typ[:64])+"…") {
				t.Errorf("%s: message (%d bytes) %.400q, want the first 64 characters quoted and …", c.doc, len(e.Message), e.Message)
			}
			if strings.Contains(e.Message, "\n") {
				t.Errorf("%s: a newline came back raw: %q", c.doc, e.Message)
			}
		}
	})
}

// TestEmptyIdempotencyKeyRefused: publishWebhookEvent with
// idempotencyKey: "" is VALIDATION_FAILED naming it, and queues nothing
// (it was silently taken as no key); null or absent is no key.
func TestEmptyIdempotencyKeyRefused(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		app := a.GQL(t, `mutation { createPartnerApp(input: {appName: "keys", callbackURL: "https://first.example.com/h"}) { app { id } } }`, nil).OK(t, "createPartnerApp")
		appID := graphtest.Str(app, "app", "id")
		a.GQL(t, declareType, map[string]any{"name": "invoice.issued", "schema": invoiceTypeSchema}).OK(t, "createWebhookEventType")
		biz := map[string]any{"invoice_no": "INV-9", "lines": []any{}}
		e := a.GQL(t, publishEvent, map[string]any{"app": appID, "biz": biz, "key": ""}).Fails(t, "VALIDATION_FAILED")
		if e.Extensions["field"] != "idempotencyKey" || e.Message != "idempotencyKey: must not be empty; omit it for none" {
			t.Fatalf("empty key: %q field %v", e.Message, e.Extensions["field"])
		}
		count := `query($app: ID!) { webhookDeliveries(where: {hasAppWith: {id: $app}}) { totalCount } }`
		if n := graphtest.Num(a.GQL(t, count, map[string]any{"app": appID}).OK(t, "webhookDeliveries"), "totalCount"); n != 0 {
			t.Fatalf("a refused publish queued %d deliveries", n)
		}
		m := a.GQL(t, publishEvent, map[string]any{"app": appID, "biz": biz, "key": nil}).OK(t, "publishWebhookEvent")
		if graphtest.Str(m, "idempotencyKey") != "" || graphtest.Dig(m, "replayed") != false {
			t.Fatalf("null key: %v", m)
		}
	})
}

// TestDeleteEndpointReturnsWhatWasDeleted: deleteWebhookEndpoint returns
// the endpoint as it was when deleted, read under the app's lock after the
// changes before it, with its app and breaker (the row is gone: they were
// read from it before: both were INTERNAL errors).
func TestDeleteEndpointReturnsWhatWasDeleted(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		app := a.GQL(t, `mutation { createPartnerApp(input: {appName: "del", callbackURL: "https://first.example.com/h"}) { app { id } } }`, nil).OK(t, "createPartnerApp")
		appID := graphtest.Str(app, "app", "id")
		created := a.GQL(t, `mutation($app: ID!) { createWebhookEndpoint(appID: $app, input: {url: "https://second.example.com/h", eventTypes: ["order.paid"]}) { endpoint { id } } }`,
			map[string]any{"app": appID}).OK(t, "createWebhookEndpoint")
		id := graphtest.Str(created, "endpoint", "id")
		a.GQL(t, `mutation($id: ID!) { updateWebhookEndpoint(id: $id, input: {description: "last words", rateLimit: 7}) { id } }`, map[string]any{"id": id}).OK(t, "updateWebhookEndpoint")
		a.GQL(t, `mutation($id: ID!) { disableWebhookEndpoint(id: $id) { id } }`, map[string]any{"id": id}).OK(t, "disableWebhookEndpoint")
		del := a.GQL(t, `mutation($id: ID!) { deleteWebhookEndpoint(id: $id) { id url description eventTypes enabled rateLimit breaker app { id } } }`,
			map[string]any{"id": id}).OK(t, "deleteWebhookEndpoint")
		if graphtest.Str(del, "id") != id || graphtest.Str(del, "url") != "https://second.example.com/h" || graphtest.Str(del, "description") != "last words" ||
			graphtest.Num(del, "rateLimit") != 7 || graphtest.Dig(del, "enabled") != false || graphtest.Str(del, "breaker") != "CLOSED" || graphtest.Str(del, "app", "id") != appID {
			t.Fatalf("deleted %v", del)
		}
		a.GQL(t, `mutation($id: ID!) { deleteWebhookEndpoint(id: $id) { id } }`, map[string]any{"id": id}).Fails(t, "NOT_FOUND")
	})
}

// TestNULNamesTheField: a NUL in a string argument of the webhook
// mutations (literal, variable, inside an input or a list) is
// VALIDATION_FAILED naming where it is, as any other validation error.
func TestNULNamesTheField(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := graphtest.StartAdmin(t, b)
		app := a.GQL(t, `mutation { createPartnerApp(input: {appName: "nul", callbackURL: "https://first.example.com/h"}) { app { id } } }`, nil).OK(t, "createPartnerApp")
		appID := graphtest.Str(app, "app", "id")
		for _, c := range []struct {
			doc   string
			vars  map[string]any
			field string
		}{
			{`mutation($app: ID!) { createWebhookEndpoint(appID: $app, input: {url: "https://x.example.com", description: "a\u0000b"}) { secret } }`,
				map[string]any{"app": appID}, "input.description"},
			{`mutation($app: ID!, $in: CreateWebhookEndpointInput!) { createWebhookEndpoint(appID: $app, input: $in) { secret } }`,
				map[string]any{"app": appID, "in": map[string]any{"url": "https://x.example.com", "eventTypes": []any{"order.paid", "a\x00"}}}, "input.eventTypes[1]"},
			{`mutation($d: String) { updateWebhookEndpoint(id: 1, input: {description: $d}) { id } }`, map[string]any{"d": "\x00"}, "input.description"},
			{`mutation($app: ID!) { publishWebhookEvent(appID: $app, eventType: "a.b\u0000", bizData: {}) { eventID } }`, map[string]any{"app": appID}, "eventType"},
			{`mutation($app: ID!) { publishWebhookEvent(appID: $app, eventType: "a.b", bizData: {lines: [{sku: "\u0000"}]}) { eventID } }`, map[string]any{"app": appID}, "bizData.lines[0].sku"},
			{`mutation($app: ID!, $k: String) { publishWebhookEvent(appID: $app, eventType: "a.b", bizData: {}, idempotencyKey: $k) { eventID } }`,
				map[string]any{"app": appID, "k": "k\x00"}, "idempotencyKey"},
			{`mutation($app: ID!) { sendTestWebhook(appID: $app, eventType: "\u0000") { id } }`, map[string]any{"app": appID}, "eventType"},
			{`mutation { createWebhookEventType(name: "a.b", description: "x\u0000", schema: {}) { name } }`, nil, "description"},
		} {
			e := a.GQL(t, c.doc, c.vars).Fails(t, "VALIDATION_FAILED")
			if e.Extensions["field"] != c.field || !strings.HasPrefix(e.Message, c.field+": ") || !strings.Contains(e.Message, "NUL") {
				t.Errorf("%s: %q field %v, want field %s", c.doc, e.Message, e.Extensions["field"], c.field)
			}
		}
	})
}
