package demo

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/sku"
	"gatehouse/internal/partner"
	"gatehouse/rest/partnerclient"
)

func init() { register(25, seedInventory) }

// demoSkus are created once (by name) and then keep whatever stock
// deductions left them.
var demoSkus = []struct {
	name  string
	stock int64
}{
	{"Demo mug", 100},
	{"Demo T-shirt", 5},
	{"Demo sticker", 1000},
}

func seedInventory(ctx context.Context, e Env, b *strings.Builder) error {
	a := e.App
	skus := make([]*ent.Sku, 0, len(demoSkus))
	for _, d := range demoSkus {
		s, err := a.DB.Sku.Query().Where(sku.Name(d.name)).Order(ent.Asc(sku.FieldID)).First(ctx)
		if ent.IsNotFound(err) {
			s, err = a.Inventory.CreateSku(ctx, d.name, d.stock)
		}
		if err != nil {
			return fmt.Errorf("demo sku %q: %w", d.name, err)
		}
		skus = append(skus, s)
	}
	fmt.Fprintf(b, "# Stock deduction (signed like the order query; idempotent by biz_no; see docs/inventory.md)\n")
	for _, s := range skus {
		fmt.Fprintf(b, "sku_id %d: %s, stock %d\n", s.ID, s.Name, s.Stock)
	}
	sec, err := liveSecret(ctx, e)
	if err != nil {
		return err
	}
	bizNo := "DEMO-" + time.Now().UTC().Format("20060102-150405")
	deductURL := func(suffix string, skuID int, quantity int) string {
		return e.PublicURL + "/api/v1/inventory/deduct?" + url.Values{
			"biz_no":   {bizNo + suffix},
			"sku_id":   {strconv.Itoa(skuID)},
			"quantity": {strconv.Itoa(quantity)},
		}.Encode()
	}
	ready, err := partnerclient.Signer{AppKey: DemoAppKey, AppSecret: sec}.SignURL(deductURL("-A", skus[0].ID, 2))
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "\n# ready-made signed deduction of 2 × sku %d (valid once, until %s UTC):\n", skus[0].ID, time.Now().UTC().Add(partner.MaxClockSkew).Format(time.TimeOnly))
	fmt.Fprintf(b, "curl -s -X POST '%s'\n", ready)
	fmt.Fprintf(b, "\n# run this twice: the second reply is the stored result (header Idempotent-Replayed: true), nothing is deducted again\n")
	fmt.Fprintf(b, "curl -si -X POST \"$(./bin/gatehouse sign --app-key %s --app-secret '%s' '%s')\"\n", DemoAppKey, sec, deductURL("-B", skus[0].ID, 2))
	fmt.Fprintf(b, "# more than the stock: 409, code 5002, insufficient stock (a repeat then answers 409, code 5001, business failed)\n")
	fmt.Fprintf(b, "curl -s -X POST \"$(./bin/gatehouse sign --app-key %s --app-secret '%s' '%s')\"\n", DemoAppKey, sec, deductURL("-C", skus[1].ID, 6))
	return nil
}
