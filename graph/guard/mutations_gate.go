package guard

import (
	"context"
	"fmt"
	"reflect"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"gatehouse/internal/apikey"
	"gatehouse/internal/audit"
	"gatehouse/internal/httpx"
)

// mutationGate is the one place every mutation passes, whatever its name:
// root-field middleware that runs around each top-level field of a
// mutation operation. It
//
//  1. refuses the mutation with FORBIDDEN unless the request's API key is
//     an ADMIN key (a READ_ONLY key may only query) or a PUBLISHER key
//     publishing (apikey.MayUseField), before its arguments are read or
//     its resolver runs; and
//  2. appends one audit event for it, whether it succeeded or was refused
//     (by the role rule, a bad argument, a domain rule, …), with the key,
//     the mutation's name, its target and its outcome. Argument values are
//     never stored, only the target's id.
//
// A mutation added to the schema later passes here without any change.
// Query fields pass here too: a PUBLISHER key is refused every one of
// them. A successful publishWebhookEvent is not audited (the message log
// records it).
type mutationGate struct {
	schema *ast.Schema
	audit  *audit.Service
}

// traceKey carries a *mutationTrace from the gate to traceResult.
type traceKey struct{}

// mutationTrace is what the gate learns of a mutation's resolver: whether
// it returned without error, and its result (for the id of a created
// target).
type mutationTrace struct {
	ok     bool
	result any
}

// aroundRootField is the gate (graphql.RootFieldMiddleware).
func (g mutationGate) aroundRootField(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	oc := graphql.GetOperationContext(ctx)
	rf := graphql.GetRootFieldContext(ctx)
	if oc == nil || oc.Operation == nil || rf == nil || rf.Field.Field == nil {
		return next(ctx)
	}
	if oc.Operation.Operation != ast.Mutation {
		// A query: refused only to a PUBLISHER key, which may publish
		// and nothing else (introspection included).
		if err := apikey.MayUseField(apikey.FromContext(ctx), false, rf.Field.Name); err != nil {
			graphql.AddError(ctx, &gqlerror.Error{Path: ast.Path{ast.PathName(rf.Field.Alias)}, Message: err.Error(), Err: err})
			return graphql.Null
		}
		return next(ctx)
	}
	markGateRan(ctx)
	field := rf.Field
	key := apikey.FromContext(ctx)
	ev := audit.Event{Mutation: field.Name, RequestID: httpx.GetRequestID(ctx)}
	if key != nil {
		ev.APIKeyID, ev.APIKeyName = key.ID, key.Name
	}
	path := ast.Path{ast.PathName(field.Alias)}
	trace := &mutationTrace{}
	var out graphql.Marshaler
	if err := apikey.MayUseField(key, true, field.Name); err == nil {
		out = next(context.WithValue(ctx, traceKey{}, trace))
	} else {
		graphql.AddError(ctx, &gqlerror.Error{Path: path, Message: err.Error(), Err: err})
		out = graphql.Null
	}
	if trace.ok && field.Name == apikey.PublishField {
		// A publish is recorded by the message log itself (its message,
		// deliveries and attempts), not by an audit row each: a refused
		// or failed one is audited below like any mutation.
		return out
	}
	if !trace.ok {
		// Refused here, by an argument that could not be read, or by the
		// resolver. (An error in a field of a successful mutation's result
		// does not undo the mutation.)
		ev.ErrorCode = errorCodeUnder(ctx, path)
	}
	ev.Outcome = outcomeOf(ev.ErrorCode)
	ev.TargetType, ev.TargetID = g.target(field, oc.Variables, trace.result)
	if g.audit != nil {
		// A failure is logged with the whole event by Record; the caller's
		// answer stays what the mutation produced.
		_ = g.audit.Record(ctx, ev)
	}
	return out
}

// traceResult is field middleware that hands a mutation resolver's
// result to the gate.
func traceResult(ctx context.Context, next graphql.Resolver) (any, error) {
	res, err := next(ctx)
	if fc := graphql.GetFieldContext(ctx); fc != nil && fc.Object == "Mutation" {
		if tr, ok := ctx.Value(traceKey{}).(*mutationTrace); ok && err == nil {
			tr.ok, tr.result = true, res
		}
	}
	return res, err
}

