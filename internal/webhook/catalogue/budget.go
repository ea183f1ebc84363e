package catalogue

import (
	"context"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"gatehouse/internal/errs"
)

// Bounds of a declared JSON Schema. A schema is a program the service
// runs on every publish: without bounds, 1.6 KB of "anyOf" over "$ref"s
// doubles its work per level (20 levels: seconds and a gigabyte per
// publish) and nesting thousands deep takes minutes to compile. The
// shape bounds are checked on the document before it is compiled, the
// expansion bound on the compiled schema; a custom type is refused at
// createWebhookEventType when it exceeds one, and a type stored before
// these bounds existed is refused when it is loaded to validate a publish.
// docs/webhooks.md lists them.
const (
	// MaxSchemaDepth bounds how deep objects and arrays nest in the
	// schema document (a property's schema is two levels below its
	// parent's: "properties", then the property).
	MaxSchemaDepth = 32
	// MaxSchemaRefs bounds the "$ref" keywords of a schema.
	MaxSchemaRefs = 64
	// MaxSchemaFanOut bounds the subschemas of one "allOf", "anyOf" or
	// "oneOf".
	MaxSchemaFanOut = 32
	// MaxSchemaExpansion bounds how many subschemas a schema may apply to
	// one value, following "$ref", "allOf", "anyOf", "oneOf", "not",
	// "if"/"then"/"else" and "dependentSchemas" without moving into a
	// property or item: 20 levels of {"anyOf":[{"$ref":…},{"$ref":…}]}
	// apply a million.
	MaxSchemaExpansion = 1000
	// ValidationSteps bounds the subschemas one validation applies in all
	// (each to a value of the document): a bizData that reaches it is
	// refused, whatever its schema (one stored before the bounds, or one
	// whose recursion multiplies with the document's depth). An ordinary
	// schema costs about one step per value of the document and
	// subschema applied to it; a 64 KiB bizData (the admin API's body
	// bound) holds at most about 32,000 values. 50,000 steps of the worst
	// kind (failing, so building an error tree) took about 0.4 s and
	// 35 MiB in TestSchemaValidationBudget.
	ValidationSteps = 50_000
)

