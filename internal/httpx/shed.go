package httpx

import "context"

// MarkShed records that the request was refused by load shedding
// (internal/shed): its 503 is the process protecting itself, counted by
// gatehouse_http_shed_total, so its line is logged at WARN, not as an
// ERROR per refused request.
func MarkShed(ctx context.Context) {
	if ri := infoFrom(ctx); ri != nil {
		ri.shed.Store(true)
	}
}

// wasShed reports whether MarkShed was called for the request.
func (ri *requestInfo) wasShed() bool { return ri != nil && ri.shed.Load() }
