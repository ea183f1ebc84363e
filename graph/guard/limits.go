package guard

import (
	"context"
	"fmt"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/catalogue"
)

// Bounds of one operation.
const (
	// MaxPageSize bounds `first` and `last` on every connection.
	MaxPageSize = 100
	// MaxDepth is the deepest field nesting allowed (introspection fields
	// excepted: the schema bounds them). partnerApps → edges → node →
	// webhookDeliveries → edges → node → attempts → edges → node → field
	// is 10.
	MaxDepth = 12
	// MaxCost is the budget of one operation, in rows it may return (see
	// limits). The everyday question — 100 FAILED deliveries with all their
	// fields and attempts(first: 100) with all of theirs — costs about
	// 11 100; a page of 100 apps × 100 deliveries × 100 attempts does not fit.
	MaxCost = 50_000
	// CountCost is the price of one totalCount: a COUNT over the filtered
	// rows, which costs the database as much as reading many of them.
	CountCost = 1_000
	// FilterCost is the price of one where argument: a filter can make the
	// database scan rows it does not return.
	FilterCost = 1_000
	// MaxFilterTerms bounds the conditions of one where argument (see
	// filterTerms). Each becomes a node of the SQL expression, and SQLite
	// refuses an expression tree deeper than 1 000: a where of 1 200
	// conditions in or was an internal error there.
	MaxFilterTerms = 200
	// MaxFilterText bounds each text in a where, in bytes: SQLite refuses
	// a LIKE pattern (contains, hasPrefix, …) over 50 000 bytes.
	MaxFilterText = 4096
	// MutationCost is the price of one mutation (each root field of a
	// mutation operation, aliases included): a write, its webhook or
	// provider call, and an audit event. 50 fit in one operation, so one
	// request cannot turn into thousands of writes and audit rows.
	MutationCost = 1_000
	// SchemaCost is the price of one __schema field: the whole schema, a
	// few hundred kilobytes of JSON. One fits (every tool sends exactly
	// one); hundreds of aliased copies would cost the server gigabytes.
	SchemaCost = 10_000
	// TypeCost is the price of one __type field: one type with its fields.
	TypeCost = 1_000
)

// limits is the gqlgen extension that checks, before anything runs, that
// an operation stays within MaxDepth and MaxCost and that every first/last
// is within 0..MaxPageSize. A connection below the root must say first or
// last: Ent loads nested edges eagerly, and without a bound it would load
// every row of the edge.
//
// Pricing counts the rows an operation may return: a connection costs its
// page size (first/last, or MaxPageSize at the root) times the number of
// rows it hangs under, so 100 deliveries × attempts(first: 100) is
// 100 + 10 000; an object field (order → app) costs one row per parent row.
// Each totalCount adds CountCost and each where argument FilterCost; each
// mutation MutationCost; each __schema SchemaCost and each __type TypeCost
// (gqlparser bounds the nesting inside them; their aliases are what must
// be priced). Scalar fields, __typename, and the edges/node/pageInfo
// plumbing of connections are free. Every field of the operation is priced, each alias and each
// use of a fragment on its own, so repeating a field under many aliases
// costs as much as asking for it that many times.
type limits struct{}

// listRows prices the list fields that are not connections and may return
// many rows, by the most they may return: the webhook catalogue holds at
// most MaxCustomTypes custom types (and a few built-in ones); an app has
// at most MaxEndpoints webhook endpoints.
var listRows = map[string]int{"webhookEventTypes": catalogue.MaxCustomTypes, "webhookEndpoints": webhook.MaxEndpoints}

var (
	_ graphql.HandlerExtension        = limits{}
	_ graphql.OperationContextMutator = limits{}
)

func (limits) ExtensionName() string                          { return "Limits" }
func (limits) Validate(schema graphql.ExecutableSchema) error { return nil }

func (limits) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	cost, err := Price(oc.Doc, oc.Operation, oc.Variables)
	if err != nil {
		return err
	}
	if cost > MaxCost {
		return &gqlerror.Error{
			Message: fmt.Sprintf("query is too complex: it costs %d, at most %d is allowed (a connection costs its page size times the rows it is nested in, "+
				"each totalCount, where argument, mutation and __type %d, each __schema %d; ask for smaller pages, fewer nested connections, "+
				"fewer aliases or fewer mutations per request)", cost, MaxCost, CountCost, SchemaCost),
			Extensions: map[string]any{"code": CodeQueryTooComplex, "cost": cost, "limit": MaxCost},
		}
	}
	return nil
}

// Price returns the cost of operation op of doc (see limits), or the
// error of a first/last out of range, a nested connection without a page
// size, or nesting deeper than MaxDepth. Once the cost passes MaxCost the
// walk stops: the result is then only known to be over the budget.
func Price(doc *ast.QueryDocument, op *ast.OperationDefinition, vars map[string]any) (int, *gqlerror.Error) {
	w := walker{doc: doc, vars: vars, mutation: op.Operation == ast.Mutation}
	if err := w.selections(op.SelectionSet, 1, 1, ""); err != nil {
		return 0, err
	}
	return w.cost, nil
}

