package tickets_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/apikey"
	"gatehouse/internal/app/apptest"
	"gatehouse/internal/testenv"
)

type ticketBody struct {
	ID        int    `json:"id"`
	Title     string `json:"title"`
	Status    string `json:"status"`
	CreatedAt string `json:"created_at"`
}

func createTicket(t *testing.T, e *apptest.Env, title string) ticketBody {
	t.Helper()
	r := e.Do(t, "POST", e.PublicURL+"/api/tickets", fmt.Sprintf(`{"title":%q}`, title), apptest.JSONBody...)
	if r.Status != http.StatusCreated {
		t.Fatalf("create %q: %d %s", title, r.Status, r.Body)
	}
	var tk ticketBody
	r.JSON(t, &tk)
	return tk
}

func errorCode(t *testing.T, r apptest.Response) string {
	t.Helper()
	m := r.Map(t)
	code, _ := m["error"].(string)
	if msg, _ := m["message"].(string); msg == "" {
		t.Errorf("error body %s has no message", r.Body)
	}
	return code
}

var rfc3339ms = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func TestTicketCreate(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		before := time.Now().Add(-time.Second)
		r := e.Do(t, "POST", e.PublicURL+"/api/tickets", `{"title":"  Printer on 3F jams  "}`, apptest.JSONBody...)
		if r.Status != http.StatusCreated {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		var tk ticketBody
		r.JSON(t, &tk)
		if tk.ID <= 0 || tk.Title != "Printer on 3F jams" || tk.Status != "OPEN" {
			t.Fatalf("ticket = %+v", tk)
		}
		if !rfc3339ms.MatchString(tk.CreatedAt) {
			t.Fatalf("created_at %q is not RFC 3339 UTC with milliseconds", tk.CreatedAt)
		}
		at, _ := time.Parse(time.RFC3339Nano, tk.CreatedAt)
		if at.Before(before) || at.After(time.Now().Add(time.Second)) {
			t.Fatalf("created_at %v is not now", at)
		}
		if got := r.Header.Get("Location"); got != fmt.Sprintf("/api/tickets/%d", tk.ID) {
			t.Fatalf("Location = %q", got)
		}
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("Content-Type = %q", r.Header.Get("Content-Type"))
		}
		// Exactly these four fields.
		if m := r.Map(t); len(m) != 4 {
			t.Fatalf("ticket has fields %v, want id, title, status, created_at", m)
		}
		// The new ticket appears in the list.
		var list []ticketBody
		e.Do(t, "GET", e.PublicURL+"/api/tickets", "").JSON(t, &list)
		if len(list) != 1 || list[0] != tk {
			t.Fatalf("list = %+v, want [%+v]", list, tk)
		}
	})
}

