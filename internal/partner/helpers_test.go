package partner

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

func newService(t testing.TB, db *store.DB, opts ...Option) *Service {
	t.Helper()
	s, err := NewService(db.Client, testKey, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var testKey = secret.RandomBytes(32)

func newClock(t time.Time) *testenv.Clock { return testenv.NewClock(t) }

// webhookSecrets returns the plaintext webhook secrets app id signs with
// now: the current one, then the previous one while its overlap lasts.
// Empty when the app has none.
func (s *Service) webhookSecrets(ctx context.Context, id int) ([]string, error) {
	row, err := s.client.PartnerApp.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("webhook secrets of app %d: %w", id, err)
	}
	var out []string
	if row.WebhookSecret != nil {
		p, err := s.sealer.Open(*row.WebhookSecret)
		if err != nil {
			return nil, fmt.Errorf("webhook secret of app %d: %w", id, err)
		}
		out = append(out, string(p))
	}
	if row.PreviousWebhookSecret != nil && row.PreviousWebhookSecretExpiresAt != nil && s.now().Before(*row.PreviousWebhookSecretExpiresAt) {
		p, err := s.sealer.Open(*row.PreviousWebhookSecret)
		if err != nil {
			return nil, fmt.Errorf("previous webhook secret of app %d: %w", id, err)
		}
		out = append(out, string(p))
	}
	return out, nil
}
