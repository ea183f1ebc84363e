package guard

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/99designs/gqlgen/graphql"

	"gatehouse/internal/webhook"
)

// Warning is something the caller should know about a mutation that
// succeeded: listed in the response's extensions.warnings.
type Warning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Path    []any  `json:"path,omitempty"`
}

// warnings collects the warnings of one response (mutations of one
// operation run one after another, but keep it safe anyway).
type warnings struct {
	mu   sync.Mutex
	list []Warning
}

// warn adds a warning about the field being resolved to the response.
func warn(ctx context.Context, code, msg string) {
	w, ok := graphql.GetExtension(ctx, "warnings").(*warnings)
	if !ok {
		w = &warnings{}
		graphql.RegisterExtension(ctx, "warnings", w)
	}
	var path []any
	if fc := graphql.GetFieldContext(ctx); fc != nil {
		for _, p := range fc.Path() {
			path = append(path, p)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, Warning{Code: code, Message: msg, Path: path})
}

// MarshalJSON renders the list.
func (w *warnings) MarshalJSON() ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return json.Marshal(w.list)
}

// webhookWarnings is field middleware around each mutation: the notices
// of the webhooks it queued (no callback URL, a held delivery) become
// warnings of a mutation that succeeded. Any mutation that queues events
// (payOrder, cancelOrder, refundOrder, …) gets them without code of its
// own.
func webhookWarnings(ctx context.Context, next graphql.Resolver) (any, error) {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || fc.Object != "Mutation" {
		return next(ctx)
	}
	ctx, notices := webhook.CollectNotices(ctx)
	res, err := next(ctx)
	if err == nil {
		for _, n := range notices.List() {
			warn(ctx, n.Code, n.Message)
		}
	}
	return res, err
}
