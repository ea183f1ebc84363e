package webhook

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"entgo.io/ent/dialect"

	"gatehouse/ent"
	"gatehouse/ent/partnerapp"
	"gatehouse/ent/webhookendpoint"
	"gatehouse/internal/errs"
	"gatehouse/internal/redact"
	"gatehouse/internal/store"
	"gatehouse/internal/webhook/dispatch"
	"gatehouse/internal/webhook/sender"
)

// Limits of an endpoint's fields (createWebhookEndpoint).
const (
	MaxEndpointURLLen     = 2048
	MaxEndpointDescLen    = 256
	MaxEndpointEventTypes = 50
	MaxEndpointRateLimit  = 10_000
	// SecretOverlap is how long an endpoint's replaced secret keeps
	// signing after a rotation (as for the app's secrets).
	SecretOverlap = 24 * time.Hour
)

// eventTypeName is the form of an event type name in a filter: 1-64 of
// lowercase letters, digits, '.', '_' and '-', starting with a letter.
var eventTypeName = regexp.MustCompile(`^[a-z][a-z0-9._-]{0,63}$`)

// EndpointInput creates an endpoint (nil and empty fields: defaults) or
// changes one (nil fields are left as they are).
type EndpointInput struct {
	URL         *string
	Description *string
	// EventTypes is the filter; empty: every event type. Names are checked
	// for their form only: a filter may name a type declared later.
	EventTypes *[]string
	// RateLimit caps deliveries per second (1-10000); ClearRateLimit
	// removes the cap.
	RateLimit      *int
	ClearRateLimit bool
	Enabled        *bool
	// RetrySchedule is the waits in seconds before each retry (see
	// sender.CheckSchedule); RetryPreset names one instead (PresetDefault goes
	// back to the default schedule). At most one of the two.
	RetrySchedule *[]int
	RetryPreset   *sender.RetryPreset
	// Headers are the custom request headers (see sender.CheckHeaders); an empty
	// map removes them.
	Headers *map[string]string
	// ClientCertificate and ClientKey (PEM, both or neither) are presented
	// to the receiver for mutual TLS (see sender.CheckClientCertificate);
	// ClearClientCertificate removes them.
	ClientCertificate, ClientKey *string
	ClearClientCertificate       bool
}

// CreateEndpoint adds an endpoint to app appID and returns it with its
// signing secret in plain text: the only time it is shown. An app has at
// most MaxEndpoints endpoints; its first one is what the deprecated
// PartnerApp.callbackURL and webhook secret speak for.
func (s *Service) CreateEndpoint(ctx context.Context, appID int, in EndpointInput) (*ent.WebhookEndpoint, string, error) {
	if in.URL == nil || *in.URL == "" {
		return nil, "", errs.Invalid("url", "is required")
	}
	plain := sender.NewSecret()
	sealed, err := s.sealer.Seal([]byte(plain))
	if err != nil {
		return nil, "", fmt.Errorf("seal endpoint secret: %w", err)
	}
	var out *ent.WebhookEndpoint
	err = store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		app, err := s.lockApp(ctx, tx, appID)
		if err != nil {
			return err
		}
		n, err := tx.WebhookEndpoint.Query().Where(webhookendpoint.AppID(appID)).Count(ctx)
		if err != nil {
			return err
		}
		if n >= MaxEndpoints {
			return &errs.Error{Kind: errs.Validation, Field: "appID", Msg: fmt.Sprintf(
				"app %s has %d webhook endpoints already, the most an app may have (delete one first)", app.AppKey, n)}
		}
		now := s.now()
		c := tx.WebhookEndpoint.Create().SetAppID(appID).SetSecret(sealed).SetCreateTime(now).SetUpdateTime(now)
		if err := s.applyInput(app.AppKey, in, c.Mutation()); err != nil {
			return err
		}
		if out, err = c.Save(ctx); err != nil {
			return err
		}
		if n == 0 { // the app's first endpoint: its deprecated fields speak for it
			return mirrorFirstEndpoint(ctx, tx.Client(), appID)
		}
		return nil
	})
	if err != nil {
		return nil, "", endpointErr("create webhook endpoint", err)
	}
	return out, plain, nil
}

