package portal

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"gatehouse/ent"
	"gatehouse/internal/webhook"
)

// endpointsData is the endpoints page's: the app's endpoints and the
// catalogue the add form chooses event types from.
type endpointsData struct {
	Endpoints []*ent.WebhookEndpoint
	Types     []string
}

// typeNames are the catalogue's event type names.
func (p *Portal) typeNames(r *http.Request) ([]string, error) {
	ts, err := p.cfg.Webhooks.EventTypes(r.Context())
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names, nil
}

func (p *Portal) endpoints(w http.ResponseWriter, r *http.Request) {
	app, _ := appFrom(r.Context())
	eps, err := p.cfg.Webhooks.AppEndpoints(r.Context(), app.ID)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	types, err := p.typeNames(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.render(w, r, http.StatusOK, "endpoints", "Webhook endpoints", endpointsData{Endpoints: eps, Types: types})
}

// own is the {id} endpoint if it belongs to the session's app; another
// app's id is not found, like an unknown one (and answered as such).
func (p *Portal) own(w http.ResponseWriter, r *http.Request) (*ent.WebhookEndpoint, bool) {
	app, _ := appFrom(r.Context())
	id, err := strconv.Atoi(chi.URLParam(r, "id"))
	if err != nil || id < 1 {
		p.fail(w, r, webhook.ErrEndpointNotFound)
		return nil, false
	}
	ep, err := p.cfg.Webhooks.AppEndpoint(r.Context(), app.ID, id)
	if err != nil {
		p.fail(w, r, err)
		return nil, false
	}
	return ep, true
}

// endpointData is one endpoint's page: its settings form and actions.
type endpointData struct {
	Endpoint *ent.WebhookEndpoint
	Types    []string
	Selected map[string]bool
}

func (p *Portal) endpoint(w http.ResponseWriter, r *http.Request) {
	ep, ok := p.own(w, r)
	if !ok {
		return
	}
	types, err := p.typeNames(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	sel := map[string]bool{}
	for _, t := range ep.EventTypes {
		sel[t] = true
	}
	p.render(w, r, http.StatusOK, "endpoint", "Endpoint "+ep.URL, endpointData{Endpoint: ep, Types: types, Selected: sel})
}

// formInput reads the add and edit forms: url, description, and the
// event types ticked (none: every type).
func formInput(r *http.Request) webhook.EndpointInput {
	u := strings.TrimSpace(r.PostFormValue("url"))
	d := r.PostFormValue("description")
	types := r.PostForm["event_type"]
	if types == nil {
		types = []string{}
	}
	return webhook.EndpointInput{URL: &u, Description: &d, EventTypes: &types}
}

func (p *Portal) createEndpoint(w http.ResponseWriter, r *http.Request) {
	app, _ := appFrom(r.Context())
	ep, secret, err := p.cfg.Webhooks.CreateEndpoint(r.Context(), app.ID, formInput(r))
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.render(w, r, http.StatusOK, "secret", "Endpoint added", secretData{
		Heading: "The signing secret of " + ep.URL, Secret: secret, Back: Base + "endpoints"})
}

func (p *Portal) updateEndpoint(w http.ResponseWriter, r *http.Request) {
	ep, ok := p.own(w, r)
	if !ok {
		return
	}
	if _, err := p.cfg.Webhooks.UpdateEndpoint(r.Context(), ep.ID, formInput(r)); err != nil {
		p.fail(w, r, err)
		return
	}
	p.done(w, r, "Endpoint saved.", Base+"endpoints/"+strconv.Itoa(ep.ID))
}

func (p *Portal) setEnabled(enabled bool) http.HandlerFunc {
	msg := "Endpoint disabled: its deliveries are held."
	if enabled {
		msg = "Endpoint enabled."
	}
	return func(w http.ResponseWriter, r *http.Request) {
		ep, ok := p.own(w, r)
		if !ok {
			return
		}
		if _, err := p.cfg.Webhooks.SetEndpointEnabled(r.Context(), ep.ID, enabled); err != nil {
			p.fail(w, r, err)
			return
		}
		p.done(w, r, msg, Base+"endpoints")
	}
}

// secretData is a page that asks to confirm a change, or shows a secret
// once.
type secretData struct {
	Confirm                 bool
	Question, Action, Label string
	Cancel                  string
	Heading, Secret, Back   string
}

// deleteEndpoint asks to confirm, then deletes.
func (p *Portal) deleteEndpoint(w http.ResponseWriter, r *http.Request) {
	ep, ok := p.own(w, r)
	if !ok {
		return
	}
	if r.PostFormValue("confirmed") != "yes" {
		p.render(w, r, http.StatusOK, "secret", "Delete the endpoint", secretData{
			Confirm: true, Action: Base + "endpoints/" + strconv.Itoa(ep.ID) + "/delete", Label: "Delete endpoint",
			Cancel: Base + "endpoints", Question: "Delete the endpoint " + ep.URL + "? Events are no longer sent to it."})
		return
	}
	if _, err := p.cfg.Webhooks.DeleteEndpoint(r.Context(), ep.ID); err != nil {
		p.fail(w, r, err)
		return
	}
	p.done(w, r, "Endpoint deleted.", Base+"endpoints")
}

// rotateSecret asks to confirm, then shows the new secret in the answer
// to the POST: never stored by the portal, never in a URL, never shown
// again (the page is not cached).
func (p *Portal) rotateSecret(w http.ResponseWriter, r *http.Request) {
	ep, ok := p.own(w, r)
	if !ok {
		return
	}
	if r.PostFormValue("confirmed") != "yes" {
		p.render(w, r, http.StatusOK, "secret", "Rotate the signing secret", secretData{
			Confirm: true, Action: Base + "endpoints/" + strconv.Itoa(ep.ID) + "/rotate", Label: "Rotate secret",
			Cancel:   Base + "endpoints",
			Question: "Give " + ep.URL + " a new signing secret? The old one keeps signing for 24 hours (deliveries carry both signatures)."})
		return
	}
	out, secret, err := p.cfg.Webhooks.RotateEndpointSecret(r.Context(), ep.ID)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.render(w, r, http.StatusOK, "secret", "New signing secret", secretData{
		Heading: "The new signing secret of " + out.URL, Secret: secret, Back: Base + "endpoints"})
}

// sendTest sends the chosen type's example (or a test event) to the
// endpoint.
func (p *Portal) sendTest(w http.ResponseWriter, r *http.Request) {
	app, _ := appFrom(r.Context())
	ep, ok := p.own(w, r)
	if !ok {
		return
	}
	d, err := p.cfg.Webhooks.SendTest(r.Context(), app.ID, ep.ID, r.PostFormValue("event_type"))
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.done(w, r, "Test event sent: delivery "+strconv.Itoa(d.ID)+".", Base+"deliveries/"+strconv.Itoa(d.ID))
}
