package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
)

// logPageSize is how many deliveries a page of the log shows.
const logPageSize = 50

func (c *Console) deliveryRoutes(r chi.Router) {
	r.Get("/deliveries", c.deliveryLog)
	r.Get("/deliveries/recover", c.recoverForm)
	r.Post("/deliveries/recover", c.recoverFailed)
	r.Get("/deliveries/{id}", c.deliveryDetail)
	r.Post("/deliveries/{id}/resend", c.deliveryAction("resendWebhookDelivery", "Queued again: a new attempt follows."))
	r.Post("/deliveries/{id}/cancel", c.deliveryAction("cancelWebhookDelivery", "Cancelled."))
}

// deliveryStatuses are the statuses the filter offers.
var deliveryStatuses = []string{"PENDING", "RETRYING", "SUCCESS", "FAILED", "CANCELLED"}

// logFilter is the delivery log's filter, read from the query string.
type logFilter struct {
	App, Endpoint, Type, Status, Since, Until, Q string
}

// timeLayout is what a datetime-local input sends.
const timeLayout = "2006-01-02T15:04"

func readLogFilter(q url.Values) logFilter {
	return logFilter{App: q.Get("app"), Endpoint: q.Get("endpoint"), Type: q.Get("type"), Status: q.Get("status"),
		Since: q.Get("since"), Until: q.Get("until"), Q: strings.TrimSpace(q.Get("q"))}
}

// where is the filter as a WebhookDeliveryWhereInput; a malformed field
// is reported by name (the API would refuse it too, less legibly).
func (f logFilter) where() (map[string]any, string) {
	w := map[string]any{}
	if f.App != "" {
		w["appID"] = f.App
	}
	if f.Endpoint != "" {
		w["endpointID"] = f.Endpoint
	}
	if f.Type != "" {
		w["eventType"] = f.Type
	}
	if f.Status != "" {
		w["status"] = f.Status
	}
	for _, t := range []struct{ name, v, op string }{{"From", f.Since, "createTimeGTE"}, {"To", f.Until, "createTimeLT"}} {
		if t.v == "" {
			continue
		}
		at, err := time.Parse(timeLayout, t.v)
		if err != nil {
			return nil, t.name + " is not a date and time (YYYY-MM-DDThh:mm, UTC)."
		}
		w[t.op] = at.UTC().Format(time.RFC3339)
	}
	if f.Q != "" {
		// An event id exactly, or text anywhere in the payload.
		w["or"] = []map[string]any{{"eventID": f.Q}, {"bizDataContains": f.Q}}
	}
	return w, ""
}

// values is the filter as query parameters (for the pager's links).
func (f logFilter) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"app": f.App, "endpoint": f.Endpoint, "type": f.Type, "status": f.Status, "since": f.Since, "until": f.Until, "q": f.Q} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// deliveryRow is a delivery as the log lists it.
type deliveryRow struct {
	ID, EventID, EventType, Status, CreateTime, NextAttemptAt string
	AttemptCount                                              int
	LastError                                                 *string
	App                                                       struct{ ID, AppName string }
	Endpoint                                                  *struct{ ID, URL string }
}

type deliveryConn struct {
	Edges    []struct{ Node deliveryRow }
	PageInfo struct {
		HasNextPage, HasPreviousPage bool
		StartCursor, EndCursor       *string
	}
}

// logData is the delivery log page's.
type logData struct {
	Filter     logFilter
	Statuses   []string
	Apps       []option
	Types      []string
	Rows       []deliveryRow
	Prev, Next string
}

// option is one choice of a select.
type option struct{ Value, Label string }

const logQuery = `query ConsoleDeliveryLog($where: WebhookDeliveryWhereInput, $first: Int, $after: Cursor, $last: Int, $before: Cursor) {
  webhookDeliveries(where: $where, first: $first, after: $after, last: $last, before: $before, orderBy: {field: CREATE_TIME, direction: DESC}) {
    edges { node { id eventID eventType status createTime nextAttemptAt attemptCount lastError app { id appName } endpoint { id url } } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
  }
  partnerApps(first: 100, orderBy: {field: APP_NAME, direction: ASC}) { edges { node { id appName } } }
  webhookEventTypes { name }
}`

