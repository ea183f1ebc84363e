package webhook

import (
	"context"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/deliveryattempt"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/ent/webhookendpoint"
	"gatehouse/internal/errs"
)

// What a partner app sees of its own webhooks (the signed partner API and
// the portal): every lookup is scoped to the app, so another app's id is
// not found, exactly like an unknown one (and noted for operators: see
// foreign.go).

// Limits of a partner's delivery listing.
const (
	DefaultDeliveryPage = 20
	MaxDeliveryPage     = 100
)

// AppEndpoints lists app appID's endpoints, oldest first.
func (s *Service) AppEndpoints(ctx context.Context, appID int) ([]*ent.WebhookEndpoint, error) {
	return s.client.WebhookEndpoint.Query().Where(webhookendpoint.AppID(appID)).
		Order(ent.Asc(webhookendpoint.FieldID)).All(ctx)
}

// AppEndpoint is endpoint id if it belongs to app appID, else
// ErrEndpointNotFound (whether it exists for another app or not at all).
func (s *Service) AppEndpoint(ctx context.Context, appID, id int) (*ent.WebhookEndpoint, error) {
	ep, err := s.client.WebhookEndpoint.Query().
		Where(webhookendpoint.ID(id), webhookendpoint.AppID(appID)).Only(ctx)
	if ent.IsNotFound(err) {
		s.checkForeignEndpoint(ctx, appID, id)
		return nil, ErrEndpointNotFound
	}
	return ep, err
}

// DeliveryFilter selects an app's deliveries, newest first.
type DeliveryFilter struct {
	Status     string // "" any; else one of the statuses
	EventType  string
	EndpointID int // 0: any
	Since      time.Time
	// Before keeps the deliveries with a smaller id (the cursor of the
	// previous page: its last id); 0 starts at the newest.
	Before int
	Limit  int
}

// AppDeliveries lists app appID's deliveries that f selects, newest first,
// at most f.Limit (DefaultDeliveryPage when 0, at most MaxDeliveryPage), and
// whether more follow the last one.
func (s *Service) AppDeliveries(ctx context.Context, appID int, f DeliveryFilter) ([]*ent.WebhookDelivery, bool, error) {
	if f.Limit == 0 {
		f.Limit = DefaultDeliveryPage
	}
	if f.Limit < 1 || f.Limit > MaxDeliveryPage {
		return nil, false, errs.Invalid("limit", "must be from 1 to %d", MaxDeliveryPage)
	}
	q := s.client.WebhookDelivery.Query().Where(webhookdelivery.AppID(appID))
	if f.Status != "" {
		st := webhookdelivery.Status(f.Status)
		if webhookdelivery.StatusValidator(st) != nil {
			return nil, false, errs.Invalid("status", "must be one of PENDING, RETRYING, SUCCESS, FAILED, CANCELLED")
		}
		q.Where(webhookdelivery.StatusEQ(st))
	}
	if f.EventType != "" {
		q.Where(webhookdelivery.EventType(f.EventType))
	}
	if f.EndpointID != 0 {
		q.Where(webhookdelivery.EndpointID(f.EndpointID))
	}
	if !f.Since.IsZero() {
		q.Where(webhookdelivery.CreateTimeGTE(dbTime(f.Since)))
	}
	if f.Before != 0 {
		q.Where(webhookdelivery.IDLT(f.Before))
	}
	ds, err := q.Order(ent.Desc(webhookdelivery.FieldID)).Limit(f.Limit + 1).All(ctx)
	if err != nil {
		return nil, false, err
	}
	more := len(ds) > f.Limit
	if more {
		ds = ds[:f.Limit]
	}
	return ds, more, nil
}

// AppDelivery is delivery id with its attempts (in order) if it belongs to
// app appID, else ErrNotFound.
func (s *Service) AppDelivery(ctx context.Context, appID, id int) (*ent.WebhookDelivery, error) {
	d, err := s.client.WebhookDelivery.Query().
		Where(webhookdelivery.ID(id), webhookdelivery.AppID(appID)).
		WithAttempts(func(q *ent.DeliveryAttemptQuery) { q.Order(ent.Asc(deliveryattempt.FieldAttemptNo)) }).
		Only(ctx)
	if ent.IsNotFound(err) {
		s.checkForeignDelivery(ctx, appID, id)
		return nil, ErrNotFound
	}
	return d, err
}

// AppResend resends delivery id (Resend) if it belongs to app appID, else
// ErrNotFound.
func (s *Service) AppResend(ctx context.Context, appID, id int) (*ent.WebhookDelivery, error) {
	n, err := s.client.WebhookDelivery.Query().Where(webhookdelivery.ID(id), webhookdelivery.AppID(appID)).Count(ctx)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		s.checkForeignDelivery(ctx, appID, id)
		return nil, ErrNotFound
	}
	return s.Resend(ctx, id)
}
