package store_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// infrastructure are the packages (with the packages under them) that
// serve every domain and so know none: they may use Ent's client and its
// migrations, never an entity package (gatehouse/ent/<entity>, its
// predicates or hooks), whose rules belong to the domain packages.
var infrastructure = []string{"store", "kv", "httpx", "outbound", "telemetry"}

// entAllowed are the packages of gatehouse/ent that infrastructure may
// import: the client, its schema migration and the runtime that registers
// the schema's defaults and hooks with it.
var entAllowed = map[string]bool{"gatehouse/ent": true, "gatehouse/ent/migrate": true, "gatehouse/ent/runtime": true}

// TestInfrastructureImportsNoEntity fails when a non-test Go file of an
// infrastructure package imports an Ent entity package.
func TestInfrastructureImportsNoEntity(t *testing.T) {
	fset := token.NewFileSet()
	for _, pkg := range infrastructure {
		root := filepath.Join("..", pkg)
		files := 0
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && d.Name() == "testdata":
				return filepath.SkipDir
			case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
				return nil
			}
			files++
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if strings.HasPrefix(p, "gatehouse/ent/") && !entAllowed[p] {
					t.Errorf("%s imports %s: infrastructure must not know a domain entity (move the code to its domain package)", path, p)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if files == 0 {
			t.Errorf("internal/%s has no Go files: update the list of infrastructure packages", pkg)
		}
	}
}
