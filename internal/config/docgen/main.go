// Command docgen rewrites the generated settings tables of the document
// named by its argument (docs/configuration.md) from the declarations in
// package config; `make generate` runs it through go generate.
package main

import (
	"fmt"
	"os"

	"gatehouse/internal/config"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: docgen FILE.md")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := config.UpdateDoc(doc)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, out, 0o644)
}
