package errs_test

import (
	"errors"
	"fmt"
	"testing"

	"gatehouse/internal/errs"
)

func TestKindsThroughWrapping(t *testing.T) {
	notFound := errs.New(errs.NotFound, "order does not exist")
	cause := errors.New("dial tcp 10.0.0.7:5432: connection refused")
	unknownSKU := &errs.Error{Kind: errs.Validation, Field: "sku_id", Msg: "no such SKU", Err: notFound}
	cases := []struct {
		name       string
		err        error
		kind       errs.Kind
		field, msg string
		is, isNot  error
	}{
		{"sentinel", notFound, errs.NotFound, "", "order does not exist", errs.NotFound, errs.Conflict},
		{"wrapped sentinel keeps its own message", fmt.Errorf("pay order SO1: %w", notFound), errs.NotFound, "", "order does not exist", notFound, errs.Validation},
		{"validation with field", fmt.Errorf("create: %w", errs.Invalid("amount", "must have at most %d decimals", 2)), errs.Validation, "amount", "amount: must have at most 2 decimals", errs.Validation, errs.NotFound},
		{"validation without field", errs.Invalid("", "title is required"), errs.Validation, "", "title is required", errs.Validation, nil},
		{"bare kind", fmt.Errorf("%w: load app: %w", errs.Unavailable, cause), errs.Unavailable, "", "dependency unavailable", cause, errs.Internal},
		{"outer kind wins, cause still visible", fmt.Errorf("deduct: %w", unknownSKU), errs.Validation, "sku_id", "sku_id: no such SKU", notFound, nil},
		{"no kind is internal", cause, errs.Internal, "", "", nil, errs.Unavailable},
		{"nil", nil, errs.Internal, "", "", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := errs.KindOf(c.err); got != c.kind {
				t.Errorf("KindOf = %v, want %v", got, c.kind)
			}
			if got := errs.Field(c.err); got != c.field {
				t.Errorf("Field = %q, want %q", got, c.field)
			}
			if got := errs.Message(c.err); got != c.msg {
				t.Errorf("Message = %q, want %q", got, c.msg)
			}
			if c.is != nil && !errors.Is(c.err, c.is) {
				t.Errorf("errors.Is(err, %v) = false", c.is)
			}
			if c.isNot != nil && errors.Is(c.err, c.isNot) {
				t.Errorf("errors.Is(err, %v) = true", c.isNot)
			}
		})
	}
}

// TestKindNames: every kind has its own name (they appear in logs).
func TestKindNames(t *testing.T) {
	seen := map[string]bool{}
	for k := errs.Internal; k <= errs.UpstreamUnavailable; k++ {
		name := k.String()
		if name == "" || seen[name] {
			t.Fatalf("kind %d: name %q empty or repeated", k, name)
		}
		seen[name] = true
	}
}

func TestText(t *testing.T) {
	for _, tt := range []struct {
		in, want, problem string
	}{
		{"  Blue \n", "Blue", ""},
		{"   ", "", ""},
		{"名前", "名前", ""},
		{"abcdef", "", "must be at most 5 characters"},
		{"a\tb", "", "must not contain control characters"},
		{"a\x00b", "", "must not contain control characters"},
		{"a\xffb", "", "must be valid UTF-8"},
	} {
		got, err := errs.Text("name", tt.in, 5)
		if tt.problem == "" {
			if err != nil || got != tt.want {
				t.Errorf("Text(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
			continue
		}
		if errs.KindOf(err) != errs.Validation || errs.Field(err) != "name" || errs.Message(err) != "name: "+tt.problem {
			t.Errorf("Text(%q): %v (field %q); want a validation error %q", tt.in, err, errs.Field(err), tt.problem)
		}
	}
}
