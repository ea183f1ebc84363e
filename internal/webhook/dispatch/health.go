package dispatch

import (
	"context"
	"fmt"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/deliveryattempt"
	"gatehouse/ent/webhookdelivery"
)

// HealthWindow is how far back an endpoint's health looks.
const HealthWindow = 24 * time.Hour

// HealthBucket counts an endpoint's attempts that started in one hour.
type HealthBucket struct {
	Start     time.Time
	Succeeded int
	Failed    int
}

// Health is an endpoint's record over the last HealthWindow: its attempts
// hour by hour (oldest first, 24 buckets, the last one the current hour)
// and the most recent failure, if any.
type Health struct {
	Buckets     []HealthBucket
	Succeeded   int
	Failed      int
	LastError   string
	LastErrorAt *time.Time
}

// SuccessRate is the share of attempts that succeeded (0-1), or nil when
// none was made: no attempt is not a failure.
func (h Health) SuccessRate() *float64 {
	n := h.Succeeded + h.Failed
	if n == 0 {
		return nil
	}
	r := float64(h.Succeeded) / float64(n)
	return &r
}

// succeeded tells whether an attempt counts as a success: a 2xx answer,
// the rule the dispatcher applies to mark a delivery SUCCESS.
func succeeded(status *int) bool { return status != nil && *status >= 200 && *status < 300 }

// EndpointHealth reads endpoint id's attempts of the last HealthWindow.
// Only two narrow columns are read and counted here, the same way on
// both databases (hour arithmetic differs between SQLite and Postgres).
func (s *Dispatcher) EndpointHealth(ctx context.Context, id int) (Health, error) {
	now := s.now()
	start := now.Truncate(time.Hour).Add(-HealthWindow + time.Hour)
	var rows []struct {
		StartedAt      time.Time `json:"started_at"`
		ResponseStatus *int      `json:"response_status"`
	}
	err := s.client.DeliveryAttempt.Query().
		Where(deliveryattempt.StartedAtGTE(start), deliveryattempt.HasDeliveryWith(webhookdelivery.EndpointID(id))).
		Select(deliveryattempt.FieldStartedAt, deliveryattempt.FieldResponseStatus).
		Scan(ctx, &rows)
	if err != nil {
		return Health{}, fmt.Errorf("endpoint health: %w", err)
	}
	h := Health{Buckets: make([]HealthBucket, int(HealthWindow/time.Hour))}
	for i := range h.Buckets {
		h.Buckets[i].Start = start.Add(time.Duration(i) * time.Hour)
	}
	for _, r := range rows {
		i := int(r.StartedAt.Sub(start) / time.Hour)
		if i < 0 || i >= len(h.Buckets) {
			continue // a clock step between replicas: outside the window
		}
		if succeeded(r.ResponseStatus) {
			h.Buckets[i].Succeeded++
			h.Succeeded++
		} else {
			h.Buckets[i].Failed++
			h.Failed++
		}
	}
	last, err := s.client.DeliveryAttempt.Query().
		Where(deliveryattempt.HasDeliveryWith(webhookdelivery.EndpointID(id)),
			deliveryattempt.Or(deliveryattempt.ResponseStatusIsNil(), deliveryattempt.ResponseStatusLT(200), deliveryattempt.ResponseStatusGTE(300))).
		Order(ent.Desc(deliveryattempt.FieldStartedAt), ent.Desc(deliveryattempt.FieldID)).
		First(ctx)
	switch {
	case ent.IsNotFound(err):
	case err != nil:
		return Health{}, fmt.Errorf("endpoint last error: %w", err)
	default:
		t := last.StartedAt
		h.LastErrorAt = &t
		h.LastError = last.Error
		if h.LastError == "" && last.ResponseStatus != nil {
			h.LastError = fmt.Sprintf("HTTP %d", *last.ResponseStatus)
		}
	}
	return h, nil
}