// deliveryLog lists deliveries newest first, filtered, a page at a time
// (keyset paging through the connection's cursors: no OFFSET).
func (c *Console) deliveryLog(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := readLogFilter(q)
	data := logData{Filter: f, Statuses: deliveryStatuses}
	where, bad := f.where()
	vars := map[string]any{"where": where}
	if b := q.Get("before"); b != "" {
		vars["last"], vars["before"] = logPageSize, b
	} else {
		vars["first"] = logPageSize
		if a := q.Get("after"); a != "" {
			vars["after"] = a
		}
	}
	if bad != "" {
		p := c.page(w, r, "Delivery log", data)
		p.Error = bad
		c.pages.Render(w, r, http.StatusUnprocessableEntity, "deliveries", p)
		return
	}
	var out struct {
		WebhookDeliveries deliveryConn
		PartnerApps       struct {
			Edges []struct{ Node struct{ ID, AppName string } }
		}
		WebhookEventTypes []struct{ Name string }
	}
	if err := c.query(r, logQuery, vars, &out); err != nil {
		c.fail(w, r, err)
		return
	}
	for _, e := range out.WebhookDeliveries.Edges {
		data.Rows = append(data.Rows, e.Node)
	}
	for _, e := range out.PartnerApps.Edges {
		data.Apps = append(data.Apps, option{Value: e.Node.ID, Label: e.Node.AppName})
	}
	for _, t := range out.WebhookEventTypes {
		data.Types = append(data.Types, t.Name)
	}
	pi := out.WebhookDeliveries.PageInfo
	_, backwards := vars["before"]
	// Paging backwards, "newer" exists when the API says so; forwards,
	// when we came from somewhere (an after cursor).
	if pi.StartCursor != nil && (backwards && pi.HasPreviousPage || !backwards && q.Get("after") != "") {
		v := f.values()
		v.Set("before", *pi.StartCursor)
		data.Prev = Base + "deliveries?" + v.Encode()
	}
	if pi.EndCursor != nil && (!backwards && pi.HasNextPage || backwards) {
		v := f.values()
		v.Set("after", *pi.EndCursor)
		data.Next = Base + "deliveries?" + v.Encode()
	}
	c.render(w, r, http.StatusOK, "deliveries", "Delivery log", data)
}

// attemptRow is one attempt of a delivery.
type attemptRow struct {
	AttemptNo      int
	ResponseStatus *int
	ResponseBody   *string
	Error          *string
	DurationMs     int
	StartedAt      string
}

// Excerpt is the first part of the response body (the API keeps a bounded
// excerpt already; the page shortens it further).
func (a attemptRow) Excerpt() string {
	if a.ResponseBody == nil {
		return ""
	}
	s := *a.ResponseBody
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// detailData is the delivery detail page's.
type detailData struct {
	Delivery deliveryFull
}

// deliveryFull is a delivery with its payload and attempts.
type deliveryFull struct {
	deliveryRow
	BizData     string
	CallbackURL string
	RetryCount  int
	MaxRetry    int
	Attempts    struct{ Edges []struct{ Node attemptRow } }
}

// Final reports whether the delivery will not be attempted again.
func (d detailData) Final() bool {
	s := d.Delivery.Status
	return s == "SUCCESS" || s == "FAILED" || s == "CANCELLED"
}

// Cancellable reports whether Cancel applies (the API decides anyway).
func (d detailData) Cancellable() bool {
	return d.Delivery.Status == "PENDING" || d.Delivery.Status == "RETRYING"
}

const detailQuery = `query ConsoleDelivery($id: ID!) {
  webhookDeliveries(where: {id: $id}, first: 1) { edges { node {
    id eventID eventType status createTime nextAttemptAt attemptCount retryCount maxRetry lastError bizData callbackURL
    app { id appName } endpoint { id url }
    attempts(first: 100, orderBy: {field: ATTEMPT_NO, direction: DESC}) { edges { node { attemptNo responseStatus responseBody error durationMs startedAt } } }
  } } }
}`

// deliveryDetail shows a delivery's payload and every attempt.
func (c *Console) deliveryDetail(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if _, err := strconv.Atoi(id); err != nil {
		c.fail(w, r, &apiError{Status: http.StatusNotFound, Code: "NOT_FOUND", Message: "No such delivery."})
		return
	}
	var out struct {
		WebhookDeliveries struct{ Edges []struct{ Node deliveryFull } }
	}
	if err := c.query(r, detailQuery, map[string]any{"id": id}, &out); err != nil {
		c.fail(w, r, err)
		return
	}
	if len(out.WebhookDeliveries.Edges) == 0 {
		c.fail(w, r, &apiError{Status: http.StatusNotFound, Code: "NOT_FOUND", Message: "No such delivery."})
		return
	}
	data := detailData{Delivery: out.WebhookDeliveries.Edges[0].Node}
	c.render(w, r, http.StatusOK, "delivery", "Delivery "+data.Delivery.EventID, data)
}

// deliveryAction runs a one-delivery mutation (resend, cancel) and goes
// back to where the button was (the detail page, or the log).
func (c *Console) deliveryAction(mutation, msg string) http.HandlerFunc {
	doc := fmt.Sprintf(`mutation ConsoleDeliveryAction($id: ID!) { %s(id: $id) { id status } }`, mutation)
	return func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "id")
		if err := c.query(r, doc, map[string]any{"id": id}, nil); err != nil {
			c.fail(w, r, err)
			return
		}
		to := Base + "deliveries/" + url.PathEscape(id)
		if back := r.PostFormValue("back"); strings.HasPrefix(back, Base+"deliveries?") || back == Base+"deliveries" {
			to = back
		}
		c.done(w, r, msg, to)
	}
}
