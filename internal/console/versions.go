package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"time"
)

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

type versionRow struct {
	Name                string
	Released            *string
	Deprecation, Sunset *string
	Retired             bool
	CallCountLast30Days int64 `json:",string"`
}

// versionsData: the versions, and calls per day and version (all apps).
type versionsData struct {
	Versions []versionRow
	Names    []string
	Days     []dayRow
	// Partial: more usage rows than maxUsagePages pages; older days are short.
	Partial bool
}

// maxUsagePages bounds the usage rows one page reads (100 each).
const maxUsagePages = 20

type dayRow struct {
	Day    string
	Counts []int64
}

// versions shows each API version's lifecycle and its calls per day
// over the last 30 days (summed over apps from apiUsages).
func (c *Console) versions(w http.ResponseWriter, r *http.Request) {
	since := time.Now().UTC().AddDate(0, 0, -29).Format("2006-01-02")
	type usage struct {
		Version, Day string
		CallCount    int64 `json:",string"`
	}
	var out struct {
		APIVersions []versionRow
		APIUsages   struct {
			Edges    []struct{ Node usage }
			PageInfo struct {
				HasNextPage bool
				EndCursor   *string
			}
		}
	}
	// One row per app, version and day: an installation with many apps
	// takes several pages (bounded: the page says when it stopped short).
	doc := `query ConsoleVersions($since: String!, $after: Cursor) {
  apiVersions { name released deprecation sunset retired callCountLast30Days }
  apiUsages(first: 100, after: $after, where: {dayGTE: $since}, orderBy: {field: DAY, direction: DESC}) { edges { node { version day callCount } } pageInfo { hasNextPage endCursor } }
}`
	var usages []usage
	vars := map[string]any{"since": since}
	data := versionsData{}
	for page := 0; ; page++ {
		if err := c.query(r, doc, vars, &out); err != nil {
			c.fail(w, r, err)
			return
		}
		for _, e := range out.APIUsages.Edges {
			usages = append(usages, e.Node)
		}
		pi := out.APIUsages.PageInfo
		if !pi.HasNextPage || pi.EndCursor == nil {
			break
		}
		if page == maxUsagePages-1 {
			data.Partial = true
			break
		}
		vars["after"] = *pi.EndCursor
	}
	data.Versions = out.APIVersions
	col := map[string]int{}
	for i, v := range out.APIVersions {
		data.Names = append(data.Names, v.Name)
		col[v.Name] = i
	}
	days := map[string][]int64{}
	for _, n := range usages {
		i, ok := col[n.Version]
		if !ok {
			continue
		}
		if days[n.Day] == nil {
			days[n.Day] = make([]int64, len(col))
		}
		days[n.Day][i] += n.CallCount
	}
	for d, cs := range days {
		data.Days = append(data.Days, dayRow{Day: d, Counts: cs})
	}
	sort.Slice(data.Days, func(i, j int) bool { return data.Days[i].Day > data.Days[j].Day })
	c.render(w, r, http.StatusOK, "versions", "API versions", data)
}

type eventTypeRow struct {
	Name, Description string
	BuiltIn           bool
	Schema, Example   json.RawMessage
}

// Pretty is a JSON value indented for reading.
func pretty(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// SchemaText and ExampleText are the schema and example, indented.
func (e eventTypeRow) SchemaText() string  { return pretty(e.Schema) }
func (e eventTypeRow) ExampleText() string { return pretty(e.Example) }

func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	var out struct{ WebhookEventTypes []eventTypeRow }
	if err := c.query(r, `query ConsoleEvents { webhookEventTypes { name description builtIn schema example } }`, nil, &out); err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "events", "Event catalogue", listData{Rows: out.WebhookEventTypes})
}