// errorCodeUnder returns the code of the first error raised for the field
// at path (or one of its arguments, whose errors carry the argument's
// name after it); INTERNAL when none has a code.
func errorCodeUnder(ctx context.Context, path ast.Path) string {
	for _, e := range graphql.GetErrors(ctx) {
		if len(e.Path) < len(path) || e.Path[:len(path)].String() != path.String() {
			continue
		}
		if c, ok := e.Extensions["code"].(string); ok && c != "" {
			return c
		}
		break
	}
	return CodeInternal
}

// outcomeOf sorts an error code: none is success; failures of the
// service or of what it depends on (the database, Redis, the payment
// provider or its configuration) are FAILED; everything else was the
// caller's to fix (REFUSED).
func outcomeOf(code string) audit.Outcome {
	switch code {
	case "":
		return audit.Success
	case CodeInternal, CodeUnavailable, CodePaymentFailed, CodePaymentNotConfigured, CodeUpstreamUnavailable:
		return audit.Failed
	}
	return audit.Refused
}

// auditTargetDirective marks the argument that names a mutation's target
// when it is not `id` (web-schema/admin.graphql).
const auditTargetDirective = "auditTarget"

// target names what a mutation acted on. The id is the argument marked
// @auditTarget, else the argument `id`, else (a create) the id of the
// entity the mutation returned. The type is the directive's `type`, else
// the entity type the mutation returns (directly or as a field of its
// payload). Only ids and order numbers are kept, never other arguments.
func (g mutationGate) target(field graphql.CollectedField, vars map[string]any, result any) (typ, id string) {
	def := field.Definition
	if def == nil {
		return "", ""
	}
	typ = g.entityType(def.Type.Name())
	args := field.ArgumentMap(vars)
	for _, a := range def.Arguments {
		if d := a.Directives.ForName(auditTargetDirective); d != nil {
			if t := d.Arguments.ForName("type"); t != nil && t.Value != nil {
				typ = t.Value.Raw
			}
			return typ, idString(args[a.Name])
		}
	}
	if v, ok := args["id"]; ok {
		return typ, idString(v)
	}
	if n, ok := entityID(result); ok {
		return typ, strconv.Itoa(n)
	}
	return typ, ""
}

// entityType returns name when it is an Ent entity (a Node), else the
// first Node-typed field of the object name (a payload), else "".
func (g mutationGate) entityType(name string) string {
	t := g.schema.Types[name]
	if t == nil {
		return ""
	}
	if isNode(t) {
		return t.Name
	}
	for _, f := range t.Fields {
		if ft := g.schema.Types[f.Type.Name()]; ft != nil && isNode(ft) {
			return ft.Name
		}
	}
	return ""
}

func isNode(t *ast.Definition) bool {
	for _, i := range t.Interfaces {
		if i == "Node" {
			return true
		}
	}
	return false
}

// idString keeps an argument value as a target id when it is an id or an
// order number: a number, or a string of at most 128 printable ASCII
// characters without spaces. Anything else is dropped.
func idString(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) == 0 || len(x) > 128 {
			return ""
		}
		for i := 0; i < len(x); i++ {
			if x[i] <= ' ' || x[i] > '~' {
				return ""
			}
		}
		return x
	case int, int64, float64:
		return fmt.Sprint(x)
	case interface{ String() string }: // json.Number
		return idString(x.String())
	}
	return ""
}

// entityID finds the id of the entity a mutation returned: the result
// itself (an *ent.X) or the first entity among its payload's fields.
func entityID(v any) (int, bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return 0, false
	}
	s := rv.Elem()
	if _, ok := v.(interface{ IsNode() }); ok {
		if f := s.FieldByName("ID"); f.IsValid() && f.Kind() == reflect.Int {
			return int(f.Int()), true
		}
		return 0, false
	}
	for i := 0; i < s.NumField(); i++ {
		f := s.Field(i)
		if !s.Type().Field(i).IsExported() || f.Kind() != reflect.Pointer || f.IsNil() {
			continue
		}
		if _, ok := f.Interface().(interface{ IsNode() }); ok {
			return entityID(f.Interface())
		}
	}
	return 0, false
}