func TestTicketCreateRejectsBadInput(t *testing.T) {
	long := strings.Repeat("é", 201)
	cases := []struct {
		name, body, ctype string
		status            int
		code              string
	}{
		{"missing title", `{}`, "application/json", 400, "validation_failed"},
		{"null title", `{"title":null}`, "application/json", 400, "validation_failed"},
		{"empty title", `{"title":""}`, "application/json", 400, "validation_failed"},
		{"blank title", `{"title":"  \t "}`, "application/json", 400, "validation_failed"},
		{"number title", `{"title":42}`, "application/json", 400, "validation_failed"},
		{"bool title", `{"title":true}`, "application/json", 400, "validation_failed"},
		{"object title", `{"title":{"a":1}}`, "application/json", 400, "validation_failed"},
		{"array title", `{"title":["a"]}`, "application/json", 400, "validation_failed"},
		{"too long", `{"title":"` + long + `"}`, "application/json", 400, "validation_failed"},
		{"bell character", `{"title":"ring\u0007"}`, "application/json", 400, "validation_failed"},
		{"newline inside", `{"title":"two\nlines"}`, "application/json", 400, "validation_failed"},
		{"C1 control", `{"title":"x\u0085y"}`, "application/json", 400, "validation_failed"},
		{"array body", `["title"]`, "application/json", 400, "validation_failed"},
		{"string body", `"title"`, "application/json", 400, "validation_failed"},
		{"null body", `null`, "application/json", 400, "validation_failed"},
		{"empty body", ``, "application/json", 400, "invalid_json"},
		{"broken json", `{"title":`, "application/json", 400, "invalid_json"},
		{"single quotes", `{'title':'x'}`, "application/json", 400, "invalid_json"},
		{"trailing garbage", `{"title":"x"} {"title":"y"}`, "application/json", 400, "invalid_json"},
		{"invalid UTF-8", "{\"title\":\"bad \xff\xfe bytes\"}", "application/json", 400, "invalid_json"},
		{"text/plain", `{"title":"x"}`, "text/plain", 415, "unsupported_media_type"},
		{"xml", `<title>x</title>`, "application/xml", 415, "unsupported_media_type"},
		{"multipart", `{"title":"x"}`, "multipart/form-data; boundary=x", 415, "unsupported_media_type"},
		{"huge body", `{"title":"x","pad":"` + strings.Repeat("a", 70<<10) + `"}`, "application/json", 413, "payload_too_large"},
	}
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := e.Do(t, "POST", e.PublicURL+"/api/tickets", c.body, "Content-Type", c.ctype)
				if r.Status != c.status {
					t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Body)
				}
				if code := errorCode(t, r); code != c.code {
					t.Fatalf("error %q, want %q", code, c.code)
				}
			})
		}
		// Nothing was stored by any of them.
		var list []ticketBody
		e.Do(t, "GET", e.PublicURL+"/api/tickets", "").JSON(t, &list)
		if len(list) != 0 {
			t.Fatalf("rejected requests stored tickets: %+v", list)
		}
	})
}

func TestTicketCreateAcceptsEdgeTitles(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		for _, title := range []string{
			strings.Repeat("工", 200), // 200 characters, 600 bytes
			"🚀 launch pad 🖨️",
			`Robert'); DROP TABLE tickets;--`,
			"<script>alert(1)</script>",
			"x",
		} {
			tk := createTicket(t, e, title)
			if tk.Title != title {
				t.Fatalf("stored %q, want %q", tk.Title, title)
			}
		}
		// curl -d sends application/x-www-form-urlencoded; a JSON body is accepted.
		r := e.Do(t, "POST", e.PublicURL+"/api/tickets", `{"title":"from curl"}`, "Content-Type", "application/x-www-form-urlencoded")
		if r.Status != 201 {
			t.Fatalf("curl-style post: %d %s", r.Status, r.Body)
		}
		r = e.Do(t, "POST", e.PublicURL+"/api/tickets", `{"title":"no type"}`)
		if r.Status != 201 {
			t.Fatalf("post without Content-Type: %d %s", r.Status, r.Body)
		}
	})
}

