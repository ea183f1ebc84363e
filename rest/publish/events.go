package publish

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"gatehouse/internal/apikey"
	"gatehouse/internal/errs"
	"gatehouse/internal/httpx"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/catalogue"
)

// The publish API on the admin listener (docs/openapi-admin.yaml): the
// company's services publish webhook events with an API key (a PUBLISHER
// key, limited to event types by its scopes, or an ADMIN key).

// Body limits of the publish API: an event's biz_data may take
// webhook.MaxPublishedBizData (256 KiB), so these routes take more than
// the 64 KiB of every other JSON body.
const (
	// MaxEventBody bounds the body of POST /api/events.
	MaxEventBody = 512 << 10
	// MaxEventBatchBody bounds the body of POST /api/events/batch.
	MaxEventBatchBody = 8 << 20
)

// HeaderIdempotencyKey carries a single publish's idempotency key.
const HeaderIdempotencyKey = "Idempotency-Key"

// Publisher is what the publish API needs of the webhook service.
type Publisher interface {
	PublishShared(ctx context.Context, req webhook.PublishRequest) (*webhook.Published, error)
	PublishEvents(ctx context.Context, reqs []webhook.PublishRequest) ([]webhook.PublishResult, error)
}

// Events serves POST /api/events and POST /api/events/batch; the API key
// guard runs before it (the key is in the request's context).
type Events struct {
	Svc Publisher
	Log *slog.Logger
}

// Routes returns the publish API's router (mounted at /api/events).
func (h Events) Routes() chi.Router {
	r := chi.NewRouter()
	r.Post("/", h.publish)
	r.Post("/batch", h.batch)
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		httpx.WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method "+r.Method+" is not allowed here; use POST")
	})
	return r
}

// EventError is the error body of the publish API: the REST error shape
// ({"error", "message"}) with the input field and, for a payload against
// its schema, the JSONPath of the offending value.
type EventError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	// Field is the request field at fault (app_id, event_type, biz_data,
	// idempotency_key, events).
	Field string `json:"field,omitempty"`
	// Path is where in biz_data the schema check failed ("$.lines[0].qty").
	Path string `json:"path,omitempty"`
}

