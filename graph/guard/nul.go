package guard

import (
	"context"
	"sort"
	"strconv"
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
// resolver or filter needs its own check. The error names where the NUL
// is, as validation errors do (extensions.field): the argument's path
// ("input.description", "where.or[1].orderNoContains"), through the
// variable that carried it when it came in one.
type noNUL struct{}

var (
	_ graphql.HandlerExtension        = noNUL{}
	_ graphql.OperationContextMutator = noNUL{}
)

func (noNUL) ExtensionName() string                          { return "NoNUL" }
func (noNUL) Validate(schema graphql.ExecutableSchema) error { return nil }

func (noNUL) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	field, bad := nulField(oc)
	if !bad {
		return nil
	}
	return &gqlerror.Error{
		Message:    field + ": " + httpx.MsgNUL,
		Extensions: map[string]any{"code": CodeValidationFailed, "field": field},
	}
}

// nulField returns where the operation's first NUL is, if it has one.
func nulField(oc *graphql.OperationContext) (string, bool) {
	// vars: the variables holding a NUL, each with the path inside it.
	vars := map[string]string{}
	names := make([]string, 0, len(oc.Variables))
	for name := range oc.Variables {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if p, bad := jsonNUL(oc.Variables[name], ""); bad {
			vars[name] = p
		}
	}
	if oc.Doc == nil {
		for _, name := range names {
			if p, bad := vars[name]; bad {
				return "$" + name + p, true
			}
		}
		return "", false
	}
	for _, op := range oc.Doc.Operations {
		for _, vd := range op.VariableDefinitions {
			if _, given := oc.Variables[vd.Variable]; given {
				continue
			}
			if p, bad := valueNUL(vd.DefaultValue, "", nil); bad {
				vars[vd.Variable] = p // the default is what the argument gets
			}
		}
	}
	for _, op := range oc.Doc.Operations {
		if p, bad := directivesNUL(op.Directives, vars); bad {
			return p, true
		}
		if p, bad := selectionsNUL(op.SelectionSet, vars); bad {
			return p, true
		}
	}
	for _, fr := range oc.Doc.Fragments {
		if p, bad := directivesNUL(fr.Directives, vars); bad {
			return p, true
		}
		if p, bad := selectionsNUL(fr.SelectionSet, vars); bad {
			return p, true
		}
	}
	// A NUL in a variable no argument uses (or a default of one).
	for _, op := range oc.Doc.Operations {
		for _, vd := range op.VariableDefinitions {
			if p, bad := vars[vd.Variable]; bad {
				return "$" + vd.Variable + p, true
			}
			if p, bad := valueNUL(vd.DefaultValue, "", nil); bad {
				return "$" + vd.Variable + p, true
			}
		}
	}
	for _, name := range names {
		if p, bad := vars[name]; bad {
			return "$" + name + p, true
		}
	}
	return "", false
}

func selectionsNUL(set ast.SelectionSet, vars map[string]string) (string, bool) {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			for _, a := range s.Arguments {
				if p, bad := valueNUL(a.Value, a.Name, vars); bad {
					return p, true
				}
			}
			if p, bad := directivesNUL(s.Directives, vars); bad {
				return p, true
			}
			if p, bad := selectionsNUL(s.SelectionSet, vars); bad {
				return p, true
			}
		case *ast.InlineFragment:
			if p, bad := directivesNUL(s.Directives, vars); bad {
				return p, true
			}
			if p, bad := selectionsNUL(s.SelectionSet, vars); bad {
				return p, true
			}
		case *ast.FragmentSpread:
			if p, bad := directivesNUL(s.Directives, vars); bad {
				return p, true
			}
		}
	}
	return "", false
}

func directivesNUL(ds ast.DirectiveList, vars map[string]string) (string, bool) {
	for _, d := range ds {
		for _, a := range d.Arguments {
			if p, bad := valueNUL(a.Value, "@"+d.Name+"."+a.Name, vars); bad {
				return p, true
			}
		}
	}
	return "", false
}

// valueNUL returns the path (below path) of the first NUL in a literal,
// or in the variable it names (vars: the variables that hold one).
func valueNUL(v *ast.Value, path string, vars map[string]string) (string, bool) {
	if v == nil {
		return "", false
	}
	switch v.Kind {
	case ast.StringValue, ast.BlockValue:
		return path, strings.IndexByte(v.Raw, 0) >= 0
	case ast.Variable:
		p, bad := vars[v.Raw]
		return path + p, bad
	}
	for i, c := range v.Children {
		sub := path + "[" + strconv.Itoa(i) + "]"
		if v.Kind == ast.ObjectValue {
			sub = join(path, c.Name)
			if strings.IndexByte(c.Name, 0) >= 0 {
				return path, true
			}
		}
		if p, bad := valueNUL(c.Value, sub, vars); bad {
			return p, true
		}
	}
	return "", false
}

// jsonNUL is valueNUL for a variable's decoded JSON value.
func jsonNUL(v any, path string) (string, bool) {
	switch x := v.(type) {
	case string:
		return path, strings.IndexByte(x, 0) >= 0
	case []any:
		for i, e := range x {
			if p, bad := jsonNUL(e, path+"["+strconv.Itoa(i)+"]"); bad {
				return p, true
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if strings.IndexByte(k, 0) >= 0 {
				return path, true
			}
			if p, bad := jsonNUL(x[k], "."+strings.TrimPrefix(join(path, k), ".")); bad {
				return p, true
			}
		}
	}
	return "", false
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
