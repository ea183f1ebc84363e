package webhook_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
)

// TestConcurrentRotationsChain: concurrent rotateWebhookEndpointSecret
// calls on one endpoint take turns, so that the stored previous secret is
// the one the second-to-last rotation returned, never a secret that an
// earlier turn had already replaced (which would leave a secret handed to
// an operator neither signing nor verifying).
func TestConcurrentRotationsChain(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{})
		ctx := context.Background()
		appID, _ := e.newApp(t, "")
		ep, _, err := e.svc.CreateEndpoint(ctx, appID, webhook.EndpointInput{URL: ptr("https://example.com/h")})
		if err != nil {
			t.Fatal(err)
		}
		sealer, err := secret.NewSealer(e.masterKey)
		if err != nil {
			t.Fatal(err)
		}
		const rounds, n = 8, 12
		for round := range rounds {
			var (
				mu       sync.Mutex
				returned []string
				wg       sync.WaitGroup
			)
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, plain, err := e.svc.RotateEndpointSecret(ctx, ep.ID)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					returned = append(returned, plain)
					mu.Unlock()
				}()
			}
			wg.Wait()
			row, err := e.db.WebhookEndpoint.Get(ctx, ep.ID)
			if err != nil {
				t.Fatal(err)
			}
			cur, err := sealer.Open(row.Secret)
			if err != nil {
				t.Fatal(err)
			}
			prev, err := sealer.Open(*row.PreviousSecret)
			if err != nil {
				t.Fatal(err)
			}
			// The last rotation of the round replaced the secret the
			// second-to-last one returned: both are this round's.
			if !slices.Contains(returned, string(cur)) {
				t.Fatalf("round %d: the current secret is none of the round's", round)
			}
			if !slices.Contains(returned, string(prev)) {
				t.Fatalf("round %d: the previous secret is none of the round's: concurrent rotations overwrote each other", round)
			}
		}
	})
}
