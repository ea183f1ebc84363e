package publish_test

import (
	"context"
	"net/http"
	"testing"

	"gatehouse/ent/apikey"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
)

// TestPublishKeyRevocation: two replicas share the database (and Redis);
// a PUBLISHER key checked on both, then disabled on one, is refused by
// the other on its very next publish; both publish again once it is
// enabled, and refuse it again at once when the other replica disables it.
func TestPublishKeyRevocation(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		p := startPublish(t, b)
		replica := &publishEnv{Env: apptest.Start(t, b, func(c *config.Config) {
			c.Database.URL = p.App.Cfg.Database.URL
			c.Auth.MasterKeyB64 = p.App.Cfg.Auth.MasterKeyB64
			c.Webhooks.AllowPrivate = true
		}), appID: p.appID}
		ctx := context.Background()
		publish := func(e *publishEnv, key string) int {
			t.Helper()
			return e.post(t, "/api/events", key, p.event("invoice.issued", invoiceData)).Status
		}
		for _, e := range []*publishEnv{p, replica} {
			for range 3 {
				if s := publish(e, p.publisher); s != http.StatusCreated {
					t.Fatalf("publish: %d", s)
				}
			}
		}
		row, err := p.App.DB.Client.APIKey.Query().Where(apikey.Name("k-PUBLISHERinvoice.*")).Only(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.App.APIKeys.Disable(ctx, row.ID); err != nil {
			t.Fatal(err)
		}
		for _, e := range []*publishEnv{replica, p} {
			if s := publish(e, p.publisher); s != http.StatusUnauthorized {
				t.Fatalf("publish with a disabled key: %d, want 401", s)
			}
		}
		if _, err := replica.App.APIKeys.Enable(ctx, row.ID); err != nil {
			t.Fatal(err)
		}
		if s := publish(p, p.publisher); s != http.StatusCreated {
			t.Fatalf("publish with the key enabled again: %d", s)
		}
		if _, err := p.App.APIKeys.Disable(ctx, row.ID); err != nil {
			t.Fatal(err)
		}
		if s := publish(replica, p.publisher); s != http.StatusUnauthorized {
			t.Fatalf("publish on the other replica with the key disabled again: %d, want 401", s)
		}
	})
}
