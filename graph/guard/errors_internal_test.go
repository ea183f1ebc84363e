package guard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"gatehouse/graph/scalar"
	"gatehouse/internal/apikey"
	"gatehouse/internal/errs"
	"gatehouse/internal/identity"
	"gatehouse/internal/inventory"
	"gatehouse/internal/order"
	"gatehouse/internal/partner"
	"gatehouse/internal/webhook"
)

// TestErrorPresenter: domain errors keep their message and get a code;
// any other resolver error is logged and shown as "internal error" only;
// an argument that could not be read is a validation error.
func TestErrorPresenter(t *testing.T) {
	var logs bytes.Buffer
	present := errorPresenter(slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	cases := []struct {
		err   error
		code  string
		field string
	}{
		{&resolverError{errs.Invalid("appName", "is required")}, CodeValidationFailed, "appName"},
		{&resolverError{fmt.Errorf("create order: %w", errs.Invalid("amount", "bad"))}, CodeValidationFailed, "amount"},
		{&resolverError{errs.New(errs.Forbidden, "not yours")}, CodeForbidden, ""},
		{&resolverError{fmt.Errorf("%w: redis: connection refused", errs.Unavailable)}, CodeUnavailable, ""},
		{&resolverError{fmt.Errorf("wrapped: %w", partner.ErrNotFound)}, CodeNotFound, ""},
		{&resolverError{order.ErrNotFound}, CodeNotFound, ""},
		{&resolverError{apikey.ErrNotFound}, CodeNotFound, ""},
		{&resolverError{inventory.ErrNotFound}, CodeNotFound, ""},
		{&resolverError{webhook.ErrNotFound}, CodeNotFound, ""},
		{&resolverError{fmt.Errorf("%w: \"k\"", partner.ErrConflict)}, CodeConflict, ""},
		{&resolverError{order.ErrConflict}, CodeConflict, ""},
		{&resolverError{identity.ErrConflict}, CodeConflict, ""},
		{&resolverError{fmt.Errorf("%w: order is PAID", order.ErrInvalidState)}, CodeInvalidState, ""},
		{gqlerror.WrapPath(nil, errors.New("time must be RFC 3339")), CodeValidationFailed, ""},
		{gqlerror.WrapPath(ast.Path{ast.PathName("resendFailedWebhookDeliveries"), ast.PathName("since")}, scalar.ErrTime), CodeValidationFailed, "since"},
		{gqlerror.WrapPath(ast.Path{ast.PathName("orders"), ast.PathName("where"), ast.PathName("amountMinorIn"), ast.PathIndex(2)}, scalar.ErrInt64), CodeValidationFailed, "where.amountMinorIn[2]"},
	}
	for _, c := range cases {
		got := present(ctx, c.err)
		if got.Extensions["code"] != c.code || (c.field != "" && got.Extensions["field"] != c.field) {
			t.Errorf("%v: %v %v", c.err, got.Message, got.Extensions)
		}
	}
	internal := present(ctx, &resolverError{errors.New("pq: relation secret_table does not exist at 10.0.0.7")})
	if internal.Message != "internal error" || internal.Extensions["code"] != CodeInternal || strings.Contains(internal.Message, "pq") {
		t.Fatalf("internal: %+v", internal)
	}
	if !strings.Contains(logs.String(), "secret_table") {
		t.Fatal("the internal error was not logged")
	}
}
