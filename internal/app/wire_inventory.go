package app

import (
	"context"

	"gatehouse/internal/inventory"
	"gatehouse/rest"
)

// inventoryServices are the stock services, embedded in App.
type inventoryServices struct {
	// Inventory creates SKUs and sets stock (admin GraphQL) and deducts
	// stock (partner API).
	Inventory *inventory.Service
}

// wireInventory builds the inventory service and adds the stock deduction
// to the signed partner routes that mountPartner mounts.
func (a *App) wireInventory(context.Context) error {
	a.Inventory = inventory.NewService(a.DB)
	a.PartnerRoutes = append(a.PartnerRoutes, rest.Inventory{Svc: a.Inventory, Log: a.Log}.Route())
	return nil
}
