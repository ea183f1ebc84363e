// Package requestlog writes the one log line per HTTP request (see
// httpx.Logger). It is written on every request, so it has a short way
// out: a Handler (the process's slog JSON or text handler, built by
// config.NewLogger) formats the line itself, byte for byte as slog would,
// when none of its strings needs quoting or escaping, which is the case
// for nearly every request; any other line, and every line through another
// handler, goes through slog. Under load slog's generic formatting of the
// line's eight attributes cost about 6 % of a signed order query's CPU.
package requestlog

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// Line is what a request's line says.
type Line struct {
	Listener  string // "public" or "admin"
	Method    string
	Path      string // without the query string: signed requests carry signatures there
	Status    int
	Bytes     int64
	Duration  time.Duration
	RequestID string
	Remote    string // the client's address
	// TraceID is the request's trace id when tracing is on; the line has
	// no trace_id attribute when it is "".
	TraceID string
}

// Msg is the line's message.
const Msg = "request"

// Attrs are the line's attributes, in their order on the line.
func (l *Line) Attrs() []slog.Attr {
	attrs := []slog.Attr{
		slog.String("listener", l.Listener),
		slog.String("method", l.Method),
		slog.String("path", l.Path),
		slog.Int("status", l.Status),
		slog.Int64("bytes", l.Bytes),
		slog.Float64("duration_ms", l.durationMillis()),
		slog.String("request_id", l.RequestID),
		slog.String("remote", l.Remote),
	}
	if l.TraceID != "" {
		attrs = append(attrs, slog.String("trace_id", l.TraceID))
	}
	return attrs
}

func (l *Line) durationMillis() float64 { return float64(l.Duration.Microseconds()) / 1000 }

// Handler is slog's JSON or text handler over w that can also write a
// Line itself. It takes no handler options but the level: the short way
// reproduces the handlers' default output (no ReplaceAttr, no source).
type Handler struct {
	slog.Handler
	w    io.Writer // safe for concurrent use; gets one Write per line
	json bool
}

// NewHandler returns a JSON (json true) or text handler writing to w,
// which must take concurrent Writes of whole lines (config's log writer).
func NewHandler(w io.Writer, json bool, level slog.Leveler) *Handler {
	opts := &slog.HandlerOptions{Level: level}
	h := &Handler{w: w, json: json}
	if json {
		h.Handler = slog.NewJSONHandler(w, opts)
	} else {
		h.Handler = slog.NewTextHandler(w, opts)
	}
	return h
}

// Write logs l at lvl, stamped t, through h: directly when h is a Handler
// and l's strings can be written as they are, else as a slog record.
func Write(ctx context.Context, h slog.Handler, t time.Time, lvl slog.Level, l *Line) {
	if !h.Enabled(ctx, lvl) {
		return
	}
	// slog writes an error for a year outside 0-9999 (no clock gives one).
	if fh, ok := h.(*Handler); ok && l.plain() && t.Year() >= 0 && t.Year() < 10000 {
		t = t.Round(0) // no monotonic reading, as slog
		fh.write(t, lvl, l)
		return
	}
	r := slog.NewRecord(t, lvl, Msg, 0)
	r.AddAttrs(l.Attrs()...)
	_ = h.Handle(ctx, r)
}

// plain reports whether every string of l is written as it is by both
// handlers: printable ASCII without space, quote, backslash or '=' (the
// text handler quotes a value holding any of them, the JSON handler
// escapes quotes and backslashes), and not empty (quoted as "").
func (l *Line) plain() bool {
	return plain(l.Listener) && plain(l.Method) && plain(l.Path) && plain(l.RequestID) && plain(l.Remote) &&
		(l.TraceID == "" || plain(l.TraceID))
}

func plain(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; b <= ' ' || b > '~' || b == '"' || b == '\\' || b == '=' {
			return false
		}
	}
	return true
}

// maxPooled is the largest line buffer kept for the next line (a line as
// long as its request's path may be longer).
const maxPooled = 4 << 10

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// write formats l as slog's JSON or text handler does (l is plain).
func (h *Handler) write(t time.Time, lvl slog.Level, l *Line) {
	bp := buffers.Get().(*[]byte)
	b := (*bp)[:0]
	ms := l.durationMillis()
	if h.json {
		b = append(b, `{"time":"`...)
		b = t.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `","level":"`...)
		b = append(b, lvl.String()...)
		b = append(b, `","msg":"`+Msg+`","listener":"`...)
		b = append(b, l.Listener...)
		b = append(b, `","method":"`...)
		b = append(b, l.Method...)
		b = append(b, `","path":"`...)
		b = append(b, l.Path...)
		b = append(b, `","status":`...)
		b = strconv.AppendInt(b, int64(l.Status), 10)
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, l.Bytes, 10)
		b = append(b, `,"duration_ms":`...)
		// encoding/json's form, which slog's JSON handler uses: 'f' for
		// every value from 1e-6 to 1e21 (a duration in milliseconds with
		// three decimals is 0 or at least 0.001).
		b = strconv.AppendFloat(b, ms, 'f', -1, 64)
		b = append(b, `,"request_id":"`...)
		b = append(b, l.RequestID...)
		b = append(b, `","remote":"`...)
		b = append(b, l.Remote...)
		if l.TraceID != "" {
			b = append(b, `","trace_id":"`...)
			b = append(b, l.TraceID...)
		}
		b = append(b, "\"}\n"...)
	} else {
		b = append(b, "time="...)
		b = appendRFC3339Millis(b, t)
		b = append(b, " level="...)
		b = append(b, lvl.String()...)
		b = append(b, " msg="+Msg+" listener="...)
		b = append(b, l.Listener...)
		b = append(b, " method="...)
		b = append(b, l.Method...)
		b = append(b, " path="...)
		b = append(b, l.Path...)
		b = append(b, " status="...)
		b = strconv.AppendInt(b, int64(l.Status), 10)
		b = append(b, " bytes="...)
		b = strconv.AppendInt(b, l.Bytes, 10)
		b = append(b, " duration_ms="...)
		b = strconv.AppendFloat(b, ms, 'g', -1, 64) // slog.Value's text form
		b = append(b, " request_id="...)
		b = append(b, l.RequestID...)
		b = append(b, " remote="...)
		b = append(b, l.Remote...)
		if l.TraceID != "" {
			b = append(b, " trace_id="...)
			b = append(b, l.TraceID...)
		}
		b = append(b, '\n')
	}
	_, _ = h.w.Write(b)
	if cap(b) <= maxPooled {
		*bp = b
		buffers.Put(bp)
	}
}

// appendRFC3339Millis is the text handler's time format: RFC 3339 with
// exactly three decimals of the second (as slog's unexported function of
// the same name; the JSON handler writes RFC3339Nano).
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	const prefixLen = len("2006-01-02T15:04:05.000")
	n := len(b)
	// RFC3339Nano trims trailing zeros: a tenth of a millisecond added
	// keeps four digits, and the fourth is dropped.
	t = t.Truncate(time.Millisecond).Add(time.Millisecond / 10)
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+prefixLen], b[n+prefixLen+1:]...)
}
