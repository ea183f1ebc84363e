package webhook

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/ent/webhookdelivery"
	"gatehouse/ent/webhookendpoint"
	"gatehouse/internal/httpx"
)

// A partner (the signed API or the portal) that names another app's
// endpoint or delivery is answered exactly as for an id nobody has; but an
// operator wants to know an app is probing others' ids. Only on that
// failure path is the id looked up unscoped, to tell the two apart.

var foreignIDs = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "gatehouse_partner_foreign_ids_total",
	Help: "Partner calls (signed API or portal) that named another app's webhook endpoint or delivery; answered as not found.",
}, []string{"kind"})

func init() {
	prometheus.MustRegister(foreignIDs)
	for _, k := range []string{"endpoint", "delivery"} {
		foreignIDs.WithLabelValues(k)
	}
}

// foreignWarnEvery is how often one app's probing is named in a WARN.
const foreignWarnEvery = time.Minute

// foreignKey is what Service.foreignWarned remembers a WARN by.
type foreignKey struct {
	app  int
	kind string
}

// noteForeign counts and (at most once a minute per app and kind) logs that app
// appID named kind id, which belongs to app owner.
func (s *Service) noteForeign(ctx context.Context, kind string, appID, id, owner int) {
	foreignIDs.WithLabelValues(kind).Inc()
	now := s.opt.Now()
	k := foreignKey{appID, kind}
	if last, ok := s.foreignWarned.Load(k); ok && now.Sub(last.(time.Time)) < foreignWarnEvery {
		return
	}
	s.foreignWarned.Store(k, now)
	s.log.WarnContext(ctx, "partner: an app named another app's webhook "+kind+" (answered as not found)",
		"app_id", appID, "kind", kind, "id", id, "owner_app_id", owner, "request_id", httpx.GetRequestID(ctx))
}

// checkForeignEndpoint notes endpoint id if another app owns it.
func (s *Service) checkForeignEndpoint(ctx context.Context, appID, id int) {
	ep, err := s.client.WebhookEndpoint.Query().Where(webhookendpoint.ID(id)).Select(webhookendpoint.FieldAppID).Only(ctx)
	if err == nil && ep.AppID != appID {
		s.noteForeign(ctx, "endpoint", appID, id, ep.AppID)
	}
}

// checkForeignDelivery notes delivery id if another app owns it.
func (s *Service) checkForeignDelivery(ctx context.Context, appID, id int) {
	d, err := s.client.WebhookDelivery.Query().Where(webhookdelivery.ID(id)).Select(webhookdelivery.FieldAppID).Only(ctx)
	if err == nil && d.AppID != appID {
		s.noteForeign(ctx, "delivery", appID, id, d.AppID)
	}
}
