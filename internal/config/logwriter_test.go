package config

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/httpx"
	"gatehouse/internal/requestlog"
)

// lockedBuffer is a bytes.Buffer safe for the flusher and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Every line written before Close is out after it, whole and in each
// writer's order, however the batches fell, past the buffer's cap too;
// lines after Close go straight through.
func TestLogWriterKeepsEveryLineInOrder(t *testing.T) {
	var out lockedBuffer
	lw := newLogWriter(&out)
	const writers, lines = 8, 2000
	pad := strings.Repeat("x", 100)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				fmt.Fprintf(lw, "w%d %d %s\n", w, i, pad)
			}
		})
	}
	wg.Wait()
	lw.Close()
	fmt.Fprintf(lw, "after close\n")

	next := make([]int, writers)
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != writers*lines+1 || got[len(got)-1] != "after close" {
		t.Fatalf("got %d lines (last %q), want %d", len(got), got[len(got)-1], writers*lines+1)
	}
	for _, line := range got[:len(got)-1] {
		var w, i int
		var p string
		if _, err := fmt.Sscanf(line, "w%d %d %s", &w, &i, &p); err != nil || p != pad {
			t.Fatalf("torn line %q: %v", line, err)
		}
		if i != next[w] {
			t.Fatalf("writer %d: line %d came before line %d", w, i, next[w])
		}
		next[w]++
	}
}

// countingWriter counts the writes it gets.
type countingWriter struct {
	lockedBuffer
	writes atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.lockedBuffer.Write(p)
}

// Lines written while a batch gathers leave together: none is written out
// before the batch's delay (an hour here, so never before Close), and
// Close writes them in one write. A line does leave by itself once its
// batch's delay has passed.
func TestLogWriterGathersBatches(t *testing.T) {
	var out countingWriter
	lw := gatheringWriter(&out, time.Hour)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				fmt.Fprintf(lw, "w%d %d\n", w, i)
			}
		})
	}
	wg.Wait()
	time.Sleep(50 * time.Millisecond) // the flusher had every chance to write early
	if n := out.writes.Load(); n != 0 {
		t.Fatalf("%d writes while the batch gathered, want 0", n)
	}
	lw.Close()
	if n, lines := out.writes.Load(), strings.Count(out.String(), "\n"); n != 1 || lines != 200 {
		t.Fatalf("Close wrote %d lines in %d writes, want 200 in 1", lines, n)
	}

	var quick countingWriter
	lw = gatheringWriter(&quick, time.Millisecond)
	defer lw.Close()
	fmt.Fprintf(lw, "alone\n")
	for deadline := time.Now().Add(10 * time.Second); quick.String() != "alone\n"; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a lone line was not written out after its batch's delay")
		}
	}
}

// TestProcessLoggerWritesRequestLinesItself: the process logger's handler
// is requestlog's, so a request line takes the short way; the line in the
// file is slog's JSON (or text) all the same, and other lines go through
// slog.
func TestProcessLoggerWritesRequestLinesItself(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		f, err := os.Create(filepath.Join(t.TempDir(), "log"))
		if err != nil {
			t.Fatal(err)
		}
		c := &Config{Log: Log{Format: format, Level: "info"}}
		log, flush := c.NewLogger(f)
		if _, ok := log.Handler().(*requestlog.Handler); !ok {
			t.Fatalf("%s: the process logger's handler is %T, want *requestlog.Handler", format, log.Handler())
		}
		h := httpx.Logger(log, "public")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v1/orders/query?nonce=secret", nil))
		log.Info("other line", "k", "v w")
		flush()
		out, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 2 || strings.Contains(string(out), "secret") {
			t.Fatalf("%s: want the request line and the other line, no query string:\n%s", format, out)
		}
		want := map[string][]string{
			"json": {`"msg":"request","listener":"public","method":"GET","path":"/api/v1/orders/query","status":418,`, `"msg":"other line","k":"v w"`},
			"text": {` msg=request listener=public method=GET path=/api/v1/orders/query status=418 `, ` msg="other line" k="v w"`},
		}[format]
		for i, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("%s line %d: %q lacks %q", format, i, lines[i], w)
			}
		}
	}
}
