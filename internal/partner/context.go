package partner

import "context"

type ctxKey struct{}

// NewContext returns ctx carrying the admitted request: the calling app and
// the signed parameters.
func NewContext(ctx context.Context, a *Admitted) context.Context {
	return context.WithValue(ctx, ctxKey{}, a)
}

// AdmittedFromContext returns the whole admitted request (app, rate-limit
// state, and the signed query parameters business handlers should read).
func AdmittedFromContext(ctx context.Context) (*Admitted, bool) {
	a, ok := ctx.Value(ctxKey{}).(*Admitted)
	return a, ok
}
