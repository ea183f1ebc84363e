package config

import (
	"io"
	"sync"
)

// maxBuffered is how much log output waits for the flusher before a
// writer writes it out itself.
const maxBuffered = 64 << 10

// logWriter gathers log lines and writes them out in batches from one
// goroutine: under load one write(2) carries many request lines instead
// of each request paying its own (that write was about 6 % of the signed
// order query's CPU). A line waits only while the previous batch is being
// written, and never more than maxBuffered bytes wait: beyond that the
// writer writes them itself, as an unbuffered logger would. Lines keep
// their order. Close writes out what is left.
type logWriter struct {
	w io.Writer

	mu     sync.Mutex
	buf    []byte // guarded by mu
	closed bool   // guarded by mu

	flushMu sync.Mutex // one batch at a time, in order
	spare   []byte     // guarded by flushMu

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func newLogWriter(w io.Writer) *logWriter {
	l := &logWriter{w: w, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go l.loop()
	return l
}

func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return l.w.Write(p)
	}
	l.buf = append(l.buf, p...)
	full := len(l.buf) >= maxBuffered
	l.mu.Unlock()
	if full {
		l.flush()
		return len(p), nil
	}
	select {
	case l.kick <- struct{}{}:
	default: // the flusher is already due to run
	}
	return len(p), nil
}

func (l *logWriter) loop() {
	defer close(l.done)
	for {
		select {
		case <-l.kick:
			l.flush()
		case <-l.stop:
			return
		}
	}
}

// flush writes out what has gathered.
func (l *logWriter) flush() {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	out := l.buf
	l.buf = l.spare[:0]
	l.mu.Unlock()
	if len(out) > 0 {
		_, _ = l.w.Write(out)
	}
	if cap(out) > 4*maxBuffered {
		out = nil // a burst's oversized buffer is not kept
	}
	l.spare = out[:0]
}

// Close stops the flusher and writes out what is left; later lines are
// written directly.
func (l *logWriter) Close() {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		l.flush()
	})
}