func TestTicketStatusMoves(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		patch := func(id int, body string) apptest.Response {
			return e.Do(t, "PATCH", fmt.Sprintf("%s/api/tickets/%d/status", e.PublicURL, id), body, apptest.JSONBody...)
		}
		statusOf := func(id int) string {
			var list []ticketBody
			e.Do(t, "GET", e.PublicURL+"/api/tickets?limit=500", "").JSON(t, &list)
			for _, tk := range list {
				if tk.ID == id {
					return tk.Status
				}
			}
			t.Fatalf("ticket %d not listed", id)
			return ""
		}
		tk := createTicket(t, e, "move me")

		// Forbidden moves from OPEN leave it OPEN.
		for _, to := range []string{"DONE", "OPEN"} {
			r := patch(tk.ID, `{"status":"`+to+`"}`)
			if r.Status != http.StatusConflict || errorCode(t, r) != "invalid_transition" {
				t.Fatalf("OPEN→%s: %d %s", to, r.Status, r.Body)
			}
			if s := statusOf(tk.ID); s != "OPEN" {
				t.Fatalf("after rejected OPEN→%s status is %s", to, s)
			}
		}
		// Creating and listing still work after a rejected move.
		other := createTicket(t, e, "still works")

		r := patch(tk.ID, `{"status":"DOING"}`)
		var got ticketBody
		r.JSON(t, &got)
		if r.Status != 200 || got.Status != "DOING" || got.ID != tk.ID || got.Title != tk.Title || got.CreatedAt != tk.CreatedAt {
			t.Fatalf("OPEN→DOING: %d %s", r.Status, r.Body)
		}
		for _, to := range []string{"OPEN", "DOING"} {
			if r := patch(tk.ID, `{"status":"`+to+`"}`); r.Status != 409 {
				t.Fatalf("DOING→%s: %d %s", to, r.Status, r.Body)
			}
		}
		if r := patch(tk.ID, `{"status":"DONE"}`); r.Status != 200 {
			t.Fatalf("DOING→DONE: %d %s", r.Status, r.Body)
		}
		for _, to := range []string{"OPEN", "DOING", "DONE"} {
			if r := patch(tk.ID, `{"status":"`+to+`"}`); r.Status != 409 {
				t.Fatalf("DONE→%s: %d %s", to, r.Status, r.Body)
			}
		}
		if s := statusOf(tk.ID); s != "DONE" {
			t.Fatalf("final status %s", s)
		}
		if s := statusOf(other.ID); s != "OPEN" {
			t.Fatalf("untouched ticket is %s", s)
		}
	})
}

func TestTicketStatusBadRequests(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		tk := createTicket(t, e, "target")
		url := fmt.Sprintf("%s/api/tickets/%d/status", e.PublicURL, tk.ID)
		cases := []struct {
			name, url, body, ctype string
			status                 int
			code                   string
		}{
			{"unknown status", url, `{"status":"CLOSED"}`, "application/json", 400, "validation_failed"},
			{"lower case", url, `{"status":"doing"}`, "application/json", 400, "validation_failed"},
			{"missing status", url, `{}`, "application/json", 400, "validation_failed"},
			{"number status", url, `{"status":1}`, "application/json", 400, "validation_failed"},
			{"broken json", url, `{"status":`, "application/json", 400, "invalid_json"},
			{"text/plain", url, `{"status":"DOING"}`, "text/plain", 415, "unsupported_media_type"},
			{"unknown id", e.PublicURL + "/api/tickets/999999/status", `{"status":"DOING"}`, "application/json", 404, "not_found"},
			{"non-numeric id", e.PublicURL + "/api/tickets/abc/status", `{"status":"DOING"}`, "application/json", 404, "not_found"},
			{"negative id", e.PublicURL + "/api/tickets/-1/status", `{"status":"DOING"}`, "application/json", 404, "not_found"},
			{"zero id", e.PublicURL + "/api/tickets/0/status", `{"status":"DOING"}`, "application/json", 404, "not_found"},
			{"overflowing id", e.PublicURL + "/api/tickets/99999999999999999999999/status", `{"status":"DOING"}`, "application/json", 404, "not_found"},
			{"sql in id", e.PublicURL + "/api/tickets/1%20OR%201=1/status", `{"status":"DOING"}`, "application/json", 404, "not_found"},
			{"huge body", url, `{"status":"DOING","x":"` + strings.Repeat("a", 70<<10) + `"}`, "application/json", 413, "payload_too_large"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := e.Do(t, "PATCH", c.url, c.body, "Content-Type", c.ctype)
				if r.Status != c.status {
					t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Body)
				}
				if code := errorCode(t, r); code != c.code {
					t.Fatalf("error %q, want %q", code, c.code)
				}
			})
		}
		// A wrong method on a ticket path is 405, not a 500 or a silent 404.
		if r := e.Do(t, "DELETE", e.PublicURL+"/api/tickets", ""); r.Status != 405 {
			t.Fatalf("DELETE /api/tickets: %d", r.Status)
		}
		var list []ticketBody
		e.Do(t, "GET", e.PublicURL+"/api/tickets", "").JSON(t, &list)
		if len(list) != 1 || list[0].Status != "OPEN" {
			t.Fatalf("ticket changed by rejected requests: %+v", list)
		}
	})
}

