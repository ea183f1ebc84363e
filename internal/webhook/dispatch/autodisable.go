package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/ent"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/ent/webhookendpoint"
	"gatehouse/internal/audit"
)

// AutoDisableAfter is how long an endpoint may fail every delivery (no
// success in between) before it is disabled.
const AutoDisableAfter = 5 * 24 * time.Hour

// AutoDisableMutation is the audit log's name for an automatic disable
// (there is no API key: APIKeyName is AutoDisableActor).
const (
	AutoDisableMutation = "autoDisableWebhookEndpoint"
	AutoDisableActor    = "gatehouse (automatic)"
)

// endpointsDisabledTotal counts endpoints disabled automatically; it
// exists at 0 from start (an alert watches its increase).
var endpointsDisabledTotal = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "gatehouse_webhook_endpoints_disabled_total",
	Help: "Webhook endpoints disabled automatically after every delivery failed for 5 days (no success in between).",
})

func init() { prometheus.MustRegister(endpointsDisabledTotal) }

// SetAudit makes AutoDisable record each endpoint it disables in a's
// audit log (wired at start; nil: no audit events).
func (s *Dispatcher) SetAudit(a *audit.Service) { s.audit.Store(a) }

// ErrNoLongerDue (from Config.DisableEndpoint): the endpoint was
// disabled, or succeeded, meanwhile.
var ErrNoLongerDue = errors.New("endpoint no longer due for auto-disable")

// AutoDisable disables every enabled endpoint whose deliveries have all
// FAILED for AutoDisableAfter: one of its deliveries became FAILED at least
// that long ago and none succeeded since. Each is recorded in the audit
// log, logged at WARN and counted; its new deliveries are held until an
// operator enables it (enableWebhookEndpoint), and then go out. It returns
// how many it disabled. The retention job runs it every
// Options.RetentionEvery; replicas racing disable each endpoint once.
func (s *Dispatcher) AutoDisable(ctx context.Context) (int, error) {
	now := s.now()
	cutoff := now.Add(-AutoDisableAfter)
	eps, err := s.client.WebhookEndpoint.Query().Where(
		webhookendpoint.Enabled(true),
		webhookendpoint.HasDeliveriesWith(webhookdelivery.StatusEQ(StatusFailed), webhookdelivery.UpdateTimeLTE(cutoff)),
	).All(ctx)
	if err != nil {
		return 0, fmt.Errorf("auto-disable: candidates: %w", err)
	}
	n := 0
	for _, ep := range eps {
		since, due, err := s.failingSince(ctx, ep, cutoff)
		if err != nil {
			return n, err
		}
		if !due {
			continue
		}
		err = s.opt.DisableEndpoint(ctx, ep.ID, now)
		if errors.Is(err, ErrNoLongerDue) || ent.IsNotFound(err) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("auto-disable endpoint %d: %w", ep.ID, err)
		}
		n++
		endpointsDisabledTotal.Inc()
		s.log.Warn("webhook endpoint disabled: every delivery failed for 5 days; its deliveries are held until it is enabled (enableWebhookEndpoint)",
			"endpoint_id", ep.ID, "app_id", ep.AppID, "failing_since", since.UTC().Format(time.RFC3339))
		if a := s.audit.Load(); a != nil {
			_ = a.Record(ctx, audit.Event{
				Time: now, APIKeyName: AutoDisableActor, Mutation: AutoDisableMutation,
				TargetType: "WebhookEndpoint", TargetID: strconv.Itoa(ep.ID), Outcome: audit.Success,
			})
		}
	}
	return n, nil
}

// failingSince says whether endpoint ep has failed every delivery since
// at least cutoff: the latest delivery that became FAILED by cutoff, with
// no SUCCESS after it. since is that failure's time. Only failures after
// the endpoint was last changed count: an operator who enables it again
// (or changes its URL) gives it a fresh AutoDisableAfter, rather than
// having it disabled again at the next check for the failures before.
func (s *Dispatcher) failingSince(ctx context.Context, ep *ent.WebhookEndpoint, cutoff time.Time) (since time.Time, due bool, err error) {
	id := ep.ID
	f, err := s.client.WebhookDelivery.Query().Where(
		webhookdelivery.EndpointID(id), webhookdelivery.StatusEQ(StatusFailed), webhookdelivery.UpdateTimeLTE(cutoff),
		webhookdelivery.UpdateTimeGTE(ep.UpdateTime),
	).Order(ent.Desc(webhookdelivery.FieldUpdateTime)).First(ctx)
	if ent.IsNotFound(err) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("auto-disable endpoint %d: %w", id, err)
	}
	ok, err := s.client.WebhookDelivery.Query().Where(
		webhookdelivery.EndpointID(id), webhookdelivery.StatusEQ(StatusSuccess), webhookdelivery.UpdateTimeGT(f.UpdateTime),
	).Exist(ctx)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("auto-disable endpoint %d: %w", id, err)
	}
	return f.UpdateTime, !ok, nil
}