// EventAccepted is the answer to one published event.
type EventAccepted struct {
	// ID is the message id (the webhook-id of its deliveries).
	ID             string    `json:"id"`
	AppID          int       `json:"app_id"`
	EventType      string    `json:"event_type"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	// Replayed: an earlier publish with the key made this message; this
	// one sent nothing.
	Replayed bool `json:"replayed"`
	// Deliveries is how many deliveries the message queued (0 for a
	// repeat, or for an app with no endpoint receiving the type).
	Deliveries int `json:"deliveries"`
}

// BatchResult is one event's outcome in a batch answer: Status is the
// HTTP status the event would have had alone.
type BatchResult struct {
	Index  int            `json:"index"`
	Status int            `json:"status"`
	Event  *EventAccepted `json:"event,omitempty"`
	Error  *EventError    `json:"error,omitempty"`
}

func (h Events) publish(w http.ResponseWriter, r *http.Request) {
	obj, derr := httpx.DecodeObjectLimit(r, MaxEventBody)
	if derr != nil {
		writeEventError(w, derr.Status, &EventError{Error: derr.Code, Message: derr.Msg})
		return
	}
	keys := r.Header.Values(HeaderIdempotencyKey)
	if len(keys) > 1 {
		writeEventError(w, http.StatusBadRequest, &EventError{Error: "validation_failed", Field: "Idempotency-Key", Message: "send at most one Idempotency-Key header"})
		return
	}
	var key *string
	if len(keys) == 1 {
		key = &keys[0]
	}
	req, bad := readEvent(obj, key, false)
	if bad != nil {
		writeEventError(w, http.StatusBadRequest, bad)
		return
	}
	if err := apikey.MayPublish(apikey.FromContext(r.Context()), req.EventType); err != nil {
		h.fail(w, r, err)
		return
	}
	m, err := h.Svc.PublishShared(r.Context(), req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	status := http.StatusCreated
	if m.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
		status = http.StatusOK
	}
	httpx.WriteJSON(w, status, accepted(m))
}

func (h Events) batch(w http.ResponseWriter, r *http.Request) {
	obj, derr := httpx.DecodeObjectLimit(r, MaxEventBatchBody)
	if derr != nil {
		writeEventError(w, derr.Status, &EventError{Error: derr.Code, Message: derr.Msg})
		return
	}
	var raw []json.RawMessage
	if unknown := unknownField(obj, "events"); unknown != "" {
		writeEventError(w, http.StatusBadRequest, &EventError{Error: "validation_failed", Field: unknown, Message: "unknown field " + strconv.Quote(unknown) + "; the body is {\"events\": [...]}"})
		return
	}
	if err := json.Unmarshal(obj["events"], &raw); err != nil || raw == nil {
		writeEventError(w, http.StatusBadRequest, &EventError{Error: "validation_failed", Field: "events", Message: "must be an array of events"})
		return
	}
	switch {
	case len(raw) == 0:
		writeEventError(w, http.StatusBadRequest, &EventError{Error: "validation_failed", Field: "events", Message: "must hold at least one event"})
		return
	case len(raw) > webhook.MaxPublishBatch:
		// Nothing of an oversized batch is stored.
		writeEventError(w, http.StatusRequestEntityTooLarge, &EventError{Error: "too_many_events", Field: "events",
			Message: "at most " + strconv.Itoa(webhook.MaxPublishBatch) + " events per batch, not " + strconv.Itoa(len(raw))})
		return
	}
	key := apikey.FromContext(r.Context())
	results := make([]BatchResult, len(raw))
	var reqs []webhook.PublishRequest
	var at []int
	for i, ev := range raw {
		results[i].Index = i
		var o map[string]json.RawMessage
		if err := json.Unmarshal(ev, &o); err != nil || o == nil {
			results[i].Status, results[i].Error = http.StatusBadRequest, &EventError{Error: "validation_failed", Message: "an event must be a JSON object"}
			continue
		}
		req, bad := readEvent(o, nil, true)
		if bad != nil {
			results[i].Status, results[i].Error = http.StatusBadRequest, bad
			continue
		}
		if err := apikey.MayPublish(key, req.EventType); err != nil {
			results[i].Status, results[i].Error = eventError(err)
			continue
		}
		reqs = append(reqs, req)
		at = append(at, i)
	}
	if len(reqs) > 0 {
		out, err := h.Svc.PublishEvents(r.Context(), reqs)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for j, res := range out {
			i := at[j]
			if res.Err != nil {
				if errs.KindOf(res.Err) == errs.Unavailable || errs.KindOf(res.Err) == errs.Internal {
					// The batch's write failed as a whole: nothing was stored.
					h.fail(w, r, res.Err)
					return
				}
				results[i].Status, results[i].Error = eventError(res.Err)
				continue
			}
			results[i].Status, results[i].Event = http.StatusCreated, accepted(res.Message)
			if res.Message.Replayed {
				results[i].Status = http.StatusOK
			}
		}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"results": results})
}

// unknownField returns a field of obj not among known ("" when none).
func unknownField(obj map[string]json.RawMessage, known ...string) string {
	for k := range obj {
		found := false
		for _, n := range known {
			found = found || k == n
		}
		if !found {
			return k
		}
	}
	return ""
}

// readEvent reads one event object: app_id (a positive integer, or its
// decimal string as GraphQL ids are written), event_type (a string),
// biz_data (any JSON value, normally an object) and, in a batch,
// idempotency_key; a single publish takes its key from the header.
func readEvent(o map[string]json.RawMessage, headerKey *string, inBatch bool) (webhook.PublishRequest, *EventError) {
	var req webhook.PublishRequest
	known := []string{"app_id", "event_type", "biz_data"}
	if inBatch {
		known = append(known, "idempotency_key")
	}
	if f := unknownField(o, known...); f != "" {
		hint := ""
		if f == "idempotency_key" {
			hint = " (a single publish takes its key in the Idempotency-Key header)"
		}
		return req, &EventError{Error: "validation_failed", Field: f, Message: "unknown field " + strconv.Quote(f) + "; an event has " + strings.Join(known, ", ") + hint}
	}
	id, ok := appID(o["app_id"])
	if !ok {
		return req, &EventError{Error: "validation_failed", Field: "app_id", Message: "is required: the partner app's id, a positive integer"}
	}
	req.AppID = id
	t, present, isString := httpx.StringField(o, "event_type")
	if !present || !isString || t == "" {
		return req, &EventError{Error: "validation_failed", Field: "event_type", Message: "is required: an event type name from the catalogue (a string)"}
	}
	req.EventType = t
	bd, found := o["biz_data"]
	if !found || string(bd) == "null" {
		return req, &EventError{Error: "validation_failed", Field: "biz_data", Message: "is required: the event's JSON payload"}
	}
	req.BizData = bd
	key := headerKey
	if inBatch {
		k, present, isString := httpx.StringField(o, "idempotency_key")
		if present && !isString {
			return req, &EventError{Error: "validation_failed", Field: "idempotency_key", Message: "must be a string"}
		}
		if present {
			key = &k
		}
	}
	if key != nil {
		if *key == "" {
			return req, &EventError{Error: "validation_failed", Field: "idempotency_key", Message: "must not be empty; omit it for none"}
		}
		req.IdempotencyKey = *key
	}
	return req, nil
}

// appID reads app_id: a JSON integer ≥ 1, or a string of one.
func appID(raw json.RawMessage) (int, bool) {
	s := strings.TrimSpace(string(raw))
	if unq, err := strconv.Unquote(s); err == nil && strings.HasPrefix(s, `"`) {
		s = unq
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}

