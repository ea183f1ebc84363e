package requestlog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// render writes l through a Handler (the short way when l is plain) and
// through slog's own handler of the same format, and returns both.
func render(t *testing.T, json bool, at time.Time, lvl slog.Level, l Line) (short, viaSlog string, took bool) {
	t.Helper()
	var a, b bytes.Buffer
	h := NewHandler(&a, json, slog.LevelInfo)
	counted := &countingHandler{Handler: h.Handler}
	h.Handler = counted
	Write(context.Background(), h, at, lvl, &l)
	var ref slog.Handler = slog.NewTextHandler(&b, nil)
	if json {
		ref = slog.NewJSONHandler(&b, nil)
	}
	r := slog.NewRecord(at, lvl, Msg, 0)
	r.AddAttrs(l.Attrs()...)
	if err := ref.Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return a.String(), b.String(), counted.n == 0
}

type countingHandler struct {
	slog.Handler
	n int
}

func (c *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	c.n++
	return c.Handler.Handle(ctx, r)
}

func base() Line {
	return Line{Listener: "public", Method: "GET", Path: "/api/v1/order/query", Status: 200, Bytes: 187,
		Duration: 532 * time.Microsecond, RequestID: "AbC-12_x.y", Remote: "127.0.0.1"}
}

// TestShortWayMatchesSlog: every line reads byte for byte as slog's own
// handler writes it, in both formats; plain lines take the short way,
// the others go through slog.
func TestShortWayMatchesSlog(t *testing.T) {
	times := []time.Time{
		time.Date(2026, 11, 26, 11, 6, 37, 123456789, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 999999999, time.FixedZone("x", 8*3600)),
		time.Now(),
	}
	durations := []time.Duration{0, time.Microsecond, 532 * time.Microsecond, time.Millisecond, 12*time.Millisecond + 500*time.Microsecond,
		time.Second, 10 * time.Minute, 20 * time.Minute, 1234567891 * time.Microsecond, 100 * time.Hour}
	type variant struct {
		name  string
		edit  func(*Line)
		plain bool
	}
	variants := []variant{
		{"plain", func(*Line) {}, true},
		{"admin POST 201", func(l *Line) { l.Listener, l.Method, l.Status, l.Bytes = "admin", "POST", 201, 0 }, true},
		{"500", func(l *Line) { l.Status = 500 }, true},
		{"IPv6", func(l *Line) { l.Remote = "::1" }, true},
		{"escaped-looking path", func(l *Line) { l.Path = "/a/%20b/<x>&y;z'!" }, true},
		{"space in path", func(l *Line) { l.Path = "/a b" }, false},
		{"quote in path", func(l *Line) { l.Path = `/a"b` }, false},
		{"backslash", func(l *Line) { l.Path = `/a\b` }, false},
		{"equals", func(l *Line) { l.Path = "/a=b" }, false},
		{"newline", func(l *Line) { l.Path = "/a\nb" }, false},
		{"control", func(l *Line) { l.Path = "/a\x01\x7f" }, false},
		{"unicode", func(l *Line) { l.Path = "/订单/é\u2028" }, false},
		{"invalid UTF-8", func(l *Line) { l.Path = "/a\xff\xfe" }, false},
		{"empty request id", func(l *Line) { l.RequestID = "" }, false},
		{"traced", func(l *Line) { l.TraceID = "0af7651916cd43dd8448eb211c80319c" }, true},
		{"traced, quoted path", func(l *Line) { l.TraceID, l.Path = "0af7651916cd43dd8448eb211c80319c", "/a b" }, false},
		{"invalid remote", func(l *Line) { l.Remote = "invalid IP" }, false},
		{"odd method", func(l *Line) { l.Method = "M=E" }, false},
	}
	for _, json := range []bool{true, false} {
		for _, v := range variants {
			for _, lvl := range []slog.Level{slog.LevelInfo, slog.LevelError} {
				for i, at := range times {
					for _, d := range durations {
						l := base()
						v.edit(&l)
						l.Duration = d
						short, ref, took := render(t, json, at, lvl, l)
						if short != ref {
							t.Fatalf("json=%v %s, time %d, %v, %s:\n got %q\nwant %q", json, v.name, i, d, lvl, short, ref)
						}
						if took != v.plain {
							t.Fatalf("json=%v %s: short way taken = %v, want %v", json, v.name, took, v.plain)
						}
					}
				}
			}
		}
	}
}

// TestLevelIsHonoured: below the handler's level nothing is written,
// either way.
func TestLevelIsHonoured(t *testing.T) {
	for _, json := range []bool{true, false} {
		var buf bytes.Buffer
		h := NewHandler(&buf, json, slog.LevelError)
		l := base()
		Write(context.Background(), h, time.Now(), slog.LevelInfo, &l)
		l.Path = "/a b"
		Write(context.Background(), h, time.Now(), slog.LevelInfo, &l)
		if buf.Len() != 0 {
			t.Fatalf("json=%v: info line written at level error: %q", json, buf.String())
		}
		Write(context.Background(), h, time.Now(), slog.LevelError, &l)
		if !strings.Contains(buf.String(), "ERROR") {
			t.Fatalf("json=%v: error line missing: %q", json, buf.String())
		}
	}
}

// FuzzShortWayMatchesSlog: any path, method, request id and remote give
// the same bytes as slog's handler (go test -fuzz to explore; the seeds run
// with make test).
func FuzzShortWayMatchesSlog(f *testing.F) {
	f.Add("/api/v1/order/query", "GET", "abc", "127.0.0.1", int64(532))
	f.Add("/a b", "POST", "", "::1", int64(0))
	f.Add("/\xff\"\\=", "M", "x.y", "invalid IP", int64(1<<40))
	f.Fuzz(func(t *testing.T, path, method, id, remote string, us int64) {
		if us < 0 {
			us = -us
		}
		l := Line{Listener: "public", Method: method, Path: path, Status: 200, Bytes: 10, Duration: time.Duration(us%(1<<50)) * time.Microsecond, RequestID: id, Remote: remote}
		at := time.Date(2026, 11, 26, 11, 6, 37, 123456789, time.UTC)
		for _, json := range []bool{true, false} {
			short, ref, _ := render(t, json, at, slog.LevelInfo, l)
			if short != ref {
				t.Fatalf("json=%v:\n got %q\nwant %q", json, short, ref)
			}
		}
	})
}
