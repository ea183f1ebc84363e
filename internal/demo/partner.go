package demo

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	entorder "gatehouse/ent/order"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/rest/partnerclient"
)

func init() { register(20, seedPartner) }

// The demo partner app. In embedded mode (make run) its secret is this
// documented constant, so that the README's copy-paste call works; with
// Postgres it is derived from the master key, so a demo seeded into a
// shared database does not carry a published secret.
const (
	DemoAppKey       = "demo-app"
	DemoAppSecret    = "demo-app-secret-for-local-use-only"
	demoOtherAppKey  = "demo-other-app"
	demoOtherOrderNo = "SO2001"
)

// DemoSecret returns the demo app's secret for this configuration.
func DemoSecret(e Env) string {
	if e.App.Cfg.Embedded() {
		return DemoAppSecret
	}
	return "demo-" + hex.EncodeToString(derived(e, "gatehouse demo partner app secret"))[:40]
}

var demoOrders = []order.CreateInput{
	{OrderNo: "SO1001", Amount: "99.90", Status: order.Paid, CustomerName: "Alice Chen", CustomerPhone: "13800000000", CustomerEmail: "alice@example.com"},
	{OrderNo: "SO1002", Amount: "15", CustomerName: "Bob Li", CustomerPhone: "13912345678", CustomerEmail: "bob@example.com"},
	{OrderNo: "SO1003", Amount: "250.05", Status: order.Refunded, CustomerName: "Carol Wu", CustomerPhone: "13700001111", CustomerEmail: "carol@example.com"},
	// For the refund and cancel examples (payments.go), so that SO1001 and
	// SO1002 keep serving the partner API and webhook examples.
	{OrderNo: DemoRefundOrderNo, Amount: "42.50", Status: order.Paid, CustomerName: refundCustomer, CustomerPhone: "13600002222", CustomerEmail: "dan@example.com"},
	{OrderNo: DemoCancelOrderNo, Amount: "8.80", CustomerName: cancelCustomer, CustomerPhone: "13500003333", CustomerEmail: "eve@example.com"},
}

