package console_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gatehouse/internal/testenv"
)

// TestConsoleRetrySchedule: the endpoints page shows each endpoint's
// retry schedule; an ADMIN sets the LONG preset, waits of its own and the
// default again through the API, which refuses a schedule past its limits;
// a READ_ONLY key sees no form and its POST is refused.
func TestConsoleRetrySchedule(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := start(t, b, "shop")
		list := "/console/endpoints?app=" + strconv.Itoa(f.appID)
		action := "/console/endpoints/" + strconv.Itoa(f.endpoint) + "/retry-schedule"
		schedule := func() []int {
			ep, err := f.env.App.DB.Client.WebhookEndpoint.Get(context.Background(), f.endpoint)
			if err != nil {
				t.Fatal(err)
			}
			return ep.RetrySchedule
		}
		c := newClient(t, f)
		c.signIn(f.admin)
		p := c.get(list)
		for _, want := range []string{"Retry schedule: default: retries 1, 2, 4, 8, 16 s apart", `<label for="rs-` + strconv.Itoa(f.endpoint) + `">Retry schedule</label>`, "Save schedule"} {
			if !strings.Contains(p.body, want) {
				t.Fatalf("the endpoints page lacks %q:\n%s", want, p.body)
			}
		}
		post := func(preset, waits string) page {
			t.Helper()
			return c.do("POST", action, url.Values{"csrf": {p.csrf(t)}, "app": {strconv.Itoa(f.appID)}, "preset": {preset}, "waits": {waits}})
		}
		if r := post("LONG", ""); r.status != http.StatusSeeOther || r.header.Get("Location") != list {
			t.Fatalf("LONG: %d %s %s", r.status, r.header.Get("Location"), r.body)
		}
		if got := schedule(); !slices.Equal(got, []int{5, 300, 1800, 7200, 18000, 36000, 36000}) {
			t.Fatalf("after LONG: %v", got)
		}
		if body := c.get(list).body; !strings.Contains(body, "long: retries 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h apart") ||
			!strings.Contains(body, `<option value="LONG" selected>`) {
			t.Fatalf("the page after LONG:\n%s", body)
		}
		if r := post("CUSTOM", "10, 60 600"); r.status != http.StatusSeeOther {
			t.Fatalf("custom: %d %s", r.status, r.body)
		}
		if got := schedule(); !slices.Equal(got, []int{10, 60, 600}) {
			t.Fatalf("after custom waits: %v", got)
		}
		if body := c.get(list).body; !strings.Contains(body, `value="10, 60, 600"`) || !strings.Contains(body, "retries 10 s, 1 min, 10 min apart") {
			t.Fatalf("the page after custom waits:\n%s", body)
		}
		tooMany := strings.Repeat("1,", 25) + "1"
		for _, bad := range [][2]string{{"CUSTOM", "ten"}, {"CUSTOM", tooMany}, {"WEEKLY", ""}} {
			if r := post(bad[0], bad[1]); r.status < 400 {
				t.Fatalf("%v: %d", bad, r.status)
			}
		}
		if got := schedule(); !slices.Equal(got, []int{10, 60, 600}) {
			t.Fatalf("refused schedules changed it: %v", got)
		}
		if r := post("DEFAULT", ""); r.status != http.StatusSeeOther {
			t.Fatalf("DEFAULT: %d %s", r.status, r.body)
		}
		if got := schedule(); got != nil {
			t.Fatalf("after DEFAULT: %v", got)
		}

		ro := newClient(t, f)
		ro.signIn(f.readOnly)
		rp := ro.get(list)
		if !strings.Contains(rp.body, "Retry schedule: default") || strings.Contains(rp.body, "Save schedule") {
			t.Fatalf("the READ_ONLY page:\n%s", rp.body)
		}
		r := ro.do("POST", action, url.Values{"csrf": {rp.csrf(t)}, "preset": {"LONG"}})
		if r.status != http.StatusForbidden || schedule() != nil {
			t.Fatalf("a READ_ONLY POST: %d, schedule %v", r.status, schedule())
		}
	})
}
