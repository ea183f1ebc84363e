package graph

import (
	"context"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"gatehouse/internal/httpx"
)

// noNUL is the gqlgen extension that refuses, before anything runs, an
// operation with a NUL character in any string it passes: an argument
// literal (filters and inputs included, at any depth), a variable, or a
// default value. It is checked once for the whole document, so no
// resolver or filter needs its own check.
type noNUL struct{}

var (
	_ graphql.HandlerExtension        = noNUL{}
	_ graphql.OperationContextMutator = noNUL{}
)

func (noNUL) ExtensionName() string                          { return "NoNUL" }
func (noNUL) Validate(schema graphql.ExecutableSchema) error { return nil }

func (noNUL) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	bad := httpx.ValueHasNUL(oc.Variables)
	if oc.Doc != nil {
		for _, op := range oc.Doc.Operations {
			for _, vd := range op.VariableDefinitions {
				bad = bad || valueHasNUL(vd.DefaultValue)
			}
			bad = bad || directivesHaveNUL(op.Directives) || selectionsHaveNUL(op.SelectionSet)
		}
		for _, fr := range oc.Doc.Fragments {
			bad = bad || directivesHaveNUL(fr.Directives) || selectionsHaveNUL(fr.SelectionSet)
		}
	}
	if !bad {
		return nil
	}
	return &gqlerror.Error{Message: httpx.MsgNUL, Extensions: map[string]any{"code": CodeValidationFailed}}
}

func selectionsHaveNUL(set ast.SelectionSet) bool {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			for _, a := range s.Arguments {
				if valueHasNUL(a.Value) {
					return true
				}
			}
			if directivesHaveNUL(s.Directives) || selectionsHaveNUL(s.SelectionSet) {
				return true
			}
		case *ast.InlineFragment:
			if directivesHaveNUL(s.Directives) || selectionsHaveNUL(s.SelectionSet) {
				return true
			}
		case *ast.FragmentSpread:
			if directivesHaveNUL(s.Directives) {
				return true
			}
		}
	}
	return false
}

func directivesHaveNUL(ds ast.DirectiveList) bool {
	for _, d := range ds {
		for _, a := range d.Arguments {
			if valueHasNUL(a.Value) {
				return true
			}
		}
	}
	return false
}

func valueHasNUL(v *ast.Value) bool {
	if v == nil {
		return false
	}
	if (v.Kind == ast.StringValue || v.Kind == ast.BlockValue) && strings.IndexByte(v.Raw, 0) >= 0 {
		return true
	}
	for _, c := range v.Children {
		if strings.IndexByte(c.Name, 0) >= 0 || valueHasNUL(c.Value) {
			return true
		}
	}
	return false
}
