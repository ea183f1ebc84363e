package config

import (
	"io"
	"sync"
	"time"
)

// maxBuffered is how much log output waits for the flusher before a
// writer writes it out itself.
const maxBuffered = 64 << 10

// flushDelay is how long a batch gathers after its first line before the
// flusher writes it out: the most a log line waits.
const flushDelay = 10 * time.Millisecond

// logWriter gathers log lines and writes them out in batches from one
// goroutine: under load one write(2) carries many request lines instead
// of each request paying its own (that write was about 6 % of the signed
// order query's CPU). A batch gathers for flushDelay, the most a line
// waits: when lines were written out as soon as they came, a batch held
// about two lines under load, and the write and the flusher's wake-ups
// still cost about 5 µs per request. Never more than maxBuffered bytes
// wait: beyond that the writer writes them itself, as an unbuffered logger
// would. Lines keep their order. Close writes out what is left.
type logWriter struct {
	w     io.Writer
	delay time.Duration // how long a batch gathers: flushDelay

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

func newLogWriter(w io.Writer) *logWriter { return gatheringWriter(w, flushDelay) }

// gatheringWriter is a logWriter whose batches gather for delay.
func gatheringWriter(w io.Writer, delay time.Duration) *logWriter {
	l := &logWriter{w: w, delay: delay, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
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
	gather := time.NewTimer(l.delay)
	gather.Stop()
	for {
		select {
		case <-l.kick:
		case <-l.stop:
			return // Close writes out the rest
		}
		// Lines that arrive while this batch gathers need no kick of
		// their own: they leave with it.
		gather.Reset(l.delay)
		select {
		case <-gather.C:
		case <-l.stop:
			return
		}
		l.flush()
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
