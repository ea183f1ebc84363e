package graph

import (
	"context"
	"fmt"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Bounds of one operation.
const (
	// MaxDepth is the deepest field nesting allowed (introspection fields
	// excepted: the schema bounds them). partnerApps → edges → node →
	// webhookDeliveries → edges → node → attempts → edges → node → field
	// is 10.
	MaxDepth = 12
	// MaxComplexity bounds the estimated cost: 1 per field, and a
	// connection costs 1 + n × its selection, n being first/last (or
	// MaxPageSize when neither is given). A flat page of 100 rows with all
	// their fields is about 2 500; 100 apps × 100 orders each is refused.
	MaxComplexity = 10_000
)

// limits is the gqlgen extension that checks, before anything runs, that
// an operation stays within MaxDepth and MaxComplexity and that every
// first/last is within 0..MaxPageSize. A connection below the root must
// say first or last: Ent loads nested edges eagerly, and without a bound
// it would load every row of the edge.
type limits struct{}

var (
	_ graphql.HandlerExtension        = limits{}
	_ graphql.OperationContextMutator = limits{}
)

func (limits) ExtensionName() string                          { return "Limits" }
func (limits) Validate(schema graphql.ExecutableSchema) error { return nil }

func (limits) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	w := walker{oc: oc}
	cost, err := w.selections(oc.Operation.SelectionSet, 1)
	if err != nil {
		return err
	}
	if cost > MaxComplexity {
		return &gqlerror.Error{
			Message:    fmt.Sprintf("query is too complex: estimated cost %d, at most %d (ask for fewer rows with first/last, or fewer nested connections)", cost, MaxComplexity),
			Extensions: map[string]any{"code": CodeQueryTooComplex, "complexity": cost, "limit": MaxComplexity},
		}
	}
	return nil
}

type walker struct {
	oc *graphql.OperationContext
}

func (w walker) selections(set ast.SelectionSet, depth int) (int, *gqlerror.Error) {
	total := 0
	for _, sel := range set {
		var (
			cost int
			err  *gqlerror.Error
		)
		switch s := sel.(type) {
		case *ast.Field:
			cost, err = w.field(s, depth)
		case *ast.InlineFragment:
			cost, err = w.selections(s.SelectionSet, depth)
		case *ast.FragmentSpread:
			def := s.Definition
			if def == nil {
				def = w.oc.Doc.Fragments.ForName(s.Name)
			}
			if def != nil {
				cost, err = w.selections(def.SelectionSet, depth)
			}
		}
		if err != nil {
			return 0, err
		}
		total += cost
		if total > MaxComplexity {
			return total, nil // already over: no need to walk the rest
		}
	}
	return total, nil
}

func (w walker) field(f *ast.Field, depth int) (int, *gqlerror.Error) {
	if strings.HasPrefix(f.Name, "__") {
		return 0, nil // introspection: bounded by the schema itself
	}
	if depth > MaxDepth {
		return 0, limitError(f, fmt.Sprintf("query is nested too deeply: at most %d levels", MaxDepth), CodeQueryTooComplex)
	}
	args := f.ArgumentMap(w.oc.Variables)
	page := -1
	for _, name := range []string{"first", "last"} {
		v, ok := args[name]
		if !ok || v == nil {
			continue
		}
		n, err := graphql.UnmarshalInt(v)
		if err != nil || n < 0 || n > MaxPageSize {
			return 0, limitError(f, fmt.Sprintf("%s must be between 0 and %d", name, MaxPageSize), CodeValidationFailed)
		}
		page = max(page, n)
	}
	child, err := w.selections(f.SelectionSet, depth+1)
	if err != nil {
		return 0, err
	}
	if !isConnection(f) {
		return 1 + child, nil
	}
	if page < 0 {
		if depth > 1 {
			return 0, limitError(f, fmt.Sprintf("%s: a nested connection needs first or last (at most %d)", f.Alias, MaxPageSize), CodeValidationFailed)
		}
		page = MaxPageSize // a root connection defaults to the first MaxPageSize rows
	}
	return 1 + max(page, 1)*child, nil
}

func isConnection(f *ast.Field) bool {
	return f.Definition != nil && f.Definition.Type != nil && strings.HasSuffix(f.Definition.Type.Name(), "Connection")
}

func limitError(f *ast.Field, msg, code string) *gqlerror.Error {
	e := &gqlerror.Error{Message: msg, Extensions: map[string]any{"code": code}}
	if f.Position != nil {
		e.Locations = []gqlerror.Location{{Line: f.Position.Line, Column: f.Position.Column}}
	}
	return e
}
