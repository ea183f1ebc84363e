package inventory_test

import (
	"strings"
	"testing"

	"gatehouse/internal/errs"
	"gatehouse/internal/inventory"
)

func TestParseDeduct(t *testing.T) {
	params := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(name string) (string, bool) { v, ok := m[name]; return v, ok }
	}
	ok := []struct {
		get  func(string) (string, bool)
		want inventory.DeductInput
	}{
		{params("biz_no", "B-1", "sku_id", "7", "quantity", "3"), inventory.DeductInput{BizNo: "B-1", SkuID: 7, Quantity: 3}},
		{params("biz_no", strings.Repeat("x", 64), "sku_id", "1", "quantity", "1000000"), inventory.DeductInput{BizNo: strings.Repeat("x", 64), SkuID: 1, Quantity: 1_000_000}},
		{params("biz_no", "with space ~!", "sku_id", "007", "quantity", "1", "sign_type", "MD5"), inventory.DeductInput{BizNo: "with space ~!", SkuID: 7, Quantity: 1}},
		{params("biz_no", "B", "sku_id", "9223372036854775807", "quantity", "1"), inventory.DeductInput{BizNo: "B", SkuID: 9223372036854775807, Quantity: 1}},
	}
	for _, c := range ok {
		got, err := inventory.ParseDeduct(c.get)
		if err != nil || got != c.want {
			t.Fatalf("ParseDeduct = %+v, %v; want %+v", got, err, c.want)
		}
	}
	bad := []struct {
		get   func(string) (string, bool)
		field string
	}{
		{params("sku_id", "1", "quantity", "1"), "biz_no"},
		{params("biz_no", "", "sku_id", "1", "quantity", "1"), "biz_no"},
		{params("biz_no", strings.Repeat("x", 65), "sku_id", "1", "quantity", "1"), "biz_no"},
		{params("biz_no", "café", "sku_id", "1", "quantity", "1"), "biz_no"},
		{params("biz_no", "tab\there", "sku_id", "1", "quantity", "1"), "biz_no"},
		{params("biz_no", "del\x7f", "sku_id", "1", "quantity", "1"), "biz_no"},
		{params("biz_no", "B", "quantity", "1"), "sku_id"},
		{params("biz_no", "B", "sku_id", "", "quantity", "1"), "sku_id"},
		{params("biz_no", "B", "sku_id", "0", "quantity", "1"), "sku_id"},
		{params("biz_no", "B", "sku_id", "-1", "quantity", "1"), "sku_id"},
		{params("biz_no", "B", "sku_id", "+1", "quantity", "1"), "sku_id"},
		{params("biz_no", "B", "sku_id", "1.0", "quantity", "1"), "sku_id"},
		{params("biz_no", "B", "sku_id", "1e3", "quantity", "1"), "sku_id"},
		{params("biz_no", "B", "sku_id", " 1", "quantity", "1"), "sku_id"},
		{params("biz_no", "B", "sku_id", "abc", "quantity", "1"), "sku_id"},
		{params("biz_no", "B", "sku_id", "9223372036854775808", "quantity", "1"), "sku_id"},
		{params("biz_no", "B", "sku_id", "99999999999999999999999", "quantity", "1"), "sku_id"},
		{params("biz_no", "B", "sku_id", "1"), "quantity"},
		{params("biz_no", "B", "sku_id", "1", "quantity", ""), "quantity"},
		{params("biz_no", "B", "sku_id", "1", "quantity", "0"), "quantity"},
		{params("biz_no", "B", "sku_id", "1", "quantity", "-5"), "quantity"},
		{params("biz_no", "B", "sku_id", "1", "quantity", "1000001"), "quantity"},
		{params("biz_no", "B", "sku_id", "1", "quantity", "2.5"), "quantity"},
		{params("biz_no", "B", "sku_id", "1", "quantity", "x"), "quantity"},
	}
	for i, c := range bad {
		_, err := inventory.ParseDeduct(c.get)
		if errs.KindOf(err) != errs.Validation || errs.Field(err) != c.field {
			t.Fatalf("case %d: ParseDeduct = %v, want a validation error on %s", i, err, c.field)
		}
	}
}
