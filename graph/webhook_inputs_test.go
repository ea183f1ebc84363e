package graph_test

import (
	"strings"
	"testing"

	"gatehouse/internal/testenv"
)

// TestIDArgumentOutOfRange: an ID argument that is no id (beyond 64 bits,
// not a number), as a literal, a variable or inside an input or filter, is
// VALIDATION_FAILED naming the argument, never strconv's text.
func TestIDArgumentOutOfRange(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		a := startAdmin(t, b)
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
			e := a.gql(t, c.doc, c.vars).fails(t, "VALIDATION_FAILED")
			if e.Extensions["field"] != c.field || !strings.HasPrefix(e.Message, c.field+": must be an ID") ||
				strings.Contains(e.Message, "strconv") || strings.Contains(e.Message, "parsing") {
				t.Errorf("%s: %q field %v, want field %s and no strconv text", c.doc, e.Message, e.Extensions["field"], c.field)
			}
		}
		// An id in range that no row has stays NOT_FOUND.
		a.gql(t, `mutation { deleteWebhookEndpoint(id: "9223372036854775807") { id } }`, nil).fails(t, "NOT_FOUND")
	})
}