// checkShape checks the schema document (decoded) against MaxSchemaDepth,
// MaxSchemaRefs and MaxSchemaFanOut, and refuses the dynamic references
// ("$dynamicRef", "$recursiveRef"), whose targets are resolved while
// validating and so escape the expansion bound. Cheap: one walk of the
// document, before compiling it.
func checkShape(doc any) error {
	refs := 0
	var walk func(v any, depth int) error
	walk = func(v any, depth int) error {
		if depth > MaxSchemaDepth {
			return fmt.Errorf("nests deeper than %d levels (limit: schema depth %d)", MaxSchemaDepth, MaxSchemaDepth)
		}
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				switch k {
				case "$ref":
					if refs++; refs > MaxSchemaRefs {
						return fmt.Errorf("has more than %d $ref keywords (limit: $ref count %d)", MaxSchemaRefs, MaxSchemaRefs)
					}
				case "$dynamicRef", "$recursiveRef":
					return fmt.Errorf("uses %s, which event type schemas do not support (use $ref)", k)
				case "allOf", "anyOf", "oneOf":
					if a, ok := sub.([]any); ok && len(a) > MaxSchemaFanOut {
						return fmt.Errorf("has an %s of %d subschemas (limit: combinator fan-out %d)", k, len(a), MaxSchemaFanOut)
					}
				}
				if err := walk(sub, depth+1); err != nil {
					return err
				}
			}
		case []any:
			for _, sub := range v {
				if err := walk(sub, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(doc, 1)
}

// budget counts the subschemas one validation applies (see meter): past
// its limit, or once its context is done, it stops the validation by
// panicking with errBudget, which validateIn recovers.
type budget struct {
	ctx   context.Context
	steps int
	limit int
}

// budgetStop is the panic value that stops a validation.
type budgetStop struct{ err error }

// errBudget: the validation applied ValidationSteps subschemas.
var errBudget = errors.New("budget")

func (b *budget) step() {
	b.steps++
	if b.steps > b.limit {
		panic(budgetStop{errBudget})
	}
	// The context is looked at every 256 steps: a few microseconds apart.
	if b.steps&255 == 0 && b.ctx != nil {
		if err := b.ctx.Err(); err != nil {
			panic(budgetStop{err})
		}
	}
}

// meter makes every subschema of sch count a step of b when it is
// applied, and returns the largest expansion (see MaxSchemaExpansion,
// saturated just past it). The library has no hook per subschema, but it
// runs a subschema's format check at every application that gets past
// the type, const and enum checks (those that fail them do no further
// work): each subschema's Format is wrapped in one that counts first and
// then runs the schema's own format, if any. sch must be freshly
// compiled and used by one validation at a time (the count is b's).
func meter(sch *jsonschema.Schema, b *budget) int {
	seen := map[*jsonschema.Schema]bool{}
	var wrap func(s *jsonschema.Schema)
	wrap = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		inner := s.Format
		f := &jsonschema.Format{Name: "budget", Validate: func(v any) error {
			b.step()
			return nil
		}}
		if inner != nil {
			f.Name = inner.Name
			f.Validate = func(v any) error {
				b.step()
				return inner.Validate(v)
			}
		}
		s.Format = f
		for _, c := range children(s) {
			wrap(c)
		}
	}
	wrap(sch)
	memo := map[*jsonschema.Schema]int{}
	most := 0
	for s := range seen {
		most = max(most, expansion(s, memo))
	}
	return most
}

// expansion is how many subschemas s applies to one value, s included
// (in place: without moving into a property or item), saturated at
// MaxSchemaExpansion+1. A subschema met again on the current path (a
// reference cycle, which the library stops) counts once.
func expansion(s *jsonschema.Schema, memo map[*jsonschema.Schema]int) int {
	if n, ok := memo[s]; ok {
		return n
	}
	memo[s] = 1 // on the path: a cycle counts once
	n := 1
	for _, c := range inPlace(s) {
		if c != nil {
			n = min(n+expansion(c, memo), MaxSchemaExpansion+1)
		}
	}
	memo[s] = n
	return n
}

// inPlace lists the subschemas s applies to the value s is applied to.
func inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, d := range s.DependentSchemas {
		out = append(out, d)
	}
	for _, d := range s.Dependencies {
		if d, ok := d.(*jsonschema.Schema); ok {
			out = append(out, d)
		}
	}
	return out
}

// children lists every subschema of s: in place, and those applied to
// its properties, items, property names and decoded content.
func children(s *jsonschema.Schema) []*jsonschema.Schema {
	out := append(inPlace(s), s.PropertyNames, s.UnevaluatedProperties, s.Contains,
		s.Items2020, s.UnevaluatedItems, s.ContentSchema)
	for _, p := range s.Properties {
		out = append(out, p)
	}
	for _, p := range s.PatternProperties {
		out = append(out, p)
	}
	out = append(out, s.PrefixItems...)
	for _, a := range []any{s.AdditionalProperties, s.AdditionalItems, s.Items} {
		switch a := a.(type) {
		case *jsonschema.Schema:
			out = append(out, a)
		case []*jsonschema.Schema:
			out = append(out, a...)
		}
	}
	return out
}

// checkExpansion refuses an expansion past MaxSchemaExpansion.
func checkExpansion(n int) error {
	if n > MaxSchemaExpansion {
		return fmt.Errorf("applies more than %d subschemas to one value through $ref, allOf, anyOf, oneOf, not, if/then/else or dependentSchemas (limit: schema expansion %d)", MaxSchemaExpansion, MaxSchemaExpansion)
	}
	return nil
}

// budgetError is what a validation stopped by its budget answers: the
// limit named as a validation error on bizData, or the request's own
// end (its deadline, or the caller gone) as an error of that context.
func budgetError(err error) error {
	if errors.Is(err, errBudget) {
		return errs.Invalid("bizData", "validating it against the event type's schema took more than %d steps (limit: validation steps %d); simplify the schema or the payload", ValidationSteps, ValidationSteps)
	}
	return fmt.Errorf("%w: validating bizData: %w", errs.Unavailable, err)
}
