package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

// logSize is how many deliveries the log benchmark pages through.
const logSize = 100_000

// BenchmarkDeliveryLog times one page of the delivery log over 100,000
// deliveries, as the browser asks for it (the session check, the GraphQL
// query through the guard and the executor, the render): the first page,
// a page ten pages deep (following the Older links' cursors), and a page
// filtered by status and event type. The target is 300 ms of server time
// per page; ms/page is reported.
func BenchmarkDeliveryLog(b *testing.B) {
	benchBackends(b, func(b *testing.B, be testenv.Backend) {
		f := start(b, be, "shop")
		seed(b, f, logSize)
		c := newClient(b, f)
		c.signIn(f.admin)
		deep := "/console/deliveries"
		for range 10 {
			p := c.get(deep)
			i := strings.Index(p.body, `rel="next"`)
			if i < 0 {
				b.Fatalf("no Older link on %s", deep)
			}
			href := p.body[strings.LastIndex(p.body[:i], `href="`)+6 : i-2]
			deep = strings.TrimPrefix(strings.ReplaceAll(href, "&amp;", "&"), "")
		}
		for _, page := range []struct{ name, path string }{
			{"first", "/console/deliveries"},
			{"tenth", deep},
			{"failed-by-type", "/console/deliveries?status=FAILED&type=order.refunded"},
			{"by-app", fmt.Sprintf("/console/deliveries?app=%d", f.appID)},
			{"search-payload", "/console/deliveries?q=SO050000"},
		} {
			b.Run(page.name, func(b *testing.B) {
				start := time.Now()
				for range b.N {
					if p := c.get(page.path); p.status != http.StatusOK || !strings.Contains(p.body, "evt_") {
						b.Fatalf("%s: %d", page.path, p.status)
					}
				}
				b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/page")
			})
		}
	})
}

func benchBackends(b *testing.B, fn func(b *testing.B, be testenv.Backend)) {
	b.Run("sqlite", func(b *testing.B) { fn(b, testenv.Backend{Name: "sqlite"}) })
	b.Run("postgres", func(b *testing.B) {
		fn(b, testenv.Backend{Name: "postgres", DatabaseURL: testenv.PostgresURL(b), RedisURL: testenv.RedisURL(b), KeyPrefix: testenv.KeyPrefix(b)})
	})
}

// seed inserts n final deliveries (SUCCESS, some FAILED) over the last 30
// days in batches, so that the dispatcher has nothing to do.
func seed(b *testing.B, f *fixture, n int) {
	b.Helper()
	ctx := context.Background()
	types := []string{"order.paid", "order.cancelled", "order.refunded"}
	now := time.Now()
	const batch = 1000
	for done := 0; done < n; done += batch {
		err := store.WithTx(ctx, f.env.App.DB.Client, func(tx *ent.Tx) error {
			rows := make([]*ent.WebhookDeliveryCreate, 0, batch)
			for i := done; i < done+batch && i < n; i++ {
				st := webhookdelivery.StatusSUCCESS
				if i%10 == 0 {
					st = webhookdelivery.StatusFAILED
				}
				at := now.Add(-time.Duration(n-i) * 30 * 24 * time.Hour / time.Duration(n))
				rows = append(rows, tx.WebhookDelivery.Create().SetAppID(f.appID).SetEndpointID(f.endpoint).
					SetEventID(fmt.Sprintf("evt_seed_%06d", i)).SetEventType(types[i%len(types)]).
					SetBizData(fmt.Sprintf(`{"order_no":"SO%06d","amount":"%d.00"}`, i, i%500)).SetCallbackURL(f.receiverURL).
					SetStatus(st).SetAttemptCount(1).SetCreateTime(at).SetUpdateTime(at))
			}
			return tx.WebhookDelivery.CreateBulk(rows...).Exec(ctx)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
