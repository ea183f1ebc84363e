package portal

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"time"

	"gatehouse/internal/partner"
)

// eventTypeRow is one type of the catalogue, its JSON indented to read.
type eventTypeRow struct {
	Name, Description, Schema, Example string
}

func indent(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// events is the event catalogue: what the app may subscribe to.
func (p *Portal) events(w http.ResponseWriter, r *http.Request) {
	ts, err := p.cfg.Webhooks.EventTypes(r.Context())
	if err != nil {
		p.fail(w, r, err)
		return
	}
	rows := make([]eventTypeRow, len(ts))
	for i, t := range ts {
		rows[i] = eventTypeRow{Name: t.Name, Description: t.Description, Schema: indent(t.Schema), Example: indent(t.Example)}
	}
	p.render(w, r, http.StatusOK, "events", "Event catalogue", rows)
}

// versionRow is a version the app called in the window.
type versionRow struct {
	Version            string
	Calls              int64
	Deprecated, Sunset time.Time
}

type usageData struct {
	WindowDays, RateLimit int
	Days                  []partner.DayCount
	Versions              []versionRow
	Deprecated            []versionRow
}

// usage shows the app's calls per day and version, its rate limit, and
// the retiring versions it still calls.
func (p *Portal) usage(w http.ResponseWriter, r *http.Request) {
	app, _ := appFrom(r.Context())
	d := usageData{WindowDays: partner.UsageWindowDays, RateLimit: app.RateLimit}
	if p.cfg.Usage != nil {
		days, err := p.cfg.Usage.AppDaily(r.Context(), app.ID)
		if err != nil {
			p.fail(w, r, err)
			return
		}
		d.Days = days
	}
	totals := map[string]int64{}
	for _, day := range d.Days {
		totals[day.Version] += day.Calls
	}
	for _, name := range slices.Sorted(maps.Keys(totals)) {
		v, _ := p.cfg.Versions.Get(name)
		row := versionRow{Version: name, Calls: totals[name], Deprecated: v.Deprecated, Sunset: v.Sunset}
		d.Versions = append(d.Versions, row)
		if !v.Deprecated.IsZero() || !v.Sunset.IsZero() {
			d.Deprecated = append(d.Deprecated, row)
		}
	}
	p.render(w, r, http.StatusOK, "usage", "Usage", d)
}
