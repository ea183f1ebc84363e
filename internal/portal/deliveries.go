package portal

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"

	"gatehouse/ent"
	"gatehouse/internal/errs"
	"gatehouse/internal/webhook"
)

// deliveryFilter is the deliveries page's filter, as the form sends it.
type deliveryFilter struct {
	Status, Type, Endpoint string
}

type deliveriesData struct {
	Filter     deliveryFilter
	Rows       []*ent.WebhookDelivery
	Statuses   []string
	Types      []string
	Endpoints  []*ent.WebhookEndpoint
	Prev, Next string
}

var statuses = []string{"PENDING", "RETRYING", "SUCCESS", "FAILED", "CANCELLED"}

// deliveries lists the app's deliveries, newest first, a page at a time
// (before: the last id of the previous page).
func (p *Portal) deliveries(w http.ResponseWriter, r *http.Request) {
	app, _ := appFrom(r.Context())
	q := r.URL.Query()
	d := deliveriesData{Filter: deliveryFilter{Status: q.Get("status"), Type: q.Get("type"), Endpoint: q.Get("endpoint")}, Statuses: statuses}
	f := webhook.DeliveryFilter{Status: d.Filter.Status, EventType: d.Filter.Type}
	for name, dst := range map[string]*int{"endpoint": &f.EndpointID, "before": &f.Before} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				p.fail(w, r, errs.Invalid(name, "must be a positive whole number"))
				return
			}
			*dst = n
		}
	}
	rows, more, err := p.cfg.Webhooks.AppDeliveries(r.Context(), app.ID, f)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	d.Rows = rows
	if d.Types, err = p.typeNames(r); err != nil {
		p.fail(w, r, err)
		return
	}
	if d.Endpoints, err = p.cfg.Webhooks.AppEndpoints(r.Context(), app.ID); err != nil {
		p.fail(w, r, err)
		return
	}
	if more {
		next := url.Values{"status": {d.Filter.Status}, "type": {d.Filter.Type}, "endpoint": {d.Filter.Endpoint},
			"before": {strconv.Itoa(rows[len(rows)-1].ID)}}
		d.Next = Base + "deliveries?" + next.Encode()
	}
	if f.Before != 0 {
		d.Prev = Base + "deliveries?" + url.Values{"status": {d.Filter.Status}, "type": {d.Filter.Type}, "endpoint": {d.Filter.Endpoint}}.Encode()
	}
	p.render(w, r, http.StatusOK, "deliveries", "Deliveries", d)
}

// deliveryID is the {id} of the route; a malformed id is not found.
func (p *Portal) deliveryID(w http.ResponseWriter, r *http.Request) (int, bool) {
	id, err := strconv.Atoi(chi.URLParam(r, "id"))
	if err != nil || id < 1 {
		p.fail(w, r, webhook.ErrNotFound)
		return 0, false
	}
	return id, true
}

func (p *Portal) delivery(w http.ResponseWriter, r *http.Request) {
	app, _ := appFrom(r.Context())
	id, ok := p.deliveryID(w, r)
	if !ok {
		return
	}
	d, err := p.cfg.Webhooks.AppDelivery(r.Context(), app.ID, id)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.render(w, r, http.StatusOK, "delivery", "Delivery "+d.EventID, d)
}

// resend sends a delivery of the app again (AppResend: another app's id
// is not found).
func (p *Portal) resend(w http.ResponseWriter, r *http.Request) {
	app, _ := appFrom(r.Context())
	id, ok := p.deliveryID(w, r)
	if !ok {
		return
	}
	if _, err := p.cfg.Webhooks.AppResend(r.Context(), app.ID, id); err != nil {
		p.fail(w, r, err)
		return
	}
	p.done(w, r, "Delivery "+strconv.Itoa(id)+" queued to be sent again.", Base+"deliveries")
}
