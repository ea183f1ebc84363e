package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator/rules"
)

// graphqlBlock is a ```graphql code block of a page.
var graphqlBlock = regexp.MustCompile("(?s)```graphql\n(.*?)```")

// TestDocsGraphQLValidates: every operation in a ```graphql block of docs/
// and the README validates against the admin schema (field and argument
// names, types, enum values), so a page never shows a query the
// Playground refuses. A block may hold several operations, one after
// another, with # comments.
func TestDocsGraphQLValidates(t *testing.T) {
	files, err := filepath.Glob("../../web-schema/*.graphql")
	if err != nil || len(files) == 0 {
		t.Fatalf("schema files: %v", err)
	}
	var sources []*ast.Source
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, &ast.Source{Name: f, Input: string(b)})
	}
	schema, gerr := gqlparser.LoadSchema(sources...)
	if gerr != nil {
		t.Fatalf("load the schema: %v", gerr)
	}
	if _, errs := gqlparser.LoadQueryWithRules(schema, `{ apiVersions { nope } }`, rules.NewDefaultRules()); errs == nil {
		t.Fatal("the schema accepts an unknown field: the check below would prove nothing")
	}
	pages, _ := filepath.Glob("../../docs/*.md")
	pages = append(pages, "../../README.md")
	n := 0
	for _, page := range pages {
		doc, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel("../..", page)
		for _, m := range graphqlBlock.FindAllStringSubmatch(string(doc), -1) {
			for _, op := range splitOperations(m[1]) {
				n++
				if _, errs := gqlparser.LoadQueryWithRules(schema, op, rules.NewDefaultRules()); errs != nil {
					t.Errorf("%s: %v\n%s", name, errs, op)
				}
			}
		}
	}
	if n < 40 {
		t.Fatalf("only %d operations found in the docs' graphql blocks", n)
	}
}

// splitOperations cuts a block into its top-level operations (and
// fragments): each ends where its outermost braces close. Strings and #
// comments are skipped over.
func splitOperations(block string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(block); i++ {
		switch c := block[i]; {
		case c == '#':
			for i < len(block) && block[i] != '\n' {
				i++
			}
		case c == '"':
			for i++; i < len(block) && block[i] != '"'; i++ {
				if block[i] == '\\' {
					i++
				}
			}
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				out = append(out, strings.TrimSpace(block[start:i+1]))
				start = i + 1
			}
		}
	}
	return out
}
