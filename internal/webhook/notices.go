package webhook

import (
	"context"
	"sync"
)

// Notices collects the notices of the events queued while one request is
// handled (see CollectNotices), so that a front door can tell the caller
// why a webhook does not go out at once without every business method
// returning them.
type Notices struct {
	mu   sync.Mutex
	list []Notice
}

type noticesKey struct{}

// CollectNotices returns a context in which Fanout records its
// notices into the returned collector.
func CollectNotices(ctx context.Context) (context.Context, *Notices) {
	n := &Notices{}
	return context.WithValue(ctx, noticesKey{}, n), n
}

// List returns the notices recorded so far.
func (n *Notices) List() []Notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Notice(nil), n.list...)
}

func report(ctx context.Context, note *Notice) {
	if note == nil {
		return
	}
	if n, ok := ctx.Value(noticesKey{}).(*Notices); ok {
		n.mu.Lock()
		n.list = append(n.list, *note)
		n.mu.Unlock()
	}
}
