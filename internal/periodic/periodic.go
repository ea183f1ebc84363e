// Package periodic runs background jobs: at once, then again after a
// fixed pause, until their context ends (retention jobs).
package periodic

import (
	"context"
	"time"
)

// Run calls job at once and then pause after each run has ended, until ctx
// ends. A run that is slow pushes the next one back rather than piling up.
func Run(ctx context.Context, pause time.Duration, job func(ctx context.Context)) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		job(ctx)
		t.Reset(pause)
	}
}
