package httpx

import "context"

// MarkShed records that the request was refused by load shedding
// (internal/shed): its 503 is the process protecting itself. Logger
// counts it in the metrics like any reply but writes no line for it:
// during an overload a line per refusal would cost more than the
// refusal, and the shedding logs a summary at most once a second.
func MarkShed(ctx context.Context) {
	if ri := infoFrom(ctx); ri != nil {
		ri.shed.Store(true)
	}
}

// wasShed reports whether MarkShed was called for the request.
func (ri *requestInfo) wasShed() bool { return ri != nil && ri.shed.Load() }
