package ui_test

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"gatehouse/internal/ui"
)

// TestRenderEscapesAndSetsHeaders: a page's user text is escaped in the
// layout, the components and the page; the answer carries the CSP and
// no-store; an unknown page is a 500 without a half-written body.
func TestRenderEscapesAndSetsHeaders(t *testing.T) {
	pages := fstest.MapFS{"p.html": {Data: []byte(`{{define "content"}}<p>{{.Data}}</p>{{template "detail" (dict "ID" "d" "Heading" .Data "Rows" nil)}}{{end}}`)}}
	r, err := ui.New(pages, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	hostile := `<script>alert("x")</script>`
	r.Render(w, httptest.NewRequest("GET", "/", nil), 200, "p", ui.Page{Title: hostile, Product: "t", Base: "/c/", Data: hostile, Signed: hostile, Flash: hostile})
	body := w.Body.String()
	if strings.Contains(body, "<script>") || strings.Count(body, "&lt;script&gt;") < 5 {
		t.Fatalf("user text not escaped everywhere:\n%s", body)
	}
	if w.Header().Get("Content-Security-Policy") != ui.CSP || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("headers %v", w.Header())
	}
	w = httptest.NewRecorder()
	r.Render(w, httptest.NewRequest("GET", "/", nil), 200, "nope", ui.Page{})
	if w.Code != 500 || strings.Contains(w.Body.String(), "<html") {
		t.Fatalf("unknown page: %d %q", w.Code, w.Body.String())
	}
}

// TestBars: the tallest slot fills the chart, a slot with any count is at
// least 1 unit high, and each bar says its counts in words.
func TestBars(t *testing.T) {
	c := ui.Bars([]int{0, 10, 1}, []int{0, 10, 0}, []string{"a", "b", "c"}, "sum")
	if c.Bars[1].GoodH+c.Bars[1].BadH != c.Height || c.Bars[0].GoodH != 0 || c.Bars[2].GoodH < 1 {
		t.Fatalf("bars %+v", c.Bars)
	}
	if c.Bars[1].Label != "b: 10 succeeded, 10 failed" || c.Bars[1].BadY+c.Bars[1].BadH != c.Bars[1].GoodY {
		t.Fatalf("bar %+v", c.Bars[1])
	}
}
