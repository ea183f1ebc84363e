package inventory_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gatehouse/internal/errs"
	"gatehouse/internal/inventory"
	"gatehouse/internal/testenv"
)

func TestCreateSku(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		ctx := context.Background()

		ok := []struct {
			name, want string
			stock      int64
		}{
			{"Blue mug", "Blue mug", 10},
			{"  trimmed \t", "trimmed", 0},
			{strings.Repeat("a", 200), strings.Repeat("a", 200), inventory.MaxStock},
			{strings.Repeat("é", 100), strings.Repeat("é", 100), 3},
			{strings.Repeat("货", 200), strings.Repeat("货", 200), 4}, // 600 bytes: the limit counts characters
			{"x", "x", 1},
		}
		for _, c := range ok {
			s, err := svc.CreateSku(ctx, c.name, c.stock)
			if err != nil {
				t.Fatalf("CreateSku(%q, %d): %v", c.name, c.stock, err)
			}
			if s.ID <= 0 || s.Name != c.want || s.Stock != c.stock || s.UpdateTime.IsZero() {
				t.Fatalf("CreateSku(%q, %d) = %+v", c.name, c.stock, s)
			}
			if got := stockOf(t, db, s.ID); got != c.stock {
				t.Fatalf("stored stock %d, want %d", got, c.stock)
			}
		}

		bad := []struct {
			name  string
			stock int64
			field string
		}{
			{"", 1, "name"},
			{"   ", 1, "name"},
			{strings.Repeat("a", 201), 1, "name"},
			{strings.Repeat("货", 201), 1, "name"},
			{"bad\nname", 1, "name"},
			{"bad\x7fname", 1, "name"},
			{"bad\xffutf8", 1, "name"},
			{"ok", -1, "stock"},
			{"ok", inventory.MaxStock + 1, "stock"},
		}
		before, _ := db.Sku.Query().Count(ctx)
		for _, c := range bad {
			_, err := svc.CreateSku(ctx, c.name, c.stock)
			if errs.KindOf(err) != errs.Validation || errs.Field(err) != c.field {
				t.Fatalf("CreateSku(%q, %d) = %v, want a validation error on %s", c.name, c.stock, err, c.field)
			}
		}
		if after, _ := db.Sku.Query().Count(ctx); after != before {
			t.Fatalf("invalid input created SKUs: %d → %d", before, after)
		}
	})
}

func TestSetStock(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		svc, db := newService(t, b)
		ctx := context.Background()
		s := mustSku(t, svc, 5)

		got, err := svc.SetStock(ctx, s.ID, 42)
		if err != nil || got.ID != s.ID || got.Stock != 42 {
			t.Fatalf("SetStock = %+v, %v", got, err)
		}
		if stockOf(t, db, s.ID) != 42 {
			t.Fatal("stock not stored")
		}
		if got, err := svc.SetStock(ctx, s.ID, 0); err != nil || got.Stock != 0 {
			t.Fatalf("SetStock 0 = %+v, %v", got, err)
		}
		for _, id := range []int{0, -3, s.ID + 1000} {
			if _, err := svc.SetStock(ctx, id, 1); !errors.Is(err, inventory.ErrNotFound) {
				t.Fatalf("SetStock(%d) = %v, want ErrNotFound", id, err)
			}
		}
		for _, st := range []int64{-1, inventory.MaxStock + 1} {
			if _, err := svc.SetStock(ctx, s.ID, st); errs.KindOf(err) != errs.Validation || errs.Field(err) != "stock" {
				t.Fatalf("SetStock(stock %d) = %v, want a validation error", st, err)
			}
		}
		if stockOf(t, db, s.ID) != 0 {
			t.Fatal("refused SetStock changed the stock")
		}
		if got, err := svc.Sku(ctx, s.ID); err != nil || got.Stock != 0 {
			t.Fatalf("Sku = %+v, %v", got, err)
		}
		if _, err := svc.Sku(ctx, s.ID+1000); !errors.Is(err, inventory.ErrNotFound) {
			t.Fatalf("Sku(unknown) = %v", err)
		}
	})
}
