package catalogue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	textmsg "golang.org/x/text/message"

	"gatehouse/internal/errs"
)

// SchemaError says where a bizData breaks its type's schema: the first
// error, by position in the document, so that the same payload always gets
// the same answer. It is a validation error on the field bizData.
type SchemaError struct {
	// Path is a JSONPath to the offending value: "$" for the whole
	// bizData, "$.items[0].sku" for a property of an array element. For a
	// missing required property it names that property.
	Path string
	// Reason is the schema's complaint ("missing property 'sku'", "got
	// string, want integer").
	Reason string
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("does not satisfy the event type's schema at %s: %s", e.Path, e.Reason)
}

// JSONPath is where the error is (the admin API's extensions.path).
func (e *SchemaError) JSONPath() string { return e.Path }

// asErr makes e a validation error about bizData for the front doors
// (errs.KindOf, errs.Field), still reachable with errors.As.
func (e *SchemaError) asErr() *errs.Error {
	return &errs.Error{Kind: errs.Validation, Field: "bizData", Msg: e.Error(), Err: e}
}

var english = textmsg.NewPrinter(language.English)

// validate checks doc against sch under ctx and the validation budget;
// a failure is a *SchemaError (wrapped as a validation error) naming the
// first offending value, or the budget's error (budgetError).
func validate(ctx context.Context, sch *compiled, doc []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return errs.Invalid("bizData", "is not JSON")
	}
	err = sch.run(ctx, v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		if errs.KindOf(err) != errs.Internal {
			return err // the budget's
		}
		return errs.Invalid("bizData", "%s", err)
	}
	leaf := firstLeaf(ve)
	loc := slices.Clone(leaf.InstanceLocation)
	if r, ok := leaf.ErrorKind.(*kind.Required); ok && len(r.Missing) > 0 {
		loc = append(loc, slices.Min(r.Missing))
	}
	return (&SchemaError{Path: jsonPath(v, loc), Reason: leaf.ErrorKind.LocalizedString(english)}).asErr()
}

// firstLeaf is the innermost error that comes first in the document:
// among the errors without causes, the one whose instance location sorts
// first (array indexes as numbers), then by keyword.
func firstLeaf(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	var leaves []*jsonschema.ValidationError
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(e)
	return slices.MinFunc(leaves, func(a, b *jsonschema.ValidationError) int {
		if c := compareLocations(a.InstanceLocation, b.InstanceLocation); c != 0 {
			return c
		}
		return strings.Compare(strings.Join(a.ErrorKind.KeywordPath(), "/"), strings.Join(b.ErrorKind.KeywordPath(), "/"))
	})
}

func compareLocations(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] == b[i] {
			continue
		}
		na, ea := strconv.Atoi(a[i])
		nb, eb := strconv.Atoi(b[i])
		if ea == nil && eb == nil {
			return na - nb
		}
		return strings.Compare(a[i], b[i])
	}
	return len(a) - len(b)
}

var plainName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// jsonPath writes the instance location tokens as a JSONPath, walking the
// document to tell array indexes from property names.
func jsonPath(doc any, tokens []string) string {
	var b strings.Builder
	b.WriteString("$")
	cur := doc
	for _, t := range tokens {
		if arr, ok := cur.([]any); ok {
			if i, err := strconv.Atoi(t); err == nil {
				b.WriteString("[" + t + "]")
				if i >= 0 && i < len(arr) {
					cur = arr[i]
				} else {
					cur = nil
				}
				continue
			}
		}
		if plainName.MatchString(t) {
			b.WriteString("." + t)
		} else {
			b.WriteString("['" + strings.ReplaceAll(strings.ReplaceAll(t, `\`, `\\`), `'`, `\'`) + "']")
		}
		if obj, ok := cur.(map[string]any); ok {
			cur = obj[t]
		} else {
			cur = nil
		}
	}
	return b.String()
}
