package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gatehouse/rest/partnerapi"
)

// fromBlock is a code block of a page marked `<!-- from: FILE -->`: its
// text must be in FILE, verbatim (a configuration file: line by line,
// whatever the indentation).
var fromBlock = regexp.MustCompile("(?s)<!-- from: ([^ ]+) -->\n```[a-z]*\n(.*?)```")

// walkthroughs are the pages that walk through a change and the least
// number of code blocks each must take from the repository (a page whose
// markers were dropped fails instead of passing empty).
var walkthroughs = map[string]int{
	"docs/versioning.md": 3,
	"docs/deploy.md":     2, // the balancer's configuration, from compose.yaml
	"docs/webhooks.md":   4, // declare, try, publish and refuse a custom event type
}

// TestWalkthroughsAreCode: every code block of docs/ and the README marked
// `<!-- from: FILE -->` appears verbatim in FILE, a Go file of the module
// (compiled into this test and tested where it lives), so a walkthrough
// shows code that builds and runs, never a copy that drifted from it.
// FILE may also be a configuration file the tests run (compose.yaml's
// HAProxy configuration, run by internal/rollingtest): its lines appear
// in it in a row, each trimmed, since a page indents them its own way.
// The "add a version" page shows how v3 was added; its version is in the
// table this binary serves.
func TestWalkthroughsAreCode(t *testing.T) {
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../../README.md")
	counts := map[string]int{}
	for _, page := range pages {
		doc, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel("../..", page)
		for _, m := range fromBlock.FindAllStringSubmatch(string(doc), -1) {
			file, block := m[1], m[2]
			counts[name]++
			if strings.Contains(file, "..") || filepath.IsAbs(file) {
				t.Errorf("%s: <!-- from: %s -->: name a file of the repository", name, file)
				continue
			}
			src, err := os.ReadFile(filepath.Join("../..", file))
			if err != nil {
				t.Errorf("%s: <!-- from: %s -->: %v", name, file, err)
				continue
			}
			found := strings.Contains(string(src), block)
			if !strings.HasSuffix(file, ".go") {
				found = strings.Contains("\n"+trimLines(string(src)), "\n"+trimLines(block))
			}
			if strings.TrimSpace(block) == "" || !found {
				t.Errorf("%s: the block taken from %s is not in it (copy it again from the file):\n%s", name, file, block)
			}
		}
	}
	for page, least := range walkthroughs {
		if counts[page] < least {
			t.Errorf("%s: %d blocks marked <!-- from: FILE -->, want at least %d", page, counts[page], least)
		}
	}
	doc, err := os.ReadFile("../../docs/versioning.md")
	if err != nil {
		t.Fatal(err)
	}
	last := partnerapi.PartnerAPI[len(partnerapi.PartnerAPI)-1]
	if !strings.Contains(string(doc), `{Name: "`+last.Name+`", Released: "`+last.Released+`"`) {
		t.Errorf("docs/versioning.md does not walk through the newest version, %s (released %s)", last.Name, last.Released)
	}
}

// trimLines is text with each line trimmed, blank lines dropped.
func trimLines(text string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n") + "\n"
}
