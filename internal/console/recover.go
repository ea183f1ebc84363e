package console

import (
	"fmt"
	"net/http"
	"time"
)

// recoverData is the recover page's: the form, then the confirmation.
type recoverData struct {
	Apps             []option
	App, Since       string
	Count            int
	Confirm          bool
	Question, Action string
	Fields           map[string]string
}

const recoverCount = `query ConsoleRecoverCount($where: WebhookDeliveryWhereInput) {
  webhookDeliveries(where: $where, first: 0) { totalCount }
}`

const appsQuery = `query ConsoleApps { partnerApps(first: 100, orderBy: {field: APP_NAME, direction: ASC}) { edges { node { id appName } } } }`

func (c *Console) appOptions(r *http.Request) ([]option, error) {
	var out struct {
		PartnerApps struct {
			Edges []struct{ Node struct{ ID, AppName string } }
		}
	}
	if err := c.query(r, appsQuery, nil, &out); err != nil {
		return nil, err
	}
	var opts []option
	for _, e := range out.PartnerApps.Edges {
		opts = append(opts, option{Value: e.Node.ID, Label: e.Node.AppName})
	}
	return opts, nil
}

// recoverForm asks for the scope of a bulk recover (an app, a time).
func (c *Console) recoverForm(w http.ResponseWriter, r *http.Request) {
	apps, err := c.appOptions(r)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	since := time.Now().UTC().Add(-24 * time.Hour).Format(timeLayout)
	c.render(w, r, http.StatusOK, "recover", "Recover failed deliveries", recoverData{Apps: apps, Since: since})
}

// recoverFailed first shows how many FAILED deliveries the scope holds and
// asks to confirm; the confirmed form re-queues them
// (resendFailedWebhookDeliveries) and says how many went.
func (c *Console) recoverFailed(w http.ResponseWriter, r *http.Request) {
	app, since := r.PostFormValue("app"), r.PostFormValue("since")
	vars := map[string]any{}
	where := map[string]any{"status": "FAILED"}
	if app != "" {
		vars["appID"], where["appID"] = app, app
	}
	if since != "" {
		at, err := time.Parse(timeLayout, since)
		if err != nil {
			c.fail(w, r, &apiError{Status: http.StatusUnprocessableEntity, Code: "VALIDATION_FAILED", Message: "Since is not a date and time (YYYY-MM-DDThh:mm, UTC)."})
			return
		}
		s := at.UTC().Format(time.RFC3339)
		vars["since"], where["createTimeGTE"] = s, s
	}
	if r.PostFormValue("confirmed") != "yes" {
		var out struct{ WebhookDeliveries struct{ TotalCount int } }
		if err := c.query(r, recoverCount, map[string]any{"where": where}, &out); err != nil {
			c.fail(w, r, err)
			return
		}
		n := out.WebhookDeliveries.TotalCount
		c.render(w, r, http.StatusOK, "recover", "Recover failed deliveries", recoverData{
			Confirm: true, Count: n, Action: Base + "deliveries/recover",
			Question: fmt.Sprintf("Queue %d failed deliveries again? Each gets a new round of attempts.", n),
			Fields:   map[string]string{"app": app, "since": since},
		})
		return
	}
	var out struct{ ResendFailedWebhookDeliveries int }
	doc := `mutation ConsoleRecover($appID: ID, $since: Time) { resendFailedWebhookDeliveries(appID: $appID, since: $since) }`
	if err := c.query(r, doc, vars, &out); err != nil {
		c.fail(w, r, err)
		return
	}
	c.done(w, r, fmt.Sprintf("Queued %d failed deliveries again.", out.ResendFailedWebhookDeliveries), Base+"deliveries")
}