// UpdateEndpoint changes the given fields of endpoint id. A new URL also
// takes the endpoint's waiting deliveries there.
func (s *Service) UpdateEndpoint(ctx context.Context, id int, in EndpointInput) (*ent.WebhookEndpoint, error) {
	return s.changeEndpoint(ctx, id, func(tx *ent.Tx, ep *ent.WebhookEndpoint, appKey string, u *ent.WebhookEndpointUpdateOne) error {
		if in.URL != nil && *in.URL == "" {
			return errs.Invalid("url", "must not be empty (deleteWebhookEndpoint removes an endpoint)")
		}
		if err := s.applyInput(appKey, in, u.Mutation()); err != nil {
			return err
		}
		if waits, ok := u.Mutation().RetrySchedule(); ok || u.Mutation().RetryScheduleCleared() {
			if err := retargetWaiting(ctx, tx.Client(), id, waits); err != nil {
				return err
			}
		}
		if in.URL != nil && *in.URL != ep.URL {
			return moveWaiting(ctx, tx.Client(), id, *in.URL, s.now())
		}
		return nil
	})
}

// SetEndpointEnabled enables or disables endpoint id. A disabled
// endpoint's deliveries are queued and held; they go out once it is
// enabled again.
func (s *Service) SetEndpointEnabled(ctx context.Context, id int, enabled bool) (*ent.WebhookEndpoint, error) {
	return s.UpdateEndpoint(ctx, id, EndpointInput{Enabled: &enabled})
}

// RotateEndpointSecret gives endpoint id a new signing secret and returns
// it in plain text (once); the replaced one keeps signing for
// SecretOverlap (a secret replaced before that stops at once: one
// previous secret is kept).
func (s *Service) RotateEndpointSecret(ctx context.Context, id int) (*ent.WebhookEndpoint, string, error) {
	plain := sender.NewSecret()
	sealed, err := s.sealer.Seal([]byte(plain))
	if err != nil {
		return nil, "", fmt.Errorf("seal endpoint secret: %w", err)
	}
	ep, err := s.changeEndpoint(ctx, id, func(_ *ent.Tx, ep *ent.WebhookEndpoint, _ string, u *ent.WebhookEndpointUpdateOne) error {
		u.SetSecret(sealed).SetPreviousSecret(ep.Secret).SetPreviousSecretExpiresAt(dbTime(s.opt.Now().Add(SecretOverlap)))
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return ep, plain, nil
}

// EndEndpointSecretOverlap ends the rotation overlap of endpoint id now:
// its previous secret stops signing (a secret that leaked). An endpoint
// without an overlap is returned unchanged.
func (s *Service) EndEndpointSecretOverlap(ctx context.Context, id int) (*ent.WebhookEndpoint, error) {
	return s.changeEndpoint(ctx, id, func(_ *ent.Tx, _ *ent.WebhookEndpoint, _ string, u *ent.WebhookEndpointUpdateOne) error {
		u.ClearPreviousSecret().ClearPreviousSecretExpiresAt()
		return nil
	})
}

// DeleteEndpoint deletes endpoint id and cancels its waiting deliveries
// (PENDING or RETRYING become CANCELLED; an attempt in flight is recorded
// but changes nothing). Its deliveries stay, without endpoint. The
// deleted endpoint is returned as it was when deleted: read under the
// app's lock (so a change committed just before is in it), with its app
// loaded (the row is gone afterwards, and the app and breaker fields of
// the reply are read from it).
func (s *Service) DeleteEndpoint(ctx context.Context, id int) (*ent.WebhookEndpoint, error) {
	var out *ent.WebhookEndpoint
	err := store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		ep, err := tx.WebhookEndpoint.Get(ctx, id)
		if err != nil {
			return err
		}
		if _, err := s.lockApp(ctx, tx, ep.AppID); err != nil {
			return err
		}
		if ep, err = tx.WebhookEndpoint.Query().Where(webhookendpoint.ID(id)).WithApp().Only(ctx); err != nil {
			return err // deleted meanwhile: NOT_FOUND
		}
		out = ep
		if err := deleteEndpoint(ctx, tx.Client(), id, s.now()); err != nil {
			return err
		}
		return mirrorFirstEndpoint(ctx, tx.Client(), ep.AppID)
	})
	if err != nil {
		return nil, endpointErr(fmt.Sprintf("delete webhook endpoint %d", id), err)
	}
	return out, nil
}

