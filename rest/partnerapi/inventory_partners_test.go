package partnerapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/ent/idempotencyrecord"
	"gatehouse/internal/inventory/inventorytest"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerclient"
)

// Several partners deduct from one hot SKU at once, each through its own
// app: three that behave, one that hangs up on its requests after a few
// milliseconds, and a hostile one that sends the first partner's biz_nos
// and deductions from a SKU whose decrement fails inside the database.
// Every answer is the one the request would get alone, nothing is
// oversold, every success is recorded for the app that got it, and the
// partner that hung up finds out by sending again what happened.
func TestDeductManyPartnersOneFailing(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		const stock, each = 50, 25
		ctx := context.Background()
		f := startInventory(t, b, stock)
		broken, err := f.e.App.Inventory.CreateSku(ctx, "broken item", 1000)
		if err != nil {
			t.Fatal(err)
		}
		inventorytest.FailDecrement(t, f.e.App.DB, broken.ID, "injected fault 5e2a")
		var honest []*partnerclient.Client
		for i := range 3 {
			_, c := invApp(t, f.e, fmt.Sprintf("inv-honest-%d", i))
			honest = append(honest, c)
		}
		_, quitter := invApp(t, f.e, "inv-quitter")
		_, hostile := invApp(t, f.e, "inv-hostile")

		type sent struct {
			app, biz string
			sku      int
			r        *partnerclient.Response
			err      error
		}
		var (
			mu    sync.Mutex
			all   []sent
			wg    sync.WaitGroup
			start = make(chan struct{})
		)
		send := func(c *partnerclient.Client, biz string, sku int, hangUpAfter time.Duration) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ctx := context.Background()
				if hangUpAfter > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, hangUpAfter)
					defer cancel()
				}
				r, err := c.Do(ctx, http.MethodPost, deductPath, deductParams(biz, sku, 1))
				mu.Lock()
				all = append(all, sent{c.AppKey, biz, sku, r, err})
				mu.Unlock()
			}()
		}
		for j := range each {
			for i, c := range honest {
				send(c, fmt.Sprintf("H%d-%02d", i, j), f.skuID, 0)
			}
			send(quitter, fmt.Sprintf("Q-%02d", j), f.skuID, time.Duration(1+j%8)*time.Millisecond)
			send(hostile, fmt.Sprintf("H0-%02d", j), f.skuID, 0)
			send(hostile, fmt.Sprintf("X-%02d", j), broken.ID, 0)
		}
		close(start)
		wg.Wait()

		// What was recorded: biz_no → app and status.
		recs, err := f.e.App.DB.IdempotencyRecord.Query().All(ctx)
		if err != nil {
			t.Fatal(err)
		}
		type rec struct {
			app    string
			status int
			result string
		}
		recorded := map[string]rec{}
		succeeded := 0
		for _, r := range recs {
			recorded[r.BizNo] = rec{r.AppKey, r.Status, r.ResponseResult}
			if r.Status == 1 && !strings.HasPrefix(r.BizNo, "X-") {
				succeeded++
			}
		}
		if got := f.stock(t); got != 0 || succeeded != stock {
			t.Fatalf("stock %d and %d successes recorded; want 0 and %d (demand exceeds the stock)", got, succeeded, stock)
		}

		remaining := map[string]bool{}
		owners := map[string][]string{} // H0-xx → apps answered other than 403
		for _, s := range all {
			if s.app == "inv-quitter" && s.err != nil {
				continue // hung up before the answer
			}
			if s.err != nil {
				t.Fatalf("%s %s: %v", s.app, s.biz, s.err)
			}
			r, got := s.r, recorded[s.biz]
			switch {
			case strings.HasPrefix(s.biz, "X-"):
				expectReply(t, r, 500, 6000, "system busy")
				if got.status != 2 || strings.Contains(r.Message, "5e2a") {
					t.Fatalf("%s: record %+v, message %q", s.biz, got, r.Message)
				}
				continue
			case r.HTTPStatus == 403:
				expectReply(t, r, 403, 5003, "no access to the resource")
				if !strings.HasPrefix(s.biz, "H0-") || got.app == s.app {
					t.Fatalf("%s %s refused though the biz_no is its own (record %+v)", s.app, s.biz, got)
				}
				continue
			case s.app == "inv-quitter" && r.HTTPStatus == 503:
				expectReply(t, r, 503, 6000, "system busy")
				continue
			}
			owners[s.biz] = append(owners[s.biz], s.app)
			if got.app != s.app {
				t.Fatalf("%s %s answered HTTP %d, but the record is %+v", s.app, s.biz, r.HTTPStatus, got)
			}
			switch {
			case r.HTTPStatus == 200:
				expectReply(t, r, 200, 200, "success")
				var d struct {
					RemainingStock int64 `json:"remaining_stock"`
				}
				if err := json.Unmarshal(r.Data, &d); err != nil || got.status != 1 || got.result != string(r.Data) {
					t.Fatalf("%s %s: data %s, record %+v", s.app, s.biz, r.Data, got)
				}
				key := fmt.Sprint(d.RemainingStock)
				if remaining[key] || d.RemainingStock < 0 {
					t.Fatalf("%s %s left %d: answered twice or below zero", s.app, s.biz, d.RemainingStock)
				}
				remaining[key] = true
			default:
				expectReply(t, r, 409, 5002, "insufficient stock")
				if got.status != 2 {
					t.Fatalf("%s %s: 409 but record %+v", s.app, s.biz, got)
				}
			}
		}
		for j := range each {
			biz := fmt.Sprintf("H0-%02d", j)
			if len(owners[biz]) != 1 {
				t.Fatalf("%s answered to %v; want exactly one app, the other refused", biz, owners[biz])
			}
		}

		// The partner that hung up sends everything again and learns the
		// outcome: the stored one where its request was recorded, else a
		// fresh answer (the stock is gone).
		for j := range each {
			biz := fmt.Sprintf("Q-%02d", j)
			r, err := quitter.Do(ctx, http.MethodPost, deductPath, deductParams(biz, f.skuID, 1))
			if err != nil {
				t.Fatal(err)
			}
			switch got, ok := recorded[biz]; {
			case ok && got.status == 1:
				expectReply(t, r, 200, 200, "success")
				if r.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r.Data, []byte(got.result)) {
					t.Fatalf("%s sent again: %s, want the replay of %s", biz, r.Data, got.result)
				}
			case ok:
				expectReply(t, r, 409, 5001, "business failed")
			default:
				expectReply(t, r, 409, 5002, "insufficient stock")
			}
		}
		if n, err := f.e.App.DB.IdempotencyRecord.Query().Where(idempotencyrecord.StatusEQ(1)).Count(ctx); err != nil || n != stock {
			t.Fatalf("%d successes recorded after the resends (%v), want %d", n, err, stock)
		}
	})
}
