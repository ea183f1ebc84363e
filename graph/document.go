package graph

import (
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
const (
	// MaxTokens bounds the lexical tokens of a document (gqlparser stops
	// parsing there). The everyday queries have a few hundred; GraphiQL's
	// introspection query about 400.
	MaxTokens = 20_000
	// MaxFields bounds the fields of a document, fragments counted each
	// time they are spread. Validation compares fields that share a
	// response name pairwise: 5 900 copies of __typename (64 KiB) kept a
	// core busy for 12 s before any limit that runs after validation
	// could refuse them.
	MaxFields = 1_000
)

// boundDocument refuses, before gqlgen validates it, a document with more
// than MaxFields fields (QUERY_TOO_COMPLEX, HTTP 422 like gqlgen's own
// parse and validation errors). Documents it cannot read (not JSON, a
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
		if n := countFields(doc, MaxFields); n > MaxFields {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_ = json.NewEncoder(w).Encode(graphql.Response{Errors: gqlerror.List{{
				Message: fmt.Sprintf("query is too large: more than %d fields (fragments counted each time they are used); "+
					"split it into several requests", MaxFields),
				Extensions: map[string]any{"code": CodeQueryTooComplex, "limit": MaxFields},
			}}})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// documentOf returns the query text of a GET (?query=) or a JSON POST,
// whose body readBody has already read and bounded.
func documentOf(r *http.Request) (string, bool) {
	switch r.Method {
	case http.MethodGet:
		return r.URL.Query().Get("query"), true
	case http.MethodPost:
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if mt != "application/json" {
			return "", false
		}
		b, ok := r.Body.(*bodyBytes)
		if !ok {
			return "", false
		}
		var p struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(b.data, &p) != nil {
			return "", false
		}
		return p.Query, true
	}
	return "", false
}

// countFields counts the fields of doc's operations with every fragment
// spread expanded, stopping as soon as the count passes limit (so a
// fragment spread into itself, or fragments doubling at every level, cost
// no more than limit steps).
func countFields(doc *ast.QueryDocument, limit int) int {
	c := fieldCounter{doc: doc, limit: limit, memo: map[string]int{}, busy: map[string]bool{}}
	for _, op := range doc.Operations {
		c.set(op.SelectionSet)
		if c.n > limit {
			break
		}
	}
	return c.n
}

type fieldCounter struct {
	doc   *ast.QueryDocument
	limit int
	n     int
	memo  map[string]int  // fields of each fragment, expanded
	busy  map[string]bool // fragments being expanded (a cycle is validation's error)
}

func (c *fieldCounter) set(s ast.SelectionSet) {
	for _, sel := range s {
		if c.n > c.limit {
			return
		}
		switch sel := sel.(type) {
		case *ast.Field:
			c.n++
			c.set(sel.SelectionSet)
		case *ast.InlineFragment:
			c.set(sel.SelectionSet)
		case *ast.FragmentSpread:
			c.spread(sel.Name)
		}
	}
}

func (c *fieldCounter) spread(name string) {
	if n, ok := c.memo[name]; ok {
		c.n += n
		return
	}
	f := c.doc.Fragments.ForName(name)
	if f == nil || c.busy[name] {
		return
	}
	c.busy[name] = true
	before := c.n
	c.set(f.SelectionSet)
	delete(c.busy, name)
	if c.n <= c.limit {
		c.memo[name] = c.n - before
	}
}
