package webhook_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"gatehouse/internal/secret"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/dispatch"
)

// TestOptionsSettingsHaveNoDefault: the options that are settings
// (RetryBase, PerApp, Retention) take no default of the service: left
// zero or made negative, NewService refuses them, so a caller that forgot
// to pass the configuration fails at start, not with numbers of its own.
func TestOptionsSettingsHaveNoDefault(t *testing.T) {
	db := storetest.Open(t, testenv.Backend{Name: "sqlite"})
	for name, opt := range map[string]webhook.Options{
		"nothing":            {},
		"no retry base":      {PerApp: setting.PerApp},
		"no per-app cap":     {RetryBase: setting.RetryBase},
		"negative retention": {RetryBase: setting.RetryBase, PerApp: setting.PerApp, Retention: -1},
	} {
		if _, err := webhook.NewService(db, secret.RandomBytes(32), slog.New(slog.DiscardHandler), opt); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := webhook.NewService(db, secret.RandomBytes(32), slog.New(slog.DiscardHandler), withSettings(webhook.Options{})); err != nil {
		t.Fatalf("the settings' defaults: %v", err)
	}
}

// TestRetentionZeroKeepsForever: Retention 0 is GATEHOUSE_WEBHOOK_RETENTION's
// 0, as it is: the retention job runs (it purges an old idempotency key)
// and deletes no final delivery, however old.
func TestRetentionZeroKeepsForever(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{})
		appID, _ := e.newApp(t, "")
		// Only the replica below runs the job: newEnv's, with the
		// setting's retention, stops before anything old is there.
		if err := e.svc.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		forever := e.opt
		forever.Retention, forever.RetentionEvery = 0, 20*time.Millisecond
		kept := e.seedAged(t, appID, 3, dispatch.StatusSuccess, time.Now().Add(-100*setting.Retention))
		ctx := context.Background()
		if err := e.db.WebhookPublication.Create().SetAppID(appID).SetIdempotencyKey("old").SetEventID("msg_old").
			SetEventType("test.aged").SetBizData("{}").SetCreateTime(time.Now().Add(-100 * webhook.IdempotencyWindow)).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		svc, err := webhook.NewService(e.db, e.masterKey, slog.New(slog.DiscardHandler), forever)
		if err != nil {
			t.Fatal(err)
		}
		svc.Start()
		t.Cleanup(func() { _ = svc.Close(context.Background()) })
		waitFor(t, 10*time.Second, func() bool { return e.db.WebhookPublication.Query().CountX(ctx) == 0 },
			func() string { return "the retention job did not run" })
		if d, a := e.counts(t); d != len(kept) || a != 2*len(kept) {
			t.Fatalf("%d deliveries and %d attempts left, want all %d and %d", d, a, len(kept), 2*len(kept))
		}
	})
}