func TestTicketConcurrentMoves(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		tk := createTicket(t, e, "contended")
		const n = 20
		var wg sync.WaitGroup
		statuses := make([]int, n)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				statuses[i] = e.Do(t, "PATCH", fmt.Sprintf("%s/api/tickets/%d/status", e.PublicURL, tk.ID), `{"status":"DOING"}`, apptest.JSONBody...).Status
			}()
		}
		close(start)
		wg.Wait()
		ok, conflict := 0, 0
		for _, s := range statuses {
			switch s {
			case 200:
				ok++
			case 409:
				conflict++
			default:
				t.Errorf("unexpected status %d", s)
			}
		}
		if ok != 1 || conflict != n-1 {
			t.Fatalf("%d succeeded and %d conflicted, want 1 and %d", ok, conflict, n-1)
		}
	})
}

func TestTicketConcurrentCreates(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		const n = 40
		var wg sync.WaitGroup
		ids := make(chan int, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := e.Do(t, "POST", e.PublicURL+"/api/tickets", fmt.Sprintf(`{"title":"t%d"}`, i), apptest.JSONBody...)
				if r.Status != 201 {
					t.Errorf("create: %d %s", r.Status, r.Body)
					return
				}
				var tk ticketBody
				r.JSON(t, &tk)
				ids <- tk.ID
			}()
		}
		wg.Wait()
		close(ids)
		seen := map[int]bool{}
		for id := range ids {
			if seen[id] {
				t.Fatalf("duplicate id %d", id)
			}
			seen[id] = true
		}
		if len(seen) != n {
			t.Fatalf("%d tickets created, want %d", len(seen), n)
		}
	})
}

