package app

import (
	"context"
	"fmt"

	"github.com/go-chi/chi/v5"

	"gatehouse/internal/config"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/webhook/sender"
	"gatehouse/rest/partnerapi"
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
	// APIVersions are the partner API's versions and their lifecycle
	// (GATEHOUSE_API_RELEASED, GATEHOUSE_API_DEPRECATED, GATEHOUSE_API_SUNSET).
	APIVersions partner.Versions
}

// wirePartner builds the partner API services (apps, signatures, orders).
func (a *App) wirePartner(ctx context.Context) error {
	svc, err := partner.NewService(a.DB.Client, a.Cfg.MasterKey,
		partner.WithWebhookSecretGen(sender.NewSecret),
		// a.Webhooks is wired after this service, before any call.
		partner.WithCallbackURLCheck(func(appKey, u string) error { return a.Webhooks.CheckCallbackURL(appKey, u) }),
	)
	if err != nil {
		return err
	}
	a.Partners = svc
	a.PartnerGate = partner.NewGate(svc, a.Admission)
	a.Orders = order.NewService(a.DB)
	a.Usage = partner.NewUsage(a.DB.Client, a.Log, partner.DefaultUsageFlushInterval)
	a.Usage.Start()
	a.stops = append(a.stops, a.Usage.Close)
	return nil
}

// mountPartner mounts the signed partner API under /api/v{n}/.
func (a *App) mountPartner(r chi.Router) {
	h := partnerapi.Partner{
		Gate:      a.PartnerGate,
		Orders:    a.Orders,
		Inventory: a.Inventory,
		Usage:     a.Usage,
		Webhooks:  a.Webhooks,
		Versions:  a.APIVersions,
		Log:       a.Log,
	}
	r.Mount(partnerapi.PartnerMountPattern, h.Routes())
}

// apiVersions checks the version lifecycle settings against the versions
// this build serves (partnerapi.PartnerAPI), naming every problem at once.
func apiVersions(cfg config.Config) (partner.Versions, error) {
	dep, err := config.ParseVersionDates(cfg.API.Deprecated)
	if err != nil {
		return nil, fmt.Errorf("GATEHOUSE_API_DEPRECATED: %w", err)
	}
	sun, err := config.ParseVersionDates(cfg.API.Sunset)
	if err != nil {
		return nil, fmt.Errorf("GATEHOUSE_API_SUNSET: %w", err)
	}
	rel, err := config.ParseVersionDates(cfg.API.Released)
	if err != nil {
		return nil, fmt.Errorf("GATEHOUSE_API_RELEASED: %w", err)
	}
	return partner.NewVersions(partnerapi.PartnerServed(), partner.Lifecycle{Deprecated: dep, Sunset: sun, Released: rel})
}
