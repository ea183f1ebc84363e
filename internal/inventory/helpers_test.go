package inventory_test

import (
	"context"
	"gatehouse/internal/store/storetest"
	"testing"

	"gatehouse/ent"
	"gatehouse/ent/idempotencyrecord"
	"gatehouse/internal/inventory"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

func newService(t testing.TB, b testenv.Backend, opts ...inventory.Option) (*inventory.Service, *store.DB) {
	t.Helper()
	db := storetest.Open(t, b)
	return inventory.NewService(db, opts...), db
}

func mustSku(t testing.TB, svc *inventory.Service, stock int64) *ent.Sku {
	t.Helper()
	s, err := svc.CreateSku(context.Background(), "widget", stock)
	if err != nil {
		t.Fatalf("create sku: %v", err)
	}
	return s
}

func stockOf(t testing.TB, db *store.DB, id int) int64 {
	t.Helper()
	s, err := db.Sku.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get sku %d: %v", id, err)
	}
	return s.Stock
}

// recordOf returns the idempotency record of bizNo, or nil.
func recordOf(t testing.TB, db *store.DB, bizNo string) *ent.IdempotencyRecord {
	t.Helper()
	r, err := db.IdempotencyRecord.Query().Where(idempotencyrecord.BizNo(bizNo)).Only(context.Background())
	if ent.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("record %q: %v", bizNo, err)
	}
	return r
}

func recordCount(t testing.TB, db *store.DB) int {
	t.Helper()
	n, err := db.IdempotencyRecord.Query().Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}