func TestTicketList(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		var created []ticketBody
		for i := range 7 {
			created = append(created, createTicket(t, e, fmt.Sprintf("ticket %d", i)))
		}
		for _, i := range []int{1, 4} {
			e.Do(t, "PATCH", fmt.Sprintf("%s/api/tickets/%d/status", e.PublicURL, created[i].ID), `{"status":"DOING"}`, apptest.JSONBody...)
		}

		// Newest first: created_at desc, then id desc.
		var all []ticketBody
		r := e.Do(t, "GET", e.PublicURL+"/api/tickets", "")
		r.JSON(t, &all)
		if r.Status != 200 || len(all) != 7 || r.Header.Get("Link") != "" {
			t.Fatalf("list: %d %d items, Link %q", r.Status, len(all), r.Header.Get("Link"))
		}
		for i := 1; i < len(all); i++ {
			a, b := all[i-1], all[i]
			if a.CreatedAt < b.CreatedAt || (a.CreatedAt == b.CreatedAt && a.ID < b.ID) {
				t.Fatalf("not newest first at %d: %+v before %+v", i, a, b)
			}
		}

		// Walk pages of 2 through the Link header; every ticket once, in order.
		var walked []ticketBody
		next := "/api/tickets?limit=2"
		for pages := 0; next != ""; pages++ {
			if pages > 10 {
				t.Fatal("pagination does not end")
			}
			var page []ticketBody
			r := e.Do(t, "GET", e.PublicURL+next, "")
			if r.Status != 200 {
				t.Fatalf("page %s: %d %s", next, r.Status, r.Body)
			}
			r.JSON(t, &page)
			walked = append(walked, page...)
			next = ""
			if link := r.Header.Get("Link"); link != "" {
				m := regexp.MustCompile(`^<([^>]+)>; rel="next"$`).FindStringSubmatch(link)
				if m == nil {
					t.Fatalf("Link header %q", link)
				}
				next = m[1]
			}
		}
		if fmt.Sprint(walked) != fmt.Sprint(all) {
			t.Fatalf("paged walk %+v differs from full list %+v", walked, all)
		}

		// Status filter, also across pages.
		var doing []ticketBody
		e.Do(t, "GET", e.PublicURL+"/api/tickets?status=DOING", "").JSON(t, &doing)
		if len(doing) != 2 || doing[0].ID != created[4].ID || doing[1].ID != created[1].ID {
			t.Fatalf("status=DOING: %+v", doing)
		}
		r = e.Do(t, "GET", e.PublicURL+"/api/tickets?status=OPEN&limit=3", "")
		var open []ticketBody
		r.JSON(t, &open)
		if len(open) != 3 || !strings.Contains(r.Header.Get("Link"), "status=OPEN") {
			t.Fatalf("status=OPEN&limit=3: %+v, Link %q", open, r.Header.Get("Link"))
		}
		var empty []ticketBody
		if r := e.Do(t, "GET", e.PublicURL+"/api/tickets?status=DONE", ""); string(r.Body) != "[]\n" {
			t.Fatalf("empty list body %q", r.Body)
		} else {
			r.JSON(t, &empty)
		}

		// Bad parameters are 400 validation_failed.
		for _, q := range []string{"limit=0", "limit=501", "limit=abc", "limit=-1", "limit=1.5", "status=done", "status=", "cursor=%%%", "cursor=bm90LWpzb24", "cursor=", "limit=1&limit=2"} {
			r := e.Do(t, "GET", e.PublicURL+"/api/tickets?"+q, "")
			if r.Status != 400 || errorCode(t, r) != "validation_failed" {
				t.Errorf("?%s: %d %s", q, r.Status, r.Body)
			}
		}
		// A cursor issued for one filter is refused with another.
		r = e.Do(t, "GET", e.PublicURL+"/api/tickets?status=OPEN&limit=1", "")
		link := r.Header.Get("Link")
		cur := link[strings.Index(link, "cursor=")+7 : strings.IndexAny(link, "&>")]
		if r := e.Do(t, "GET", e.PublicURL+"/api/tickets?status=DOING&cursor="+cur, ""); r.Status != 400 {
			t.Fatalf("cursor reused with another filter: %d", r.Status)
		}
	})
}

func TestTicketsInGraphQL(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		tk := createTicket(t, e, "visible to admins")
		_, key, err := e.App.APIKeys.Create(context.Background(), "tickets test", apikey.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		admin := append([]string{"X-API-Key", key}, apptest.JSONBody...)
		r := e.Do(t, "POST", e.AdminURL+"/graphql", `{"query":"{ tickets(first: 10, where: {status: OPEN}) { totalCount edges { node { id title status createdAt } } } }"}`, admin...)
		if r.Status != 200 {
			t.Fatalf("graphql: %d %s", r.Status, r.Body)
		}
		want := fmt.Sprintf(`"node":{"id":"%d","title":"visible to admins","status":"OPEN"`, tk.ID)
		if !strings.Contains(string(r.Body), want) || !strings.Contains(string(r.Body), `"totalCount":1`) {
			t.Fatalf("graphql body %s lacks %s", r.Body, want)
		}
		// Tickets are read-only there: no ticket mutation exists.
		r = e.Do(t, "POST", e.AdminURL+"/graphql", `{"query":"mutation { createTicket(input: {title: \"x\"}) { id } }"}`, admin...)
		if !strings.Contains(string(r.Body), `"errors"`) {
			t.Fatalf("ticket mutation accepted: %s", r.Body)
		}
		// The Playground is served at /.
		if r := e.Do(t, "GET", e.AdminURL+"/", ""); r.Status != 200 || !strings.Contains(string(r.Body), "/graphql") {
			t.Fatalf("playground: %d", r.Status)
		}
	})
}
