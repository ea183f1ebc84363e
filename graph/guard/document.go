package guard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
)

// Bounds of one GraphQL document, checked before it is validated.
// gqlparser's validation compares the fields that share a response name
// pairwise (and then their sub-selections, merged): 5 900 copies of
// __typename (64 KiB) kept a core busy for 12 s, 2 000 for 0.8 s, before
// any limit that runs after validation could refuse them. Distinct names
// (aliases) cost it little: 800 aliased totalCounts validate in 4 ms and
// are then refused by their price.
const (
	// MaxTokens bounds the lexical tokens of a document (gqlparser stops
	// parsing there). The everyday queries have a few hundred; GraphiQL's
	// introspection query about 400.
	MaxTokens = 20_000
	// MaxFields bounds the fields of a document, fragments counted each
	// time they are spread.
	MaxFields = 10_000
	// MaxSameNamePairs bounds the pairs of same-named fields validation
	// compares (k copies of one name in one selection set make k(k-1)/2):
	// about 300 copies, validated in a few milliseconds.
	MaxSameNamePairs = 50_000
)

// boundDocument refuses, before gqlgen validates it, a document over
// MaxFields or MaxSameNamePairs (QUERY_TOO_COMPLEX, HTTP 422 like gqlgen's
// own parse and validation errors). Documents it cannot read (not JSON, a
// syntax error, too many tokens) go on to gqlgen, which answers them in
// its usual way.
func boundDocument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query, ok := documentOf(r)
		if !ok || query == "" {
			next.ServeHTTP(w, r)
			return
		}
		doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: query}, MaxTokens)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		if msg, limit := measureDocument(doc); msg != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_ = json.NewEncoder(w).Encode(graphql.Response{Errors: gqlerror.List{{
				Message:    msg,
				Extensions: map[string]any{"code": CodeQueryTooComplex, "limit": limit},
			}}})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// documentOf returns the query text of a GET (?query=) or a JSON POST,
// whose body readBody has already read and bounded.
func documentOf(r *http.Request) (string, bool) {
	p, ok := paramsOf(r)
	return p.Query, ok
}

// params are a GraphQL request's parameters.
type params struct {
	Query         string
	OperationName string
	Variables     map[string]any
	Extensions    struct {
		PersistedQuery *struct {
			Sha256Hash string `json:"sha256Hash"`
		} `json:"persistedQuery"`
	}
}

// paramsOf reads the parameters of a GET (query string) or a JSON POST
// (the body readBody has read). Each is read on its own: a malformed
// variables object leaves the query readable (gqlgen refuses the request).
func paramsOf(r *http.Request) (params, bool) {
	var p params
	var raw struct {
		Query, OperationName, Variables, Extensions json.RawMessage
	}
	switch r.Method {
	case http.MethodGet:
		q := r.URL.Query()
		p.Query, p.OperationName = q.Get("query"), q.Get("operationName")
		raw.Variables, raw.Extensions = json.RawMessage(q.Get("variables")), json.RawMessage(q.Get("extensions"))
	case http.MethodPost:
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if mt != "application/json" {
			return p, false
		}
		b, ok := r.Body.(*bodyBytes)
		if !ok || json.Unmarshal(b.data, &raw) != nil {
			return p, false
		}
		_ = json.Unmarshal(raw.Query, &p.Query)
		_ = json.Unmarshal(raw.OperationName, &p.OperationName)
	default:
		return p, false
	}
	if len(raw.Variables) > 0 {
		d := json.NewDecoder(bytes.NewReader(raw.Variables))
		d.UseNumber()
		_ = d.Decode(&p.Variables)
	}
	if len(raw.Extensions) > 0 {
		_ = json.Unmarshal(raw.Extensions, &p.Extensions)
	}
	return p, true
}

// measureDocument walks doc as validation will (operations and fragment
// definitions, fragments expanded, same-named fields' sub-selections
// merged) and returns why it is too large, with the limit passed, or "".
// The walk stops as soon as a limit is passed, so a fragment spread into
// itself or fragments doubling at every level cost at most MaxFields steps.
func measureDocument(doc *ast.QueryDocument) (string, int) {
	m := measure{doc: doc, busy: map[string]bool{}}
	for _, op := range doc.Operations {
		m.merged([]ast.SelectionSet{op.SelectionSet})
	}
	for _, f := range doc.Fragments {
		m.merged([]ast.SelectionSet{f.SelectionSet})
	}
	switch {
	case m.fields > MaxFields:
		return fmt.Sprintf("query is too large: more than %d fields (fragments counted each time they are used); "+
			"split it into several requests", MaxFields), MaxFields
	case m.pairs > MaxSameNamePairs:
		return fmt.Sprintf("query is too large: too many fields with the same name in one selection "+
			"(more than %d pairs to compare); use aliases or several requests", MaxSameNamePairs), MaxSameNamePairs
	}
	return "", 0
}

type measure struct {
	doc    *ast.QueryDocument
	fields int             // fields walked, fragments expanded
	pairs  int             // same-named field pairs
	busy   map[string]bool // fragments being expanded (a cycle is validation's error)
}

func (m *measure) over() bool { return m.fields > MaxFields || m.pairs > MaxSameNamePairs }

// merged measures the selection sets that validation merges into one:
// an operation's, or the sub-selections of same-named fields.
func (m *measure) merged(sets []ast.SelectionSet) {
	var fields []*ast.Field
	for _, s := range sets {
		m.flatten(s, &fields)
	}
	byName := map[string][]*ast.Field{}
	var names []string
	for _, f := range fields {
		name := f.Alias
		if name == "" {
			name = f.Name
		}
		if _, seen := byName[name]; !seen {
			names = append(names, name)
		}
		byName[name] = append(byName[name], f)
	}
	for _, name := range names {
		group := byName[name]
		m.pairs += len(group) * (len(group) - 1) / 2
		if m.over() {
			return
		}
		var subs []ast.SelectionSet
		for _, f := range group {
			if len(f.SelectionSet) > 0 {
				subs = append(subs, f.SelectionSet)
			}
		}
		if len(subs) > 0 {
			m.merged(subs)
		}
	}
}

// flatten appends the fields of s, inline fragments and fragment spreads
// expanded into the same level.
func (m *measure) flatten(s ast.SelectionSet, out *[]*ast.Field) {
	for _, sel := range s {
		if m.over() {
			return
		}
		switch sel := sel.(type) {
		case *ast.Field:
			m.fields++
			*out = append(*out, sel)
		case *ast.InlineFragment:
			m.flatten(sel.SelectionSet, out)
		case *ast.FragmentSpread:
			f := m.doc.Fragments.ForName(sel.Name)
			if f == nil || m.busy[sel.Name] {
				continue
			}
			m.busy[sel.Name] = true
			m.flatten(f.SelectionSet, out)
			delete(m.busy, sel.Name)
		}
	}
}
