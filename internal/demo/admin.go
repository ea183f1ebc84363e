package demo

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
)

func init() { register(40, seedAdmin) }

// DemoAPIKey is the admin API key of the embedded demo (make run): a
// documented constant, so that the README's curl line works as printed.
// With Postgres the demo key is derived from the master key instead, so a
// demo seeded into a shared database carries no published key.
const DemoAPIKey = "ghk_demo-admin-key-for-local-use-only"

// DemoAPIKeyName names the demo's API key.
const DemoAPIKeyName = "demo"

// DemoAdminKey returns the demo API key for this configuration.
func DemoAdminKey(e Env) string {
	if e.App.Cfg.Embedded() {
		return DemoAPIKey
	}
	return "ghk_demo-" + base64.RawURLEncoding.EncodeToString(derived(e, "gatehouse demo admin API key"))
}

// PartnerAppsQuery is the demo's example query.
const PartnerAppsQuery = `{ partnerApps(first: 10, orderBy: {field: CREATE_TIME, direction: ASC}) { totalCount edges { node { id appName appKey status rateLimit expireDate callbackURL } } } }`

func seedAdmin(ctx context.Context, e Env, b *strings.Builder) error {
	key := DemoAdminKey(e)
	// Ensure creates the key, or enables it again: printing a key that does
	// not work would be worse than undoing a disable of the demo key.
	if _, err := e.App.APIKeys.Ensure(ctx, DemoAPIKeyName, key); err != nil {
		return fmt.Errorf("demo API key: %w", err)
	}
	fmt.Fprintf(b, "# GraphQL admin (API key in the X-API-Key header)\n")
	fmt.Fprintf(b, "api key:    %s\n", key)
	fmt.Fprintf(b, "playground: %s/  (paste the api key into the \"API key\" bar at the top of the page; it is sent as X-API-Key)\n", e.AdminURL)
	fmt.Fprintf(b, "\n# list partner apps:\n")
	fmt.Fprintf(b, "curl -s %s/graphql -H 'Content-Type: application/json' -H 'X-API-Key: %s' \\\n  -d '{\"query\":\"%s\"}'\n",
		e.AdminURL, key, strings.ReplaceAll(PartnerAppsQuery, `"`, `\"`))
	fmt.Fprintf(b, "\n# create another key (shown once):  ./bin/gatehouse apikey create --name ops\n")
	return nil
}
