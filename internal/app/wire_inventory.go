package app

import (
	"context"

	"gatehouse/internal/inventory"
)

// inventoryServices are the stock services, embedded in App.
type inventoryServices struct {
	// Inventory creates SKUs and sets stock (admin GraphQL) and deducts
	// stock (partner API).
	Inventory *inventory.Service
}

// wireInventory builds the inventory service (its deduction endpoint is
// in the partner API's table, partnerapi.PartnerAPI).
func (a *App) wireInventory(context.Context) error {
	a.Inventory = inventory.NewService(a.DB)
	return nil
}
