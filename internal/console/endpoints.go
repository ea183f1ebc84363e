package console

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/go-chi/chi/v5"

	"gatehouse/internal/ui"
)

func (c *Console) endpointRoutes(r chi.Router) {
	r.Get("/endpoints", c.endpoints)
	r.Post("/endpoints/{id}/enable", c.endpointAction("enableWebhookEndpoint", "Endpoint enabled."))
	r.Post("/endpoints/{id}/disable", c.endpointAction("disableWebhookEndpoint", "Endpoint disabled: its deliveries are held."))
	r.Post("/endpoints/{id}/end-overlap", c.endpointAction("endWebhookEndpointSecretOverlap", "The previous secret no longer signs."))
	r.Post("/endpoints/{id}/rotate", c.rotateEndpointSecret)
	r.Post("/endpoints/{id}/retry-schedule", c.setRetrySchedule)
}

// endpointRow is an endpoint with its health.
type endpointRow struct {
	ID, AppID, URL, Description, Breaker string
	Enabled                              bool
	EventTypes                           []string
	PreviousSecretExpiresAt              *string
	RetrySchedule                        []int // nil: the default
	Health                               struct {
		SuccessRate       *float64
		Succeeded, Failed int
		LastError         *string
		LastErrorAt       *string
		Hours             []struct {
			Start             time.Time
			Succeeded, Failed int
		}
	}
}

// Chart is the endpoint's last 24 h as a small chart.
func (e endpointRow) Chart() ui.Chart {
	n := len(e.Health.Hours)
	good, bad, labels := make([]int, n), make([]int, n), make([]string, n)
	for i, h := range e.Health.Hours {
		good[i], bad[i], labels[i] = h.Succeeded, h.Failed, h.Start.UTC().Format("15:04")
	}
	return ui.Bars(good, bad, labels, fmt.Sprintf("Last 24 h: %d attempts succeeded, %d failed", e.Health.Succeeded, e.Health.Failed))
}

type endpointsData struct {
	Apps         []option
	App, AppName string
	Endpoints    []endpointRow
}

const endpointsQuery = `query ConsoleEndpoints($id: ID!) {
  partnerApps(where: {id: $id}, first: 1) { edges { node { id appName webhookEndpoints {
    id appID url description enabled eventTypes breaker previousSecretExpiresAt retrySchedule
    health { successRate succeeded failed lastError lastErrorAt hours { start succeeded failed } }
  } } } }
}`

// endpoints lists one app's endpoints with their health (the first app
// when none is chosen).
func (c *Console) endpoints(w http.ResponseWriter, r *http.Request) {
	apps, err := c.appOptions(r)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	data := endpointsData{Apps: apps, App: r.URL.Query().Get("app")}
	if data.App == "" && len(apps) > 0 {
		data.App = apps[0].Value
	}
	if data.App != "" {
		var out struct {
			PartnerApps struct {
				Edges []struct {
					Node struct {
						AppName          string
						WebhookEndpoints []endpointRow
					}
				}
			}
		}
		if err := c.query(r, endpointsQuery, map[string]any{"id": data.App}, &out); err != nil {
			c.fail(w, r, err)
			return
		}
		if e := out.PartnerApps.Edges; len(e) > 0 {
			data.AppName, data.Endpoints = e[0].Node.AppName, e[0].Node.WebhookEndpoints
		}
	}
	c.render(w, r, http.StatusOK, "endpoints", "Endpoints", data)
}

// endpointBack is the endpoints page of the app the form came from.
func endpointBack(r *http.Request) string {
	if app := r.PostFormValue("app"); app != "" {
		return Base + "endpoints?app=" + url.QueryEscape(app)
	}
	return Base + "endpoints"
}

func (c *Console) endpointAction(mutation, msg string) http.HandlerFunc {
	doc := fmt.Sprintf(`mutation ConsoleEndpointAction($id: ID!) { %s(id: $id) { id } }`, mutation)
	return func(w http.ResponseWriter, r *http.Request) {
		if err := c.query(r, doc, map[string]any{"id": chi.URLParam(r, "id")}, nil); err != nil {
			c.fail(w, r, err)
			return
		}
		c.done(w, r, msg, endpointBack(r))
	}
}

// secretData is a page that shows a secret once (or asks to confirm
// making it).
type secretData struct {
	Confirm                 bool
	Question, Action, Label string
	Cancel                  string
	Fields                  map[string]string
	Heading, SecretLabel    string
	Secret, Back            string
}

// rotateEndpointSecret asks to confirm, then rotates and shows the new
// secret in the answer to the POST: never stored by the console, never in
// a URL, never shown again (the page is not cached).
func (c *Console) rotateEndpointSecret(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	back := endpointBack(r)
	if r.PostFormValue("confirmed") != "yes" {
		c.render(w, r, http.StatusOK, "secret", "Rotate the endpoint secret", secretData{
			Confirm: true, Action: Base + "endpoints/" + url.PathEscape(id) + "/rotate", Label: "Rotate secret", Cancel: back,
			Question: "Give this endpoint a new signing secret? The old one keeps signing for 24 hours (deliveries carry both signatures), unless you end the overlap.",
			Fields:   map[string]string{"app": r.PostFormValue("app")},
		})
		return
	}
	var out struct {
		RotateWebhookEndpointSecret struct {
			Secret   string
			Endpoint struct{ URL string }
		}
	}
	doc := `mutation ConsoleRotateEndpoint($id: ID!) { rotateWebhookEndpointSecret(id: $id) { secret endpoint { url } } }`
	if err := c.query(r, doc, map[string]any{"id": id}, &out); err != nil {
		c.fail(w, r, err)
		return
	}
	p := out.RotateWebhookEndpointSecret
	c.render(w, r, http.StatusOK, "secret", "New endpoint secret", secretData{
		Heading: "The new signing secret of " + p.Endpoint.URL, SecretLabel: "Signing secret", Secret: p.Secret, Back: back})
}
