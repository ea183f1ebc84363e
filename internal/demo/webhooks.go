package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

func init() { register(50, seedWebhooks) }

// seedWebhooks seeds nothing: it prints the GraphQL calls that make the
// demo app receive an order.paid webhook and show its delivery log.
func seedWebhooks(ctx context.Context, e Env, b *strings.Builder) error {
	app, err := e.App.Partners.GetByKey(ctx, DemoAppKey)
	if err != nil {
		return fmt.Errorf("demo webhooks: %w", err)
	}
	key := DemoAdminKey(e)
	gql := func(query string) string {
		body, _ := json.Marshal(map[string]string{"query": query})
		return fmt.Sprintf("curl -s %s/graphql -H 'Content-Type: application/json' -H 'X-API-Key: %s' \\\n  -d '%s'\n",
			e.AdminURL, key, body)
	}
	fmt.Fprintf(b, "# Webhooks (order.paid, Standard Webhooks signatures, retries 1/2/4/8/16 s; see docs/webhooks.md)\n")
	if app.CallbackURL == "" {
		fmt.Fprintf(b, "# 1. give the demo app a callback URL. A receiver on this machine needs the service started with\n")
		fmt.Fprintf(b, "#    GATEHOUSE_WEBHOOK_ALLOW_PRIVATE=true make run   (loopback is refused by default: SSRF guard).\n")
		fmt.Fprintf(b, "#    With nothing listening on :9099 you can watch the attempts fail and the retries back off.\n")
	} else {
		fmt.Fprintf(b, "# 1. the demo app calls back %s; change it with:\n", app.CallbackURL)
	}
	b.WriteString(gql(fmt.Sprintf(`mutation { updatePartnerApp(id: %d, input: {callbackURL: "http://127.0.0.1:9099/hook"}) { id callbackURL } }`, app.ID)))
	fmt.Fprintf(b, "# 2. pay order SO1002 (CREATED): its order.paid webhook is queued in the same transaction:\n")
	b.WriteString(gql(`mutation { payOrder(orderNo: "SO1002") { orderNo status payTime } }`))
	fmt.Fprintf(b, "# 3. the delivery log with every attempt (request and response):\n")
	b.WriteString(gql(fmt.Sprintf(`{ webhookDeliveries(first: 10, where: {appID: %d}) { edges { node { id eventType status retryCount lastError attempts(first: 6) { edges { node { attemptNo responseStatus error durationMs } } } } } } }`, app.ID)))
	fmt.Fprintf(b, "# 4. send one again, or every FAILED one:\n")
	b.WriteString(gql(`mutation { resendWebhookDelivery(id: 1) { id status } }`))
	b.WriteString(gql(fmt.Sprintf(`mutation { resendFailedWebhookDeliveries(appID: %d) }`, app.ID)))
	fmt.Fprintf(b, "# the webhook secret is shown once, by createPartnerApp or rotateWebhookSecret(id: %d).\n", app.ID)
	return nil
}
