package demo

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"gatehouse/ent"
	entorder "gatehouse/ent/order"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/webhook/sender"
)

func init() { register(50, seedWebhooks) }

// DemoCallbackURL is where the demo app's webhooks go: the receiver of
// `gatehouse webhook listen` on this machine. Loopback is allowed for the
// demo app only (serve --demo); every other app keeps the SSRF rule.
func DemoCallbackURL(e Env) string { return "http://" + e.App.Cfg.Demo.Receiver + "/hook" }

// DemoWebhookSecret is the demo app's webhook signing secret: derived from
// the master key, so that the banner can print it after any restart
// without a published constant.
func DemoWebhookSecret(e Env) string {
	return sender.SecretPrefix + base64.StdEncoding.EncodeToString(derived(e, "gatehouse demo webhook secret"))
}

// seedWebhooks makes sure the demo app calls back the local receiver and
// has an order to pay, and prints how to see a signed webhook arrive.
func seedWebhooks(ctx context.Context, e Env, b *strings.Builder) error {
	a := e.App
	app, err := a.Partners.GetByKey(ctx, DemoAppKey)
	if err != nil {
		return fmt.Errorf("demo webhooks: %w", err)
	}
	if app.CallbackURL == "" || (app.CallbackURL != DemoCallbackURL(e) && demoReceiverURL(app.CallbackURL)) {
		// A demo app seeded before it had a receiver, or with the receiver
		// of an earlier --demo-receiver: point it at this one. A callback
		// URL an operator set elsewhere is kept.
		u := DemoCallbackURL(e)
		if app, err = a.Partners.Update(ctx, app.ID, partner.UpdateInput{CallbackURL: &u}); err != nil {
			return fmt.Errorf("demo webhooks: %w", err)
		}
	}
	payable, err := payableOrder(ctx, e, app.ID)
	if err != nil {
		return err
	}
	// The webhook secret in force: after a rotation (the Playground's
	// rotate tab) the derived one is dead, and the receiver must verify
	// with the new one.
	secret, err := a.Partners.CurrentWebhookSecret(ctx, DemoAppKey)
	if err != nil {
		return fmt.Errorf("demo webhooks: %w", err)
	}
	same := secret == DemoWebhookSecret(e)
	sec, err := liveSecret(ctx, e)
	if err != nil {
		return err
	}
	key := DemoAdminKey(e)
	gql := func(query string) string {
		body, _ := json.Marshal(map[string]string{"query": query})
		return fmt.Sprintf("curl -s %s/graphql -H 'Content-Type: application/json' -H 'X-API-Key: %s' \\\n  -d '%s'\n",
			e.AdminURL, key, body)
	}
	fmt.Fprintf(b, "# Webhooks (Standard Webhooks signatures, retries 1/2/4/8/16 s, a breaker per endpoint; see docs/webhooks.md)\n")
	fmt.Fprintf(b, "# The demo app calls back %s (loopback is allowed for the demo app only).\n", app.CallbackURL)
	fmt.Fprintf(b, "# 1. in another terminal, start a receiver that verifies the signatures and prints each delivery:\n")
	if app.CallbackURL != DemoCallbackURL(e) {
		fmt.Fprintf(b, "#    (the demo app's callback URL was changed: run the receiver where it points, or set it back to %s)\n", DemoCallbackURL(e))
	}
	switch {
	case secret == "": // a demo app seeded before it had one
		fmt.Fprintf(b, "#    (the demo app has no webhook secret: rotateWebhookSecret(id: %d) makes one; without --secret nothing is verified)\n", app.ID)
		secret = "whsec_…"
	case !same:
		fmt.Fprintf(b, "#    (the demo app's webhook secret was rotated since the demo was seeded: this is the one in force now)\n")
	}
	fmt.Fprintf(b, "#    (it also serves the OAuth demo's callback page, %s)\n", DemoRedirectURI(e))
	fmt.Fprintf(b, "%s\n", ListenCommand(e, secret, sec))
	fmt.Fprintf(b, "# 2. pay order %s (CREATED): its order.paid webhook is queued in the same transaction and arrives at once:\n", payable)
	b.WriteString(gql(fmt.Sprintf(`mutation { payOrder(orderNo: "%s") { orderNo status payTime } }`, payable)))
	fmt.Fprintf(b, "#    or send a test webhook (event webhook.test):\n")
	b.WriteString(gql(fmt.Sprintf(`mutation { sendTestWebhook(appID: %d) { id eventType status } }`, app.ID)))
	fmt.Fprintf(b, "# 3. the delivery log with every attempt (request and response); with no receiver running you see the retries:\n")
	b.WriteString(gql(fmt.Sprintf(`{ partnerApps(where: {id: %d}) { edges { node { webhookBreaker webhookDeliveries(first: 10) { edges { node { id eventType status retryCount nextAttemptAt lastError attempts(first: 6) { edges { node { attemptNo responseStatus error durationMs } } } } } } } } } }`, app.ID)))
	fmt.Fprintf(b, "# 4. send every FAILED one again once the receiver runs (cancelWebhookDelivery(id) stops a pending one):\n")
	b.WriteString(gql(fmt.Sprintf(`mutation { resendFailedWebhookDeliveries(appID: %d) }`, app.ID)))
	return nil
}