// changeEndpoint updates endpoint id as change says, in a transaction
// that keeps the app's deprecated fields equal to its first endpoint.
func (s *Service) changeEndpoint(ctx context.Context, id int,
	change func(tx *ent.Tx, ep *ent.WebhookEndpoint, appKey string, u *ent.WebhookEndpointUpdateOne) error,
) (*ent.WebhookEndpoint, error) {
	var out *ent.WebhookEndpoint
	err := store.WithTx(ctx, s.client, func(tx *ent.Tx) error {
		ep, err := tx.WebhookEndpoint.Get(ctx, id)
		if err != nil {
			return err
		}
		app, err := s.lockApp(ctx, tx, ep.AppID)
		if err != nil {
			return err
		}
		// Read it again under the app's lock: a concurrent change that
		// committed meanwhile (a rotation) is what change builds on.
		if ep, err = tx.WebhookEndpoint.Get(ctx, id); err != nil {
			return err
		}
		u := tx.WebhookEndpoint.UpdateOneID(id).SetUpdateTime(dbTime(s.now()))
		if err := change(tx, ep, app.AppKey, u); err != nil {
			return err
		}
		if out, err = u.Save(ctx); err != nil {
			return err
		}
		return mirrorFirstEndpoint(ctx, tx.Client(), ep.AppID)
	})
	if err != nil {
		return nil, endpointErr(fmt.Sprintf("change webhook endpoint %d", id), err)
	}
	return out, nil
}

// lockApp reads app id, locked on Postgres for the rest of the
// transaction, so that concurrent changes of its endpoints take turns
// (the count of MaxEndpoints, which endpoint is first). SQLite has one
// writer anyway.
func (s *Service) lockApp(ctx context.Context, tx *ent.Tx, id int) (*ent.PartnerApp, error) {
	q := tx.PartnerApp.Query().Where(partnerapp.ID(id))
	if s.db.Dialect == dialect.Postgres {
		q.ForUpdate()
	}
	app, err := q.Only(ctx)
	if ent.IsNotFound(err) {
		return nil, ErrAppNotFound
	}
	return app, err
}

// applyInput checks in and sets its fields on m.
func (s *Service) applyInput(appKey string, in EndpointInput, m *ent.WebhookEndpointMutation) error {
	if in.URL != nil {
		if len(*in.URL) > MaxEndpointURLLen {
			return errs.Invalid("url", "must be at most %d characters", MaxEndpointURLLen)
		}
		if err := s.CheckCallbackURL(appKey, *in.URL); err != nil {
			return errs.Invalid("url", "%v", err)
		}
		m.SetURL(*in.URL)
	}
	if in.Description != nil {
		d, err := errs.Text("description", *in.Description, MaxEndpointDescLen)
		if err != nil {
			return err
		}
		m.SetDescription(d)
	}
	if in.EventTypes != nil {
		types, err := normalizeEventTypes(*in.EventTypes)
		if err != nil {
			return err
		}
		m.SetEventTypes(types)
	}
	switch {
	case in.ClearRateLimit && in.RateLimit != nil:
		return errs.Invalid("rateLimit", "cannot be set and cleared at once")
	case in.ClearRateLimit:
		m.ClearRateLimit()
	case in.RateLimit != nil:
		if *in.RateLimit < 1 || *in.RateLimit > MaxEndpointRateLimit {
			return errs.Invalid("rateLimit", "must be between 1 and %d deliveries per second", MaxEndpointRateLimit)
		}
		m.SetRateLimit(*in.RateLimit)
	}
	if err := s.applyEgress(in, m); err != nil {
		return err
	}
	if in.Enabled != nil {
		// Either way the operator has decided: an endpoint disabled by
		// hand receives no new event, one enabled receives them again.
		m.SetEnabled(*in.Enabled)
		m.ClearAutoDisabledAt()
	}
	return nil
}

// normalizeEventTypes checks a filter's names and drops duplicates.
func normalizeEventTypes(in []string) ([]string, error) {
	if len(in) > MaxEndpointEventTypes {
		return nil, errs.Invalid("eventTypes", "at most %d", MaxEndpointEventTypes)
	}
	out := make([]string, 0, len(in))
	for _, t := range in {
		if !eventTypeName.MatchString(t) {
			return nil, errs.Invalid("eventTypes", "%s is not an event type name (1-64 of a-z, 0-9, '.', '_', '-', starting with a letter)", redact.Echo(t))
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// endpointErr maps storage errors to the package's: a missing endpoint is
// ErrEndpointNotFound; coded errors pass as they are.
func endpointErr(op string, err error) error {
	var ce *errs.Error
	switch {
	case ent.IsNotFound(err):
		return ErrEndpointNotFound
	case errors.As(err, &ce):
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}

// autoDisable is the dispatcher's DisableEndpoint: endpoint id disabled
// automatically at now, unless it is disabled already.
func (s *Service) autoDisable(ctx context.Context, id int, now time.Time) error {
	_, err := s.changeEndpoint(ctx, id, func(tx *ent.Tx, cur *ent.WebhookEndpoint, _ string, u *ent.WebhookEndpointUpdateOne) error {
		if !cur.Enabled {
			return dispatch.ErrNoLongerDue
		}
		u.SetEnabled(false).SetAutoDisabledAt(dbTime(now))
		return nil
	})
	return err
}