func seedPartner(ctx context.Context, e Env, b *strings.Builder) error {
	a := e.App
	sec := DemoSecret(e)
	app, err := ensureApp(ctx, e, partner.CreateInput{AppName: "Demo partner", AppKey: DemoAppKey, AppSecret: sec, Scopes: []string{"orders:read"},
		CallbackURL: DemoCallbackURL(e), WebhookSecret: DemoWebhookSecret(e)})
	if err != nil {
		return err
	}
	other, err := ensureApp(ctx, e, partner.CreateInput{AppName: "Another partner", AppKey: demoOtherAppKey})
	if err != nil {
		return err
	}
	for _, in := range demoOrders {
		in.AppID = app.ID
		if _, err := a.Orders.Create(ctx, in); err != nil && !errors.Is(err, order.ErrConflict) {
			return fmt.Errorf("demo order %s: %w", in.OrderNo, err)
		}
	}
	if _, err := a.Orders.Create(ctx, order.CreateInput{AppID: other.ID, OrderNo: demoOtherOrderNo, Amount: "10.00"}); err != nil && !errors.Is(err, order.ErrConflict) {
		return fmt.Errorf("demo order %s: %w", demoOtherOrderNo, err)
	}
	// The secret in force now: after a rotation the seeded one is dead, and
	// every command below is signed with the live one.
	seeded := sec
	if sec, err = a.Partners.CurrentSecret(ctx, DemoAppKey); err != nil {
		return err
	}

	fmt.Fprintf(b, "# Partner API (signed requests; see docs/partner-api.md)\n")
	fmt.Fprintf(b, "app_key:    %s\n", DemoAppKey)
	fmt.Fprintf(b, "app_secret: %s\n", sec)
	if sec != seeded {
		fmt.Fprintf(b, "            (rotated since the demo was seeded: this is the secret in force now)\n")
	}
	// The orders the refund, cancel and pay examples below will name (made
	// now if the previous ones were used up), so that the list shows them.
	if _, err := exampleOrder(ctx, e, app.ID, order.Paid, refundCustomer, refundAmount); err != nil {
		return err
	}
	if _, err := exampleOrder(ctx, e, app.ID, order.Created, cancelCustomer, cancelAmount); err != nil {
		return err
	}
	if _, err := payableOrder(ctx, e, app.ID); err != nil {
		return err
	}
	orders, err := a.DB.Order.Query().Where(entorder.AppID(app.ID)).Order(entorder.ByOrderNo()).All(ctx)
	if err != nil {
		return err
	}
	var list []string
	for i, o := range orders {
		if i == 12 {
			list = append(list, fmt.Sprintf("… %d more", len(orders)-i))
			break
		}
		list = append(list, fmt.Sprintf("%s (%s)", o.OrderNo, o.Status)) // as they are now, not as seeded
	}
	fmt.Fprintf(b, "orders:     %s; %s belongs to another app (403, code 5003)\n", strings.Join(list, ", "), demoOtherOrderNo)
	signer := partnerclient.Signer{AppKey: DemoAppKey, AppSecret: sec}
	ready, err := signer.SignURL(e.PublicURL + "/api/v2/orders/query?order_no=SO1001")
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "\n# ready-made signed call (valid once, until %s UTC):\n", time.Now().UTC().Add(partner.MaxClockSkew).Format(time.TimeOnly))
	fmt.Fprintf(b, "curl -s '%s'\n", ready)
	fmt.Fprintf(b, "\n# sign with the CLI (a fresh timestamp and nonce each time):\n")
	fmt.Fprintf(b, "curl -s \"$(./bin/gatehouse sign --app-key %s --app-secret '%s' '%s/api/v1/orders/query?order_no=SO1001')\"\n", DemoAppKey, sec, e.PublicURL)
	fmt.Fprintf(b, "\n# sign in the shell: md5(secret + timestamp + nonce + sorted name+value pairs)\n")
	fmt.Fprintf(b, "%s\n", ShellSignedCurl(e.PublicURL, DemoAppKey, sec, "SO1001"))
	return nil
}

// ShellSignedCurl returns a POSIX shell snippet that signs and sends a v1
// order query (needs md5sum; on macOS use `md5 -q` instead).
func ShellSignedCurl(baseURL, appKey, appSecret, orderNo string) string {
	return fmt.Sprintf("TS=$(date +%%s%%3N); NONCE=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \\n'); "+
		"SIGN=$(printf '%%s' \"%s${TS}${NONCE}order_no%s\" | md5sum | cut -c1-32); "+
		"curl -s \"%s/api/v1/orders/query?app_key=%s&timestamp=$TS&nonce=$NONCE&order_no=%s&sign=$SIGN\"",
		appSecret, orderNo, baseURL, url.QueryEscape(appKey), url.QueryEscape(orderNo))
}

// ensureApp returns the app with in.AppKey, creating it when missing.
func ensureApp(ctx context.Context, e Env, in partner.CreateInput) (partner.App, error) {
	app, err := e.App.Partners.GetByKey(ctx, in.AppKey)
	if err == nil {
		return app, nil
	}
	if !errors.Is(err, partner.ErrNotFound) {
		return partner.App{}, err
	}
	app, _, err = e.App.Partners.Create(ctx, in)
	if errors.Is(err, partner.ErrConflict) { // another replica seeded it meanwhile
		return e.App.Partners.GetByKey(ctx, in.AppKey)
	}
	return app, err
}

// liveSecret is the demo app's secret in force now (the seeded one until an
// operator rotates it), so that no printed command is signed with a dead one.
func liveSecret(ctx context.Context, e Env) (string, error) {
	sec, err := e.App.Partners.CurrentSecret(ctx, DemoAppKey)
	if err != nil {
		return "", fmt.Errorf("demo app secret: %w", err)
	}
	return sec, nil
}