// demoReceiverURL reports whether u is a demo receiver's callback URL
// (http://<loopback>:<port>/hook), as an earlier start set it.
func demoReceiverURL(u string) bool {
	p, err := url.Parse(u)
	if err != nil || p.Scheme != "http" || p.Path != "/hook" || p.RawQuery != "" {
		return false
	}
	ip := net.ParseIP(p.Hostname())
	return ip != nil && ip.IsLoopback()
}

// ListenCommand is the command that starts the demo receiver: webhooks
// verified with webhookSecret, and the OAuth callback page, whose exchange
// command authenticates the demo app with appSecret at this demo's token
// endpoint.
func ListenCommand(e Env, webhookSecret, appSecret string) string {
	cmd := fmt.Sprintf("./bin/gatehouse webhook listen --addr %s --secret '%s' --oauth-client-secret '%s'", e.App.Cfg.Demo.Receiver, webhookSecret, appSecret)
	if tok := e.PublicURL + "/oauth/token"; tok != DefaultTokenURL {
		cmd += fmt.Sprintf(" --oauth-token-url '%s'", tok)
	}
	return cmd
}

// The customers of the demo's example orders: an order of the payments
// and webhooks sections is found by its customer and status, so that each
// section prints one that its command can still change.
const (
	refundCustomer = "Dan Zhou" // PAID, for the refund example (SO1004 first)
	cancelCustomer = "Eve Sun"  // CREATED, for the cancel example (SO1005 first)
	payCustomer    = "Dana Xu"  // CREATED, made when no other is left to pay
	payAmount      = "42.00"    // of a made order to pay
	refundAmount   = "42.50"    // of a made order to refund
	cancelAmount   = "8.80"     // of a made order to cancel
)

// payableOrder returns a CREATED order of the demo app for the payOrder
// example (not one kept for the cancel example), creating one when every
// demo order was paid already (a restarted demo still has one).
func payableOrder(ctx context.Context, e Env, appID int) (string, error) {
	o, err := e.App.DB.Order.Query().
		Where(entorder.AppID(appID), entorder.StatusEQ(entorder.StatusCREATED), entorder.Or(entorder.CustomerNameIsNil(), entorder.CustomerNameNEQ(cancelCustomer))).
		Order(entorder.ByOrderNo()).First(ctx)
	switch {
	case err == nil:
		return o.OrderNo, nil
	case !ent.IsNotFound(err):
		return "", fmt.Errorf("demo webhooks: %w", err)
	}
	return newDemoOrder(ctx, e, appID, order.CreateInput{Amount: payAmount, CustomerName: payCustomer})
}

// exampleOrder returns the first order (by number) of the demo app with
// this customer and status, creating one when none is left: after the
// printed refund or cancel ran, the next start prints another order that
// the same command can change.
func exampleOrder(ctx context.Context, e Env, appID int, status order.Status, customer, amount string) (string, error) {
	o, err := e.App.DB.Order.Query().
		Where(entorder.AppID(appID), entorder.StatusEQ(entorder.Status(status)), entorder.CustomerName(customer)).
		Order(entorder.ByOrderNo()).First(ctx)
	switch {
	case err == nil:
		return o.OrderNo, nil
	case !ent.IsNotFound(err):
		return "", fmt.Errorf("demo order: %w", err)
	}
	return newDemoOrder(ctx, e, appID, order.CreateInput{Amount: amount, CustomerName: customer, Status: status})
}

// newDemoOrder creates in under the next free demo order number.
func newDemoOrder(ctx context.Context, e Env, appID int, in order.CreateInput) (string, error) {
	n, err := e.App.DB.Order.Query().Where(entorder.AppID(appID)).Count(ctx)
	if err != nil {
		return "", err
	}
	in.AppID = appID
	for i := n + 1; ; i++ {
		in.OrderNo = fmt.Sprintf("SO%d", 1000+i)
		_, err := e.App.Orders.Create(ctx, in)
		if errors.Is(err, order.ErrConflict) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("demo order %s: %w", in.OrderNo, err)
		}
		return in.OrderNo, nil
	}
}
