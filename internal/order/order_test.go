package order

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/errs"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
)

func TestParseAmount(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"99.90": 9990, "99.9": 9990, "100": 10000, "0": 0, "0.05": 5, "0.5": 50, "007.01": 701,
		"9999999999999.99": 999999999999999,
	} {
		if got, err := ParseAmount(in); err != nil || got != want {
			t.Errorf("ParseAmount(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", ".", "1.", ".5", "-1", "+1", "1.234", "1e3", "1,00", " 1", "1 ", "0x10", "NaN", "99.9O", "10000000000000", "١٢"} {
		if _, err := ParseAmount(in); errs.KindOf(err) != errs.Validation || errs.Field(err) != "amount" {
			t.Errorf("ParseAmount(%q): %v, want a validation error", in, err)
		}
	}
}

func TestFormatAmount(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]string{0: "0.00", 5: "0.05", 50: "0.50", 9990: "99.90", 10000: "100.00", 123456789: "1234567.89", -5: "-0.05"} {
		if got := FormatAmount(in); got != want {
			t.Errorf("FormatAmount(%d) = %q, want %q", in, got, want)
		}
		if b, _ := json.Marshal(Amount(in)); string(b) != want {
			t.Errorf("JSON of %d = %s", in, b)
		}
	}
}

func TestMasks(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"13800000000": "138****0000", "12345678": "123****5678", "1234567": "****67", "123": "****", "": ""} {
		if got := MaskPhone(in); got != want {
			t.Errorf("MaskPhone(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"alice@example.com": "a***@example.com", "é@x.cn": "é***@x.cn", "@x": "***", "nope": "***", "": ""} {
		if got := MaskEmail(in); got != want {
			t.Errorf("MaskEmail(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseQuery(t *testing.T) {
	t.Parallel()
	from := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	q, err := ParseQuery(from(map[string]string{"order_no": "SO1"}))
	if err != nil || q != (Query{OrderNo: "SO1", Page: 1, PageSize: 20}) {
		t.Fatalf("defaults: %+v %v", q, err)
	}
	q, err = ParseQuery(from(map[string]string{"order_no": "订单", "page": "3", "page_size": "100"}))
	if err != nil || q != (Query{OrderNo: "订单", Page: 3, PageSize: 100}) {
		t.Fatalf("explicit: %+v %v", q, err)
	}
	for _, m := range []map[string]string{
		{}, {"order_no": ""}, {"order_no": strings.Repeat("x", 65)}, {"order_no": "a\x00"}, {"order_no": "\xff"},
		{"order_no": "a", "page": "0"}, {"order_no": "a", "page": "x"}, {"order_no": "a", "page": " 1"}, {"order_no": "a", "page": "1234567890"},
		{"order_no": "a", "page_size": "0"}, {"order_no": "a", "page_size": "101"}, {"order_no": "a", "page_size": ""},
	} {
		if _, err := ParseQuery(from(m)); errs.KindOf(err) != errs.Validation {
			t.Errorf("%v: %v, want a validation error", m, err)
		}
	}
}

func TestCreateAndQuery(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		db := storetest.Open(t, b)
		ctx := context.Background()
		mk := func(key string) int {
			return db.PartnerApp.Create().SetAppName(key).SetAppKey(key).SetSecret([]byte{1}).SaveX(ctx).ID
		}
		a1, a2 := mk("a1"), mk("a2")
		s := NewService(db)
		now := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
		s.SetClock(func() time.Time { return now })
		o, err := s.Create(ctx, CreateInput{AppID: a1, OrderNo: "SO1", Amount: "99.9", CustomerName: " Ann ", CustomerPhone: "+86 138-0000-0000", CustomerEmail: "ann@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		if o.Amount != 9990 || o.Status != Created || o.PayTime != nil || !o.CreateTime.Equal(now.Truncate(time.Millisecond)) || o.CustomerName != "Ann" {
			t.Fatalf("created %+v", o)
		}
		paid, err := s.Create(ctx, CreateInput{AppID: a1, OrderNo: "SO2", Amount: "1", Status: Paid})
		if err != nil || paid.PayTime == nil {
			t.Fatalf("paid order: %+v %v", paid, err)
		}
		if _, err := s.Create(ctx, CreateInput{AppID: a2, OrderNo: "SO1", Amount: "1"}); !errors.Is(err, ErrConflict) {
			t.Fatalf("duplicate number: %v", err)
		}
		for name, in := range map[string]CreateInput{
			"unknown app":       {AppID: a2 + 100, OrderNo: "X1", Amount: "1"},
			"bad amount":        {AppID: a1, OrderNo: "X2", Amount: "1.001"},
			"blank number":      {AppID: a1, OrderNo: "", Amount: "1"},
			"space in number":   {AppID: a1, OrderNo: "X 3", Amount: "1"},
			"bad status":        {AppID: a1, OrderNo: "X4", Amount: "1", Status: "LOST"},
			"bad email":         {AppID: a1, OrderNo: "X6", Amount: "1", CustomerEmail: "nope"},
			"bad phone":         {AppID: a1, OrderNo: "X7", Amount: "1", CustomerPhone: "call me"},
			"name too long":     {AppID: a1, OrderNo: "X8", Amount: "1", CustomerName: strings.Repeat("名", MaxCustomerNameLen+1)},
			"control character": {AppID: a1, OrderNo: "X9", Amount: "1", CustomerName: "a\tb"},
		} {
			if _, err := s.Create(ctx, in); errs.KindOf(err) != errs.Validation {
				t.Errorf("%s: %v, want a validation error", name, err)
			}
		}
		full, err := s.QueryForApp(ctx, a1, "SO1", AllFields)
		if err != nil || full.ID != o.ID || full.CustomerPhone != "+86 138-0000-0000" || full.CreateTime.IsZero() {
			t.Fatalf("own order: %+v %v", full, err)
		}
		// A summary is the full read with the customer and times left zero.
		summary, err := s.QueryForApp(ctx, a1, "SO1", Summary)
		want := Order{ID: full.ID, OrderNo: full.OrderNo, AppID: full.AppID, Amount: full.Amount, Status: full.Status}
		if err != nil || !reflect.DeepEqual(summary, want) {
			t.Fatalf("own order, summary: %+v %v, want %+v", summary, err, want)
		}
		for _, f := range []Fields{AllFields, Summary} {
			if _, err := s.QueryForApp(ctx, a2, "SO1", f); !errors.Is(err, ErrForbidden) {
				t.Fatalf("another app's order (fields %d): %v", f, err)
			}
			if _, err := s.QueryForApp(ctx, a1, "NOPE", f); !errors.Is(err, ErrNotFound) {
				t.Fatalf("unknown order (fields %d): %v", f, err)
			}
		}
		// The times as partners read them (rest's presenters format them so).
		if pt, ct := paid.PayTime.UTC().Format(TimeFormat), paid.CreateTime.UTC().Format(TimeFormat); pt != "2026-11-22T10:00:00.123Z" || ct != "2026-11-22T10:00:00.123Z" {
			t.Fatalf("paid order times %s %s", pt, ct)
		}
	})
}
