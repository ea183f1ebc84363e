// Package tickets is the ticket service's routes on the public listener
// (/api/tickets, no authentication): handlers decode, call one method of
// internal/ticket, encode.
package tickets

import (
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"

	"gatehouse/internal/errs"
	"gatehouse/internal/httpx"
	"gatehouse/internal/ticket"
)

// Tickets serves /api/tickets.
type Tickets struct {
	Svc *ticket.Service
	Log *slog.Logger
}

// ticketJSON is the wire shape of a ticket.
type ticketJSON struct {
	ID        int    `json:"id"`
	Title     string `json:"title"`
	Status    string `json:"status"`
	CreatedAt string `json:"created_at"`
}

func toTicketJSON(t ticket.Ticket) ticketJSON {
	return ticketJSON{
		ID:        t.ID,
		Title:     t.Title,
		Status:    string(t.Status),
		CreatedAt: t.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
	}
}

// Routes returns the ticket router, to be mounted at /api/tickets.
func (h Tickets) Routes() chi.Router {
	r := chi.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if httpx.QueryHasNUL(r.URL.RawQuery) {
				httpx.WriteError(w, http.StatusBadRequest, "validation_failed", httpx.MsgNUL)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	r.MethodNotAllowed(methodNotAllowed)
	r.Post("/", h.create)
	r.Get("/", h.list)
	r.Patch("/{id}/status", h.changeStatus)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, http.StatusNotFound, "not_found", "no such resource")
	})
	return r
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	httpx.WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method "+r.Method+" is not allowed here")
}

func (h Tickets) create(w http.ResponseWriter, r *http.Request) {
	obj, derr := httpx.DecodeObject(r)
	if derr != nil {
		httpx.WriteError(w, derr.Status, derr.Code, derr.Msg)
		return
	}
	title, present, ok := httpx.StringField(obj, "title")
	switch {
	case !ok:
		httpx.WriteError(w, http.StatusBadRequest, "validation_failed", "title must be a string")
		return
	case !present:
		httpx.WriteError(w, http.StatusBadRequest, "validation_failed", "title is required")
		return
	}
	t, err := h.Svc.Create(r.Context(), title)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/tickets/"+strconv.Itoa(t.ID))
	httpx.WriteJSON(w, http.StatusCreated, toTicketJSON(t))
}

func (h Tickets) list(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		httpx.WriteError(w, http.StatusBadRequest, "validation_failed", "query string is malformed")
		return
	}
	var p ticket.ListParams
	// Other parameters are ignored (cache busters, tracing); the known ones
	// must appear at most once.
	for _, name := range []string{"status", "limit", "cursor"} {
		if len(q[name]) > 1 {
			httpx.WriteError(w, http.StatusBadRequest, "validation_failed", "query parameter "+name+" given more than once")
			return
		}
	}
	if s := q.Get("status"); q.Has("status") {
		st, err := ticket.ParseStatus(s)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		p.Status = &st
	}
	if s := q.Get("limit"); q.Has("limit") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > ticket.MaxLimit {
			httpx.WriteError(w, http.StatusBadRequest, "validation_failed", "limit must be an integer between 1 and "+strconv.Itoa(ticket.MaxLimit))
			return
		}
		p.Limit = n
	}
	if q.Has("cursor") {
		p.Cursor = q.Get("cursor")
		if p.Cursor == "" {
			httpx.WriteError(w, http.StatusBadRequest, "validation_failed", "cursor must not be empty")
			return
		}
	}
	page, err := h.Svc.List(r.Context(), p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if page.Next != "" {
		next := url.Values{}
		next.Set("cursor", page.Next)
		if p.Status != nil {
			next.Set("status", string(*p.Status))
		}
		if p.Limit != 0 {
			next.Set("limit", strconv.Itoa(p.Limit))
		}
		w.Header().Set("Link", "</api/tickets?"+next.Encode()+`>; rel="next"`)
	}
	out := make([]ticketJSON, len(page.Tickets))
	for i, t := range page.Tickets {
		out[i] = toTicketJSON(t)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

func (h Tickets) changeStatus(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(chi.URLParam(r, "id"))
	if err != nil || id <= 0 {
		httpx.WriteError(w, http.StatusNotFound, "not_found", "ticket not found")
		return
	}
	obj, derr := httpx.DecodeObject(r)
	if derr != nil {
		httpx.WriteError(w, derr.Status, derr.Code, derr.Msg)
		return
	}
	s, present, ok := httpx.StringField(obj, "status")
	if !ok || !present {
		httpx.WriteError(w, http.StatusBadRequest, "validation_failed", "status is required and must be one of OPEN, DOING, DONE")
		return
	}
	to, err := ticket.ParseStatus(s)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	t, err := h.Svc.ChangeStatus(r.Context(), id, to)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, toTicketJSON(t))
}

// fail maps an error's kind to the ticket service's error shape: the one
// place this front door translates errors.
func (h Tickets) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch errs.KindOf(err) {
	case errs.Validation:
		httpx.WriteError(w, http.StatusBadRequest, "validation_failed", errs.Message(err))
	case errs.NotFound:
		httpx.WriteError(w, http.StatusNotFound, "not_found", errs.Message(err))
	case errs.InvalidState:
		httpx.WriteError(w, http.StatusConflict, "invalid_transition", err.Error())
	case errs.Conflict:
		httpx.WriteError(w, http.StatusConflict, "conflict", err.Error())
	case errs.Forbidden:
		httpx.WriteError(w, http.StatusForbidden, "forbidden", errs.Message(err))
	case errs.Unavailable:
		if httpx.ClientGone(r) {
			httpx.Abandon(w, r, h.Log, "ticket request", err)
			return
		}
		httpx.DependencyRefused(r.Context(), h.Log, "ticket request", err)
		w.Header().Set("Retry-After", "1")
		httpx.WriteError(w, http.StatusServiceUnavailable, "unavailable", "a dependency is unavailable, retry later")
	default:
		h.internal(w, r, err)
	}
}

// internal answers an unexpected error: its text goes to the log only.
func (h Tickets) internal(w http.ResponseWriter, r *http.Request, err error) {
	if httpx.ClientGone(r) {
		httpx.Abandon(w, r, h.Log, "ticket request", err)
		return
	}
	h.Log.ErrorContext(r.Context(), "ticket request failed", "err", err, "request_id", httpx.GetRequestID(r.Context()))
	httpx.WriteError(w, http.StatusInternalServerError, "internal_error", "internal error")
}
