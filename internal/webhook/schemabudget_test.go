package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/errs"
	"gatehouse/internal/testenv"
	"gatehouse/internal/webhook"
)

// anyOfChain is the schema bomb of a hostile run: levels of
// {"anyOf":[{"$ref":next},{"$ref":next}]} whose last level refuses
// everything, so that every path is tried: 2^levels subschemas for one
// value, from about 80 bytes a level.
func anyOfChain(levels int) string {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for k := range levels {
		fmt.Fprintf(&b, `"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, k, k+1, k+1)
	}
	fmt.Fprintf(&b, `"d%d":{"type":"string","minLength":1000}}}`, levels)
	return b.String()
}

// nestedAllOf is the other bomb: allOf inside allOf, depth deep.
func nestedAllOf(depth int) string {
	return strings.Repeat(`{"allOf":[`, depth) + `{"type":"object"}` + strings.Repeat(`]}`, depth)
}

// recursiveBranches passes every static bound (small, shallow, two
// $refs) but its two branches both recurse into "a": a document nested
// n deep in "a" whose innermost value fails makes validation try 2^n
// paths. Only the validation budget stops it.
const recursiveBranches = `{"anyOf":[
  {"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]},
  {"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"],"minProperties":1}
]}`

func nestedA(n int) string {
	return strings.Repeat(`{"a":`, n) + `{}` + strings.Repeat(`}`, n)
}

// bounded runs f and fails the test unless it returns within 3 s and the
// process's heap and resident memory grow by less than 100 MiB meanwhile
// (the peak, sampled every 5 ms). Under the race detector the resident
// bound is raceResident: the detector's shadow memory is resident beside
// the heap it covers (measured: +24 to +100 MiB resident for the same
// +32 MiB of heap, the most on a loaded CI machine), while the heap, the
// budget's own measure, is held to 100 MiB either way.
func bounded(t *testing.T, what string, f func()) {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap0, rss0 := ms.HeapInuse, rss(t)
	var peakHeap, peakRSS uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peakHeap, peakRSS = max(peakHeap, ms.HeapInuse), max(peakRSS, rss(t))
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	f()
	took := time.Since(start)
	close(stop)
	wg.Wait()
	const limit = 100 << 20
	residentLimit := uint64(limit)
	if raceDetector {
		residentLimit = raceResident
	}
	t.Logf("%s: %v, heap +%d MiB, resident +%d MiB", what, took.Round(time.Millisecond), (max(peakHeap, heap0)-heap0)>>20, (max(peakRSS, rss0)-rss0)>>20)
	if took > 3*time.Second {
		t.Errorf("%s took %v, want under 3 s", what, took)
	}
	if peakHeap > heap0 && peakHeap-heap0 > limit {
		t.Errorf("%s grew the heap by %d MiB, want under 100", what, (peakHeap-heap0)>>20)
	}
	if peakRSS > rss0 && peakRSS-rss0 > residentLimit {
		t.Errorf("%s grew the resident memory by %d MiB, want under %d", what, (peakRSS-rss0)>>20, residentLimit>>20)
	}
}

// raceResident is the resident bound under the race detector: three
// times the heap's, as the detector's shadow memory is a few times the
// heap it covers. A validation without its budget (a gigabyte of heap in
// the hostile run) is past it as it is past the heap's bound.
const raceResident = 300 << 20

// rss is the process's resident memory (Linux), 0 elsewhere.
func rss(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// wantLimit fails unless err is a validation error on field naming limit.
func wantLimit(t *testing.T, what string, err error, field, limit string) {
	t.Helper()
	if errs.KindOf(err) != errs.Validation || errs.Field(err) != field || !strings.Contains(err.Error(), "limit: "+limit) {
		t.Errorf("%s: %v, want a validation error on %s naming the limit %q", what, err, field, limit)
	}
}

// TestSchemaBombsRefusedAtCreation: the two bombs of the hostile run are
// refused by createWebhookEventType, naming the limit, quickly and
// without memory; a schema within the limits is declared as before.
func TestSchemaBombsRefusedAtCreation(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{})
		ctx := context.Background()
		for _, c := range []struct {
			name, schema, limit string
		}{
			{"bomb.chain_17", anyOfChain(17), "schema expansion"},
			{"bomb.chain_20", anyOfChain(20), "schema expansion"},
			{"bomb.allof_1000", nestedAllOf(1000), "schema depth"},
			{"bomb.allof_3000", nestedAllOf(3000), "schema depth"},
			{"bomb.refs", `{"$defs":{"x":{}},"allOf":[` + strings.Repeat(`{"$ref":"#/$defs/x"},`, 30) + `{}],"anyOf":[` + strings.Repeat(`{"$ref":"#/$defs/x"},`, 30) + `{}],"oneOf":[` + strings.Repeat(`{"$ref":"#/$defs/x"},`, 10) + `{}]}`, "$ref count"},
			{"bomb.fan_out", `{"anyOf":[` + strings.Repeat(`{},`, 40) + `{}]}`, "combinator fan-out"},
		} {
			bounded(t, c.name, func() {
				_, err := e.svc.CreateEventType(ctx, c.name, "A bomb.", json.RawMessage(c.schema), nil)
				wantLimit(t, c.name, err, "schema", c.limit)
			})
		}
		// Within the limits: seven levels of the chain (128 paths) and
		// an ordinary schema.
		if _, err := e.svc.CreateEventType(ctx, "fine.chain", "Seven levels.", json.RawMessage(anyOfChain(7)), nil); err != nil {
			t.Errorf("seven levels: %v", err)
		}
		declareInvoice(t, e)
	})
}

// TestSchemaValidationBudget: a schema that passes every bound at
// creation but whose recursion multiplies with the document's depth is
// stopped by the validation budget (a validation error naming it) within
// 3 s and 100 MiB, and by the request's context when that ends first;
// an ordinary payload still validates.
func TestSchemaValidationBudget(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{AllowPrivate: true})
		ctx := context.Background()
		rcv := newReceiver(t, always(204))
		appID, _ := e.newApp(t, rcv.URL)
		if _, err := e.svc.CreateEventType(ctx, "tree.grown", "Recursive.", json.RawMessage(recursiveBranches), nil); err != nil {
			t.Fatal(err)
		}
		bounded(t, "publish 30 deep", func() {
			_, err := e.svc.Publish(ctx, appID, "tree.grown", json.RawMessage(nestedA(30)), "")
			wantLimit(t, "publish 30 deep", err, "bizData", "validation steps")
		})
		// The request's deadline stops it too (as 503, the server's side).
		short, cancel := context.WithTimeout(ctx, time.Millisecond)
		defer cancel()
		time.Sleep(2 * time.Millisecond)
		bounded(t, "publish past its deadline", func() {
			_, err := e.svc.Publish(short, appID, "tree.grown", json.RawMessage(nestedA(30)), "")
			if errs.KindOf(err) != errs.Unavailable {
				t.Errorf("publish past its deadline: %v, want unavailable", err)
			}
		})
		// Shallow documents validate as before, valid or not.
		if _, err := e.svc.Publish(ctx, appID, "tree.grown", json.RawMessage(nestedA(3)), ""); errs.KindOf(err) != errs.Validation || strings.Contains(err.Error(), "limit:") {
			t.Errorf("3 deep: %v, want an ordinary validation error", err)
		}
		declareInvoice(t, e)
		if _, err := e.svc.Publish(ctx, appID, "invoice.issued", json.RawMessage(`{"invoice_no":"I-1","lines":[{"sku":"A","qty":2}]}`), ""); err != nil {
			t.Errorf("an ordinary payload: %v", err)
		}
	})
}

// TestStoredSchemaBombBounded: types stored before the bounds existed
// (written to the table directly) are refused when a publish loads them,
// naming the limit, within 3 s and 100 MiB; nothing is sent.
func TestStoredSchemaBombBounded(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{AllowPrivate: true})
		ctx := context.Background()
		rcv := newReceiver(t, always(204))
		appID, _ := e.newApp(t, rcv.URL)
		for _, c := range []struct{ name, schema, limit string }{
			{"old.chain", anyOfChain(20), "schema expansion"},
			{"old.allof", nestedAllOf(3000), "schema depth"},
		} {
			if err := e.db.WebhookEventType.Create().SetName(c.name).SetDescription("Stored before the bounds.").
				SetSchema(c.schema).SetCreateTime(time.Now()).Exec(ctx); err != nil {
				t.Fatal(err)
			}
			bounded(t, c.name, func() {
				_, err := e.svc.Publish(ctx, appID, c.name, json.RawMessage(`{"x":1}`), "")
				wantLimit(t, c.name, err, "eventType", c.limit)
			})
		}
		if n := rcv.count(); n != 0 {
			t.Errorf("%d webhooks sent", n)
		}
	})
}

// TestConcurrentValidationsOfOneType: validations of one type at once
// each count their own steps (a compiled copy per validation): valid
// payloads pass and invalid ones fail at their own path, never with a
// neighbour's budget or error.
func TestConcurrentValidationsOfOneType(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := newEnv(t, b, webhook.Options{})
		declareInvoice(t, e)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 50 {
					good := (g+i)%2 == 0
					biz := `{"invoice_no":"I","lines":[{"sku":"A","qty":1}]}`
					if !good {
						biz = `{"invoice_no":"I","lines":[{"sku":"A","qty":0}]}`
					}
					err := webhook.ValidateBizData(context.Background(), e.svc, "invoice.issued", []byte(biz))
					if good != (err == nil) || (!good && !strings.Contains(err.Error(), "$.lines[0].qty")) {
						t.Errorf("goroutine %d, %d: good=%v, err %v", g, i, good, err)
						return
					}
				}
			}()
		}
		wg.Wait()
	})
}