func accepted(m *webhook.Published) *EventAccepted {
	return &EventAccepted{ID: m.ID, AppID: m.AppID, EventType: m.EventType, IdempotencyKey: m.IdempotencyKey,
		CreatedAt: m.CreateTime.UTC(), Replayed: m.Replayed, Deliveries: m.DeliveryCount}
}

// eventError maps a domain error of one event to its status and body.
func eventError(err error) (int, *EventError) {
	e := &EventError{Message: errs.Message(err), Field: restField(errs.Field(err))}
	var se *catalogue.SchemaError
	switch {
	case errors.As(err, &se):
		// A well-formed request whose payload breaks the type's schema:
		// 422, naming where.
		e.Error, e.Path, e.Message = "schema_mismatch", se.Path, "biz_data "+se.Error()
		return http.StatusUnprocessableEntity, e
	case errors.Is(err, webhook.ErrAppNotFound):
		e.Error, e.Field = "app_not_found", "app_id"
		return http.StatusNotFound, e
	case errors.Is(err, catalogue.ErrTypeNotFound):
		e.Error, e.Field = "event_type_not_found", "event_type"
		return http.StatusNotFound, e
	}
	switch errs.KindOf(err) {
	case errs.Validation:
		e.Error = "validation_failed"
		return http.StatusBadRequest, e
	case errs.Forbidden:
		e.Error = "forbidden"
		return http.StatusForbidden, e
	case errs.Conflict:
		e.Error = "conflict"
		return http.StatusConflict, e
	case errs.NotFound:
		e.Error = "not_found"
		return http.StatusNotFound, e
	case errs.Unavailable:
		return http.StatusServiceUnavailable, &EventError{Error: "unavailable", Message: "a dependency is unavailable; retry later (with the same Idempotency-Key)"}
	}
	return http.StatusInternalServerError, &EventError{Error: "internal_error", Message: "internal error"}
}

// restField names a domain field as the REST body spells it.
func restField(f string) string {
	switch f {
	case "bizData":
		return "biz_data"
	case "eventType":
		return "event_type"
	case "idempotencyKey":
		return "idempotency_key"
	case "appID":
		return "app_id"
	}
	return f
}

// fail answers a request-wide error.
func (h Events) fail(w http.ResponseWriter, r *http.Request, err error) {
	if httpx.ClientGone(r) {
		httpx.Abandon(w, r, h.Log, "publish", err)
		return
	}
	status, body := eventError(err)
	switch status {
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
		h.Log.WarnContext(r.Context(), "publish: dependency unavailable", "err", err, "request_id", httpx.GetRequestID(r.Context()))
	case http.StatusInternalServerError:
		h.Log.ErrorContext(r.Context(), "publish", "err", err, "request_id", httpx.GetRequestID(r.Context()))
	}
	writeEventError(w, status, body)
}

func writeEventError(w http.ResponseWriter, status int, e *EventError) {
	httpx.WriteJSON(w, status, e)
}
