package console

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
)

// An endpoint's retry schedule: the endpoints page shows it and lets an
// ADMIN key choose the default, the LONG preset or waits of its own,
// through updateWebhookEndpoint (the API checks the schedule's limits).

// longSchedule is the LONG preset's waits as the API reads them back
// (web-schema/endpoints.graphql, WebhookRetryPreset), to name it.
var longSchedule = []int{5, 300, 1800, 7200, 18000, 36000, 36000}

// Preset names the endpoint's schedule: DEFAULT (none of its own), LONG,
// or CUSTOM.
func (e endpointRow) Preset() string {
	switch {
	case e.RetrySchedule == nil:
		return "DEFAULT"
	case slices.Equal(e.RetrySchedule, longSchedule):
		return "LONG"
	}
	return "CUSTOM"
}

// Schedule describes the endpoint's retries for a person.
func (e endpointRow) Schedule() string {
	switch e.Preset() {
	case "DEFAULT":
		return "default: retries 1, 2, 4, 8, 16 s apart"
	case "LONG":
		return "long: retries " + waits(e.RetrySchedule) + " apart"
	}
	if len(e.RetrySchedule) == 0 {
		return "no retries"
	}
	return "retries " + waits(e.RetrySchedule) + " apart"
}

// Waits is the schedule as the custom field takes it: seconds, comma
// separated.
func (e endpointRow) Waits() string {
	s := make([]string, len(e.RetrySchedule))
	for i, w := range e.RetrySchedule {
		s[i] = strconv.Itoa(w)
	}
	return strings.Join(s, ", ")
}

// waits writes seconds as durations: 5 s, 5 min, 2 h.
func waits(secs []int) string {
	s := make([]string, len(secs))
	for i, w := range secs {
		switch {
		case w >= 3600 && w%3600 == 0:
			s[i] = strconv.Itoa(w/3600) + " h"
		case w >= 60 && w%60 == 0:
			s[i] = strconv.Itoa(w/60) + " min"
		default:
			s[i] = strconv.Itoa(w) + " s"
		}
	}
	return strings.Join(s, ", ")
}

// setRetrySchedule changes an endpoint's schedule: the preset chosen, or
// the custom waits typed (seconds, separated by commas or spaces).
func (c *Console) setRetrySchedule(w http.ResponseWriter, r *http.Request) {
	input := map[string]any{}
	switch preset := r.PostFormValue("preset"); preset {
	case "DEFAULT", "LONG":
		input["retryPreset"] = preset
	case "CUSTOM":
		secs, ok := parseWaits(r.PostFormValue("waits"))
		if !ok {
			c.render(w, r, http.StatusUnprocessableEntity, "error", "Not done", errorData{
				Message: "Custom waits are whole seconds separated by commas, e.g. 10, 60, 600."})
			return
		}
		input["retrySchedule"] = secs
	default:
		c.render(w, r, http.StatusBadRequest, "error", "Not done", errorData{Message: "Choose a retry schedule."})
		return
	}
	doc := `mutation ConsoleRetrySchedule($id: ID!, $input: UpdateWebhookEndpointInput!) { updateWebhookEndpoint(id: $id, input: $input) { id } }`
	if err := c.query(r, doc, map[string]any{"id": chi.URLParam(r, "id"), "input": input}, nil); err != nil {
		c.fail(w, r, err)
		return
	}
	c.done(w, r, "Retry schedule saved: waiting deliveries follow it from their next attempt.", endpointBack(r))
}

// parseWaits reads "10, 60 600" as [10 60 600]; an empty text is no
// retries at all.
func parseWaits(s string) ([]int, bool) {
	out := []int{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}
