package periodic

import (
	"context"
	"testing"
	"time"
)

// TestRun: the job runs at once, again after the pause, and no more once
// the context ends.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	runs := make(chan struct{}, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, time.Millisecond, func(context.Context) { runs <- struct{}{} })
	}()
	for range 3 {
		select {
		case <-runs:
		case <-time.After(5 * time.Second):
			t.Fatal("the job did not run again")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}
