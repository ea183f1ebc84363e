package graph

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
)

// graphqlBlock matches a ```graphql block of a page.
var graphqlBlock = regexp.MustCompile("(?s)```graphql\n(.*?)```")

// TestDocsUseCurrentNames: no GraphQL example of the docs (every
// ```graphql block of docs/*.md and README.md) selects a field, passes an
// argument or fills an input field marked @deprecated, so that readers
// copy the current names (amountMinor, redirectURIs, …); each operation
// also validates against the schema.
func TestDocsUseCurrentNames(t *testing.T) {
	schema := NewExecutableSchema(Config{Resolvers: &Resolver{}}).Schema()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../README.md")
	ops := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range graphqlBlock.FindAllStringSubmatch(string(b), -1) {
			for _, op := range operations(m[1]) {
				ops++
				doc, err := gqlparser.LoadQueryWithRules(schema, op, nil)
				if err != nil {
					t.Errorf("%s: an example does not validate: %v\n%s", page, err, op)
					continue
				}
				for _, where := range deprecatedUses(doc) {
					t.Errorf("%s: an example uses %s, which is deprecated:\n%s", page, where, op)
				}
			}
		}
	}
	if ops < 50 {
		t.Fatalf("found only %d operations in the docs", ops)
	}
}

// operations splits a block into its top-level operations (a block holds
// several, as a reader pastes them one at a time), dropping # comments.
func operations(block string) []string {
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if i := strings.Index(l, "#"); i >= 0 && !strings.Contains(l[:i], `"`) {
			l = l[:i]
		}
		lines = append(lines, l)
	}
	block = strings.Join(lines, "\n")
	var out []string
	depth, start := 0, 0
	for i, c := range block {
		switch c {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				out = append(out, strings.TrimSpace(block[start:i+1]))
				start = i + 1
			}
		}
	}
	return out
}