type walker struct {
	doc      *ast.QueryDocument
	vars     map[string]any
	mutation bool // the root fields are mutations
	cost     int
}

// over reports whether the budget is already spent: the walk can stop.
func (w *walker) over() bool { return w.cost > MaxCost }

// add adds n rows, saturating just above the budget so that products of
// page sizes never overflow.
func (w *walker) add(n int) { w.cost = min(w.cost+n, MaxCost+1) }

// selections prices set, evaluated once for each of rows parent rows of
// type parent.
func (w *walker) selections(set ast.SelectionSet, depth, rows int, parent string) *gqlerror.Error {
	for _, sel := range set {
		if w.over() {
			return nil
		}
		var err *gqlerror.Error
		switch s := sel.(type) {
		case *ast.Field:
			err = w.field(s, depth, rows, parent)
		case *ast.InlineFragment:
			err = w.selections(s.SelectionSet, depth, rows, parent)
		case *ast.FragmentSpread:
			def := s.Definition
			if def == nil && w.doc != nil {
				def = w.doc.Fragments.ForName(s.Name)
			}
			if def != nil {
				err = w.selections(def.SelectionSet, depth, rows, parent)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) field(f *ast.Field, depth, rows int, parent string) *gqlerror.Error {
	switch f.Name {
	case "__schema":
		w.add(rows * SchemaCost)
		return nil
	case "__type":
		w.add(rows * TypeCost)
		return nil
	}
	if strings.HasPrefix(f.Name, "__") {
		return nil // __typename
	}
	mutation := w.mutation && depth == 1
	if mutation {
		w.add(MutationCost) // the object it returns included
	}
	if depth > MaxDepth {
		return limitError(f, fmt.Sprintf("query is nested too deeply: at most %d levels", MaxDepth), CodeQueryTooComplex)
	}
	args := f.ArgumentMap(w.vars)
	page := -1
	for _, name := range []string{"first", "last"} {
		v, ok := args[name]
		if !ok || v == nil {
			continue
		}
		n, err := graphql.UnmarshalInt(v)
		if err != nil || n < 0 || n > MaxPageSize {
			return limitError(f, fmt.Sprintf("%s must be between 0 and %d", name, MaxPageSize), CodeValidationFailed)
		}
		page = max(page, n)
	}
	if f.Arguments.ForName("where") != nil {
		n, longest := filterSize(args["where"])
		if n > MaxFilterTerms {
			return limitError(f, fmt.Sprintf("where of %s has %d conditions, at most %d are allowed (use a list such as idIn for many values)", f.Alias, n, MaxFilterTerms), CodeValidationFailed)
		}
		if longest > MaxFilterText {
			return limitError(f, fmt.Sprintf("where of %s has a text of %d bytes, at most %d are allowed", f.Alias, longest, MaxFilterText), CodeValidationFailed)
		}
		w.add(FilterCost)
	}
	if f.Name == "totalCount" && isConnectionType(parent) {
		w.add(CountCost)
		return nil
	}
	typ := typeName(f)
	switch {
	case isConnectionType(typ):
		if page < 0 {
			if depth > 1 {
				return limitError(f, fmt.Sprintf("%s: a nested connection needs first or last (at most %d)", f.Alias, MaxPageSize), CodeValidationFailed)
			}
			page = MaxPageSize // a root connection defaults to the first MaxPageSize rows
		}
		rows = min(rows*page, MaxCost+1)
		w.add(rows)
	case isConnectionType(parent) || strings.HasSuffix(parent, "Edge") || len(f.SelectionSet) == 0:
		// edges, node, pageInfo: the connection's own rows, already
		// priced; scalars and enums: free.
	case mutation:
	case listRows[f.Name] > 0:
		rows = min(rows*listRows[f.Name], MaxCost+1)
		w.add(rows)
	default:
		w.add(rows) // an object: one row per parent row
	}
	return w.selections(f.SelectionSet, depth+1, rows, typ)
}

// filterSize measures a where value: its conditions — each field of each
// input object at any depth (and, or, not and has…With included); a list
// of values (idIn: […]) is one — and its longest text, in bytes.
func filterSize(v any) (terms, longest int) {
	switch x := v.(type) {
	case string:
		return 0, len(x)
	case map[string]any:
		for _, e := range x {
			n, l := filterSize(e)
			terms, longest = terms+1+n, max(longest, l)
		}
	case []any:
		for _, e := range x {
			n, l := filterSize(e)
			terms, longest = terms+n, max(longest, l)
		}
	}
	return terms, longest
}

func typeName(f *ast.Field) string {
	if f.Definition == nil || f.Definition.Type == nil {
		return ""
	}
	return f.Definition.Type.Name()
}

func isConnectionType(name string) bool { return strings.HasSuffix(name, "Connection") }

func limitError(f *ast.Field, msg, code string) *gqlerror.Error {
	e := &gqlerror.Error{Message: msg, Extensions: map[string]any{"code": code}}
	if f.Position != nil {
		e.Locations = []gqlerror.Location{{Line: f.Position.Line, Column: f.Position.Column}}
	}
	return e
}
