package order_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gatehouse/internal/order"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
)

// TestEventTypesDescribeThePayloads: each order event type declares in its
// schema exactly the fields of its payload struct, all required, and the
// bizData that Pay, Cancel and CompleteRefund really queue satisfies it.
func TestEventTypesDescribeThePayloads(t *testing.T) {
	payloads := map[string]any{
		order.EventPaid: order.PaidEvent{}, order.EventRefunded: order.RefundedEvent{}, order.EventCancelled: order.CancelledEvent{},
	}
	types := map[string]webhook.EventType{}
	for _, ty := range order.EventTypes() {
		types[ty.Name] = ty
		var sch struct {
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(ty.Schema, &sch); err != nil {
			t.Fatalf("%s: %v", ty.Name, err)
		}
		var tags []string
		st := reflect.TypeOf(payloads[ty.Name])
		for i := range st.NumField() {
			tags = append(tags, strings.Split(st.Field(i).Tag.Get("json"), ",")[0])
		}
		props := make([]string, 0, len(sch.Properties))
		for p := range sch.Properties {
			props = append(props, p)
		}
		slices.Sort(tags)
		slices.Sort(props)
		slices.Sort(sch.Required)
		if !slices.Equal(tags, props) || !slices.Equal(tags, sch.Required) {
			t.Errorf("%s: payload fields %v, schema properties %v, required %v", ty.Name, tags, props, sch.Required)
		}
		if err := ty.Check(ty.Example); err != nil || ty.Description == "" {
			t.Errorf("%s: example %s: %v", ty.Name, ty.Example, err)
		}
	}
	if len(types) != len(payloads) {
		t.Fatalf("order event types %v", types)
	}

	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newPayEnv(t, b)
		ctx := context.Background()
		const cb = "https://partner.example.com/hooks"
		paid := e.order(t, cb, "")
		if _, err := e.orders.Pay(ctx, paid.OrderNo); err != nil {
			t.Fatal(err)
		}
		refunded := e.order(t, cb, order.Paid)
		if _, err := e.orders.CompleteRefund(ctx, refunded.OrderNo, ""); err != nil {
			t.Fatal(err)
		}
		cancelled := e.order(t, cb, "")
		if _, err := e.orders.Cancel(ctx, cancelled.OrderNo); err != nil {
			t.Fatal(err)
		}
		for _, o := range []order.Order{paid, refunded, cancelled} {
			for _, d := range e.deliveries(t, o.AppID) {
				if err := types[d.EventType].Check([]byte(d.BizData)); err != nil {
					t.Errorf("%s %s: %v", d.EventType, d.BizData, err)
				}
			}
		}
	})
}
