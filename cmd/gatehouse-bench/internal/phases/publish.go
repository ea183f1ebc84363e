package phases

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"gatehouse/cmd/gatehouse-bench/internal/bench"
	"gatehouse/cmd/gatehouse-bench/internal/gatehouse"
	"gatehouse/cmd/gatehouse-bench/internal/load"
	"gatehouse/cmd/gatehouse-bench/internal/proc"
	"gatehouse/cmd/gatehouse-bench/internal/report"
)

// publishFloorName names the floor of publishWebhookEvent in the report.
const publishFloorName = "minimal handler: one INSERT of the event row + NOTIFY per event, Postgres"

// publishType is the custom event type the publish phase declares and
// publishes; publishBizData one of its events.
const (
	publishType    = "bench.published"
	publishBizData = `{"invoice_no":"INV-1001","amount":99.9,"lines":[{"sku":"A-1","qty":2}]}`
)

// publishPhases measures publishWebhookEvent and POST /api/events on g
// (Postgres), each in turns with its floor, a baseline process (mode publish-pg) that per request reads
// the JSON event and runs one INSERT of it with a NOTIFY in the same
// statement. gatehouse does more per event, all of it on the publish
// path: the API key, the mutation gate and its audit row, the schema
// check of bizData, the idempotency row (every request has its own key)
// and the delivery row with its NOTIFY. The app is disabled, so its
// deliveries are queued and held: the figure is the publishing path, not
// the drain (the drain lines measure that). Then batches of 100 events
// (POST /api/events/batch), in events/s.
func publishPhases(ctx context.Context, o bench.Options, rep *report.Report, g *gatehouse.Process, c *http.Client, self, tmp, dbURL string) error {
	if err := declarePublishType(ctx, g); err != nil {
		return err
	}
	app, err := g.App(ctx, "publish", "http://127.0.0.1:9/held")
	if err != nil {
		return err
	}
	if err := g.GraphQL(ctx, fmt.Sprintf(`mutation { updatePartnerApp(id: "%d", input: {status: 0}) { id } }`, app), nil); err != nil {
		return err
	}
	addr, err := proc.FreeAddr()
	if err != nil {
		return err
	}
	floor, err := proc.Start(ctx, "baseline publish-pg", self, []string{"baseline", "-addr", addr, "-mode", "publish-pg", "-postgres", dbURL}, nil, addr, tmp)
	if err != nil {
		return err
	}
	var seq, sent atomic.Int64
	floorSrc := load.Source{Want: http.StatusOK, Next: func() (*http.Request, bool) {
		body := fmt.Sprintf(`{"app_id":%d,"event_type":%q,"biz_data":%s,"key":"k-%d"}`, app, publishType, publishBizData, seq.Add(1))
		req, _ := http.NewRequest(http.MethodPost, floor.Base+"/p", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		return req, true
	}}
	pubSrc := load.Source{Want: http.StatusOK, Next: func() (*http.Request, bool) {
		q := fmt.Sprintf(`mutation { publishWebhookEvent(appID: "%d", eventType: %q, bizData: %s, idempotencyKey: "k-%d") { eventID } }`,
			app, publishType, gqlLiteral(publishBizData), seq.Add(1))
		sent.Add(1)
		body, _ := json.Marshal(map[string]string{"query": q})
		req, _ := http.NewRequest(http.MethodPost, g.Admin+"/graphql", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", g.APIKey)
		return req, true
	}}
	floorLoad, pub := load.MeasurePair(ctx, o, c, floorSrc, pubSrc)
	// The REST publish with a PUBLISHER key, against the same floor
	// measured anew, then batches of 100.
	var key struct{ CreateAPIKey struct{ Key string } }
	if err := g.GraphQL(ctx, `mutation { createAPIKey(name: "bench publisher", role: PUBLISHER, scopes: ["bench.*"]) { key } }`, &key); err != nil {
		return err
	}
	var restSent atomic.Int64
	restSrc := load.Source{Want: http.StatusCreated, Next: func() (*http.Request, bool) {
		body := fmt.Sprintf(`{"app_id":%d,"event_type":%q,"biz_data":%s}`, app, publishType, publishBizData)
		restSent.Add(1)
		req, _ := http.NewRequest(http.MethodPost, g.Admin+"/api/events", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", key.CreateAPIKey.Key)
		req.Header.Set("Idempotency-Key", fmt.Sprintf("r-%d", seq.Add(1)))
		return req, true
	}}
	restFloor, rest := load.MeasurePair(ctx, o, c, floorSrc, restSrc)
	if err := floor.Stop(); err != nil {
		return err
	}
	batchLoad := load.Drive(ctx, c, max(1, o.Workers/4), o.Phase, publishBatches(g.Admin, key.CreateAPIKey.Key, app, &seq))
	// GraphQL answers 200 with errors too: count the events really queued.
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	var queued int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM webhook_deliveries WHERE event_type = $1`, publishType).Scan(&queued); err != nil {
		return err
	}
	if n := sent.Load() + restSent.Load() + int64(batchLoad.Requests)*publishBatchSize; queued < n {
		pub.Errors += int(n - queued)
		pub.FirstError = fmt.Sprintf("%d of %d publishes answered without queuing an event", n-queued, n)
	}
	rep.Baselines[publishFloorName] = floorLoad
	rep.Add("publishWebhookEvent, events/s, Postgres (app held)", pub, publishFloorName, floorLoad)
	rep.Add("publish POST /api/events, Postgres", rest, publishFloorName, restFloor)
	if batchLoad.Errors > 0 {
		rep.Skip("publish batch of 100, Postgres", fmt.Sprintf("%d of %d batches failed: %s", batchLoad.Errors, batchLoad.Requests+batchLoad.Errors, batchLoad.FirstError))
		return nil
	}
	rep.Scalar(fmt.Sprintf("publish batch of %d, Postgres", publishBatchSize), batchLoad.RPS*publishBatchSize, "events/s", "", 0)
	return nil
}

// publishBatchSize is the number of events of one batch of the batch line.
const publishBatchSize = 100

// publishBatches is a source of POST /api/events/batch requests of
// publishBatchSize events each, every event with a key of its own.
func publishBatches(admin, key string, app int64, seq *atomic.Int64) load.Source {
	return load.Source{Want: http.StatusOK, Next: func() (*http.Request, bool) {
		var b strings.Builder
		b.WriteString(`{"events":[`)
		for i := range publishBatchSize {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"app_id":%d,"event_type":%q,"biz_data":%s,"idempotency_key":"b-%d"}`, app, publishType, publishBizData, seq.Add(1))
		}
		b.WriteString(`]}`)
		req, _ := http.NewRequest(http.MethodPost, admin+"/api/events/batch", strings.NewReader(b.String()))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", key)
		return req, true
	}}
}

// gqlLiteral writes a JSON object as a GraphQL input literal (unquoted
// keys); enough for publishBizData.
func gqlLiteral(js string) string {
	var b strings.Builder
	inString := false
	for i := 0; i < len(js); i++ {
		ch := js[i]
		switch {
		case ch == '"' && !inString:
			// A key is a string followed by ':': write it bare.
			end := strings.IndexByte(js[i+1:], '"') + i + 1
			if end+1 < len(js) && js[end+1] == ':' {
				b.WriteString(js[i+1 : end])
				i = end
				continue
			}
			inString = true
			b.WriteByte(ch)
		case ch == '"' && inString:
			inString = false
			b.WriteByte(ch)
		default:
			b.WriteByte(ch)
		}
	}
	return b.String()
}

// Sizes of the fan-out phase: fanoutEvents events over drainApps apps of
// fanoutEndpoints endpoints each make as many deliveries as the drain.
const (
	fanoutEndpoints = 5
	fanoutEvents    = drainDeliveries / fanoutEndpoints
)

// declarePublishType declares publishType on g once (a second call finds
// it declared).
func declarePublishType(ctx context.Context, g *gatehouse.Process) error {
	var out struct{ WebhookEventTypes []struct{ Name string } }
	if err := g.GraphQL(ctx, `{ webhookEventTypes { name } }`, &out); err != nil {
		return err
	}
	for _, t := range out.WebhookEventTypes {
		if t.Name == publishType {
			return nil
		}
	}
	schema := `{type: "object", required: ["invoice_no", "amount", "lines"], properties: {invoice_no: {type: "string"}, amount: {type: "number"}, lines: {type: "array", items: {type: "object", required: ["sku", "qty"], properties: {sku: {type: "string"}, qty: {type: "integer", minimum: 1}}}}}}`
	return g.GraphQL(ctx, `mutation { createWebhookEventType(name: "`+publishType+`", description: "bench", schema: `+schema+`) { name } }`, nil)
}

// fanout measures publish → delivered with fan-out: drainApps apps of
// fanoutEndpoints endpoints each (all at the sink; made by the first
// call, reused by the next), fanoutEvents events published through
// publishWebhookEvent while the apps are disabled (each event queues one
// delivery per endpoint, held), then the apps enabled together; the
// figure is the deliveries' arrival rate, first to last, comparable with
// the drain's (the same number of deliveries).
func (w *webhookBench) fanout(ctx context.Context) (float64, error) {
	if err := declarePublishType(ctx, w.g); err != nil {
		return 0, err
	}
	for i := len(w.fanApps); i < drainApps; i++ {
		id, err := w.g.App(ctx, fmt.Sprintf("fanout %d", i), w.sink.Base+"/ok")
		if err != nil {
			return 0, err
		}
		w.fanApps = append(w.fanApps, id)
		// The app's callback URL is its first endpoint; four more.
		for j := 1; j < fanoutEndpoints; j++ {
			if err := w.g.GraphQL(ctx, fmt.Sprintf(`mutation { createWebhookEndpoint(appID: "%d", input: {url: "%s/ok?e=%d"}) { endpoint { id } } }`, id, w.sink.Base, j), nil); err != nil {
				return 0, err
			}
		}
	}
	apps := w.fanApps
	for _, id := range apps {
		if err := w.g.GraphQL(ctx, fmt.Sprintf(`mutation { updatePartnerApp(id: "%d", input: {status: 0}) { id } }`, id), nil); err != nil {
			return 0, err
		}
	}
	var next atomic.Int64
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for {
				i := next.Add(1) - 1
				if i >= fanoutEvents {
					errs <- nil
					return
				}
				q := fmt.Sprintf(`mutation { publishWebhookEvent(appID: "%d", eventType: %q, bizData: %s) { deliveries { id } } }`,
					apps[i%drainApps], publishType, gqlLiteral(publishBizData))
				var out struct {
					PublishWebhookEvent struct{ Deliveries []struct{ ID string } }
				}
				if err := w.g.GraphQL(ctx, q, &out); err != nil {
					errs <- err
					return
				}
				if n := len(out.PublishWebhookEvent.Deliveries); n != fanoutEndpoints {
					errs <- fmt.Errorf("an event fanned out to %d endpoints, want %d", n, fanoutEndpoints)
					return
				}
			}
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			return 0, err
		}
	}
	w.sink.Reset()
	for _, id := range apps {
		if err := w.g.GraphQL(ctx, fmt.Sprintf(`mutation { updatePartnerApp(id: "%d", input: {status: 1}) { id } }`, id), nil); err != nil {
			return 0, err
		}
	}
	return w.sink.WaitArrivals(ctx, fanoutEvents*fanoutEndpoints, 2*time.Minute)
}
