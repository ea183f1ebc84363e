package app

import (
	"context"
	"fmt"

	"github.com/go-chi/chi/v5"

	"gatehouse/internal/config"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/webhook"
	"gatehouse/rest"
)

// partnerServices are the partner API's services, embedded in App.
type partnerServices struct {
	// Partners manages partner apps (create, update, rotate); the admin
	// GraphQL calls it.
	Partners *partner.Service
	// PartnerGate runs the signed-request checks.
	PartnerGate *partner.Gate
	// Orders reads and creates orders.
	Orders *order.Service
	// Usage counts partner calls per app, version and day.
	Usage *partner.Usage
	// PartnerRoutes are extra signed endpoints (e.g. the stock deduction)
	// mounted next to the order query; add them before the handlers are built.
	PartnerRoutes []rest.PartnerRoute

	partnerLifecycle map[string]rest.VersionLifecycle
}

// wirePartner builds the partner API services (apps, signatures, orders).
func (a *App) wirePartner(ctx context.Context) error {
	svc, err := partner.NewService(a.DB.Client, a.Cfg.MasterKey,
		partner.WithWebhookSecretGen(webhook.NewSecret),
		partner.WithCallbackURLCheck(func(u string) error {
			return webhook.ValidateCallbackURL(u, a.Cfg.WebhookAllowPrivate)
		}),
	)
	if err != nil {
		return err
	}
	if a.partnerLifecycle, err = versionLifecycle(a.Cfg); err != nil {
		return err
	}
	a.Partners = svc
	a.PartnerGate = partner.NewGate(svc, a.KV)
	a.Orders = order.NewService(a.DB.Client)
	a.Usage = partner.NewUsage(a.DB.Client, a.Log, partner.DefaultUsageFlushInterval)
	a.Usage.Start()
	a.stops = append(a.stops, a.Usage.Close)
	return nil
}

// mountPartner mounts the signed partner API under /api/v{n}/.
func (a *App) mountPartner(r chi.Router) {
	h := rest.Partner{
		Gate:      a.PartnerGate,
		Orders:    a.Orders,
		Usage:     a.Usage,
		Lifecycle: a.partnerLifecycle,
		Log:       a.Log,
		Extra:     a.PartnerRoutes,
	}
	r.Mount(rest.PartnerMountPattern, h.Routes())
}

// versionLifecycle reads the deprecation settings.
func versionLifecycle(cfg config.Config) (map[string]rest.VersionLifecycle, error) {
	dep, err := config.ParseVersionDates(cfg.APIDeprecated)
	if err != nil {
		return nil, fmt.Errorf("GATEHOUSE_API_DEPRECATED: %w", err)
	}
	sun, err := config.ParseVersionDates(cfg.APISunset)
	if err != nil {
		return nil, fmt.Errorf("GATEHOUSE_API_SUNSET: %w", err)
	}
	out := map[string]rest.VersionLifecycle{}
	for v, t := range dep {
		lc := out[v]
		lc.Deprecated = t
		out[v] = lc
	}
	for v, t := range sun {
		lc := out[v]
		lc.Sunset = t
		out[v] = lc
	}
	return out, nil
}
