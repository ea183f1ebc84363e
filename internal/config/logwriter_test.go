package config

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
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
