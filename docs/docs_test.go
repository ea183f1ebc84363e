// Package docs holds no code: its tests check the pages in this folder and
// the README, so that a link or the package map cannot go stale unseen.
package docs

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// pages are the Markdown files whose links are checked, relative to the
// module root.
func pages(t *testing.T) []string {
	t.Helper()
	list, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range list {
		list[i] = filepath.Join("docs", p)
	}
	return append(list, "README.md")
}

// lines returns the lines of a Markdown file, those of fenced code blocks
// blanked (so that index + 1 is the line number).
func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", path))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fenced := false
	s := bufio.NewScanner(bytes.NewReader(b))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			line = ""
		}
		if fenced {
			line = ""
		}
		out = append(out, line)
	}
	return out
}

// slug is the anchor GitHub gives a heading: lower case, every character
// but letters, digits, spaces, hyphens and underscores dropped, spaces
// turned into hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the heading anchors of a Markdown file (a repeated
// heading gets -1, -2 … as on GitHub).
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	seen := map[string]int{}
	out := map[string]bool{}
	for _, line := range lines(t, path) {
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		text = strings.TrimLeft(text, "#")
		if !strings.HasPrefix(text, " ") {
			continue
		}
		a := slug(strings.ReplaceAll(text, "`", ""))
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

var (
	linkRE      = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	generatedRE = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)
)

// TestLinks: every relative link of the docs and the README names a file
// that exists and, with a #fragment into a Markdown page, a heading of it.
func TestLinks(t *testing.T) {
	cache := map[string]map[string]bool{}
	for _, page := range pages(t) {
		for n, line := range lines(t, page) {
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = filepath.Join(filepath.Dir(page), file)
					if _, err := os.Stat(filepath.Join("..", dest)); err != nil {
						t.Errorf("%s:%d: link to %s: no such file", page, n+1, target)
						continue
					}
				}
				if frag == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				if cache[dest] == nil {
					cache[dest] = anchors(t, dest)
				}
				if !cache[dest][frag] {
					t.Errorf("%s:%d: link to %s: %s has no heading with that anchor", page, n+1, target, dest)
				}
			}
		}
	}
}

// packageMap returns the paths the package map of overview.md names in
// its first column: the table rows under "### Package map" up to the
// next heading.
func packageMap(t *testing.T) []string {
	t.Helper()
	var out []string
	in := false
	for _, line := range lines(t, "docs/overview.md") {
		if strings.HasPrefix(line, "#") {
			in = strings.TrimSpace(line) == "### Package map"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, p := range strings.Split(first, ",") {
			p = strings.Trim(strings.TrimSpace(p), "`")
			out = append(out, strings.TrimSuffix(p, "/"))
		}
	}
	if len(out) == 0 {
		t.Fatal(`docs/overview.md has no "### Package map" table`)
	}
	return out
}

// packageDirs lists the module's directories holding Go files of which at
// least one is written by hand (not "Code generated … DO NOT EDIT.").
func packageDirs(t *testing.T) []string {
	t.Helper()
	dirs := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != ".." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !generatedRE.Match(b) {
			rel, err := filepath.Rel("..", filepath.Dir(path))
			if err != nil {
				return err
			}
			dirs[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	delete(dirs, "docs") // this test
	return slices.Sorted(func(yield func(string) bool) {
		for d := range dirs {
			if !yield(d) {
				return
			}
		}
	})
}

// TestPackageMap: the package map in overview.md names every package
// directory with hand-written code, and every path it names exists.
func TestPackageMap(t *testing.T) {
	named := packageMap(t)
	for _, dir := range packageDirs(t) {
		if !slices.Contains(named, dir) {
			t.Errorf("docs/overview.md's package map does not name %s: add a row saying what it holds", dir)
		}
	}
	for _, p := range named {
		if _, err := os.Stat(filepath.Join("..", p)); err != nil {
			t.Errorf("docs/overview.md's package map names %s, which does not exist", p)
		}
	}
}
