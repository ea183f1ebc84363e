package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"gatehouse/internal/benchfloor"
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
func publishPhases(ctx context.Context, o options, rep *report, g *gatehouse, c *http.Client, self, tmp, dbURL string) error {
	if err := g.declarePublishType(ctx); err != nil {
		return err
	}
	app, err := g.app(ctx, "publish", "http://127.0.0.1:9/held")
	if err != nil {
		return err
	}
	if err := g.graphql(ctx, fmt.Sprintf(`mutation { updatePartnerApp(id: "%d", input: {status: 0}) { id } }`, app), nil); err != nil {
		return err
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	floor, err := startProc(ctx, "baseline publish-pg", self, []string{"baseline", "-addr", addr, "-mode", "publish-pg", "-postgres", dbURL}, nil, addr, tmp)
	if err != nil {
		return err
	}
	var seq, sent atomic.Int64
	floorSrc := source{want: http.StatusOK, next: func() (*http.Request, bool) {
		body := fmt.Sprintf(`{"app_id":%d,"event_type":%q,"biz_data":%s,"key":"k-%d"}`, app, publishType, publishBizData, seq.Add(1))
		req, _ := http.NewRequest(http.MethodPost, floor.base+"/p", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		return req, true
	}}
	pubSrc := source{want: http.StatusOK, next: func() (*http.Request, bool) {
		q := fmt.Sprintf(`mutation { publishWebhookEvent(appID: "%d", eventType: %q, bizData: %s, idempotencyKey: "k-%d") { eventID } }`,
			app, publishType, gqlLiteral(publishBizData), seq.Add(1))
		sent.Add(1)
		body, _ := json.Marshal(map[string]string{"query": q})
		req, _ := http.NewRequest(http.MethodPost, g.admin+"/graphql", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", g.apiKey)
		return req, true
	}}
	floorLoad, pub := measurePair(ctx, o, c, floorSrc, pubSrc)
	// The REST publish with a PUBLISHER key, against the same floor
	// measured anew, then batches of 100.
	var key struct{ CreateAPIKey struct{ Key string } }
	if err := g.graphql(ctx, `mutation { createAPIKey(name: "bench publisher", role: PUBLISHER, scopes: ["bench.*"]) { key } }`, &key); err != nil {
		return err
	}
	var restSent atomic.Int64
	restSrc := source{want: http.StatusCreated, next: func() (*http.Request, bool) {
		body := fmt.Sprintf(`{"app_id":%d,"event_type":%q,"biz_data":%s}`, app, publishType, publishBizData)
		restSent.Add(1)
		req, _ := http.NewRequest(http.MethodPost, g.admin+"/api/events", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", key.CreateAPIKey.Key)
		req.Header.Set("Idempotency-Key", fmt.Sprintf("r-%d", seq.Add(1)))
		return req, true
	}}
	restFloor, rest := measurePair(ctx, o, c, floorSrc, restSrc)
	if err := floor.stop(); err != nil {
		return err
	}
	batchLoad := drive(ctx, c, max(1, o.workers/4), o.phase, publishBatches(g.admin, key.CreateAPIKey.Key, app, &seq))
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
	rep.add("publishWebhookEvent, events/s, Postgres (app held)", pub, publishFloorName, floorLoad)
	rep.add("publish POST /api/events, Postgres", rest, publishFloorName, restFloor)
	if batchLoad.Errors > 0 {
		rep.skip("publish batch of 100, Postgres", fmt.Sprintf("%d of %d batches failed: %s", batchLoad.Errors, batchLoad.Requests+batchLoad.Errors, batchLoad.FirstError))
		return nil
	}
	rep.scalar(fmt.Sprintf("publish batch of %d, Postgres", publishBatchSize), batchLoad.RPS*publishBatchSize, "events/s", "", 0)
	return nil
}

// publishBatchSize is the number of events of one batch of the batch line.
const publishBatchSize = 100

// publishBatches is a source of POST /api/events/batch requests of
// publishBatchSize events each, every event with a key of its own.
func publishBatches(admin, key string, app int64, seq *atomic.Int64) source {
	return source{want: http.StatusOK, next: func() (*http.Request, bool) {
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

// servePublishFloor adds the publish floor to mux (baseline mode
// publish-pg): per request the JSON event is read and one statement
// inserts its row and announces it (pg_notify), in autocommit mode.
func servePublishFloor(ctx context.Context, mux *http.ServeMux, pgURL string) (func() error, error) {
	db, err := sql.Open("pgx", pgURL)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(40)
	db.SetMaxIdleConns(40)
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bench_published (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  event_id VARCHAR NOT NULL, app_id BIGINT NOT NULL, event_type VARCHAR NOT NULL, biz_data TEXT NOT NULL, idempotency_key VARCHAR NOT NULL, created TIMESTAMPTZ NOT NULL)`); err != nil {
		db.Close()
		return nil, err
	}
	stmt, err := db.PrepareContext(ctx, `WITH e AS (INSERT INTO bench_published (event_id, app_id, event_type, biz_data, idempotency_key, created)
  VALUES ($1, $2, $3, $4, $5, $6) RETURNING id) SELECT id, pg_notify('bench_published', '') FROM e`)
	if err != nil {
		db.Close()
		return nil, err
	}
	mux.HandleFunc("POST /p", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			AppID     int64           `json:"app_id"`
			EventType string          `json:"event_type"`
			BizData   json.RawMessage `json:"biz_data"`
			Key       string          `json:"key"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.EventType == "" || !json.Valid(in.BizData) {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		id := eventID()
		var row int64
		var notified string
		if err := stmt.QueryRowContext(r.Context(), id, in.AppID, in.EventType, string(in.BizData), in.Key, time.Now().UTC()).Scan(&row, &notified); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		benchfloor.WriteJSON(w, map[string]any{"data": map[string]any{"publishWebhookEvent": map[string]string{"eventID": id}}})
	})
	return db.Close, nil
}

// Sizes of the fan-out phase: fanoutEvents events over drainApps apps of
// fanoutEndpoints endpoints each make as many deliveries as the drain.
const (
	fanoutEndpoints = 5
	fanoutEvents    = drainDeliveries / fanoutEndpoints
)

// declarePublishType declares publishType on g once (a second call finds
// it declared).
func (g *gatehouse) declarePublishType(ctx context.Context) error {
	var out struct{ WebhookEventTypes []struct{ Name string } }
	if err := g.graphql(ctx, `{ webhookEventTypes { name } }`, &out); err != nil {
		return err
	}
	for _, t := range out.WebhookEventTypes {
		if t.Name == publishType {
			return nil
		}
	}
	schema := `{type: "object", required: ["invoice_no", "amount", "lines"], properties: {invoice_no: {type: "string"}, amount: {type: "number"}, lines: {type: "array", items: {type: "object", required: ["sku", "qty"], properties: {sku: {type: "string"}, qty: {type: "integer", minimum: 1}}}}}}`
	return g.graphql(ctx, `mutation { createWebhookEventType(name: "`+publishType+`", description: "bench", schema: `+schema+`) { name } }`, nil)
}

// fanout measures publish → delivered with fan-out: drainApps apps of
// fanoutEndpoints endpoints each (all at the sink; made by the first
// call, reused by the next), fanoutEvents events published through
// publishWebhookEvent while the apps are disabled (each event queues one
// delivery per endpoint, held), then the apps enabled together; the
// figure is the deliveries' arrival rate, first to last, comparable with
// the drain's (the same number of deliveries).
func (w *webhookBench) fanout(ctx context.Context) (float64, error) {
	if err := w.g.declarePublishType(ctx); err != nil {
		return 0, err
	}
	for i := len(w.fanApps); i < drainApps; i++ {
		id, err := w.g.app(ctx, fmt.Sprintf("fanout %d", i), w.sink.base+"/ok")
		if err != nil {
			return 0, err
		}
		w.fanApps = append(w.fanApps, id)
		// The app's callback URL is its first endpoint; four more.
		for j := 1; j < fanoutEndpoints; j++ {
			if err := w.g.graphql(ctx, fmt.Sprintf(`mutation { createWebhookEndpoint(appID: "%d", input: {url: "%s/ok?e=%d"}) { endpoint { id } } }`, id, w.sink.base, j), nil); err != nil {
				return 0, err
			}
		}
	}
	apps := w.fanApps
	for _, id := range apps {
		if err := w.g.graphql(ctx, fmt.Sprintf(`mutation { updatePartnerApp(id: "%d", input: {status: 0}) { id } }`, id), nil); err != nil {
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
				if err := w.g.graphql(ctx, q, &out); err != nil {
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
	w.sink.reset()
	for _, id := range apps {
		if err := w.g.graphql(ctx, fmt.Sprintf(`mutation { updatePartnerApp(id: "%d", input: {status: 1}) { id } }`, id), nil); err != nil {
			return 0, err
		}
	}
	return w.sink.waitArrivals(ctx, fanoutEvents*fanoutEndpoints, 2*time.Minute)
}
