package config

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

const docPath = "../../docs/configuration.md"

// TestConfigurationDocIsGenerated: the settings tables of
// docs/configuration.md are what the declarations generate.
func TestConfigurationDocIsGenerated(t *testing.T) {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	want, err := UpdateDoc(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, want) {
		t.Fatal("docs/configuration.md's settings tables differ from the declarations in internal/config: run `make generate` (or `go generate ./internal/config/`) and commit the result")
	}
	for _, s := range Settings() {
		if !strings.Contains(string(doc), "| `"+s.Env+"` | `--"+s.Flag+"` |") {
			t.Errorf("%s has no row", s.Env)
		}
	}
}

// TestAddingASettingExampleIsTheCode: the "Adding a setting" example of
// docs/configuration.md is quoted from the source, line for line.
func TestAddingASettingExampleIsTheCode(t *testing.T) {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Adding a setting\n")
	if !ok {
		t.Fatal("docs/configuration.md has no ## Adding a setting")
	}
	src, err := os.ReadFile("webhooks.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) == 0 {
		t.Fatal("no go example")
	}
	for _, b := range blocks {
		if !strings.Contains(string(src), b[1]) {
			t.Errorf("the example is not in internal/config/webhooks.go:\n%s", b[1])
		}
	}
}

func TestUpdateDocNeedsMarkers(t *testing.T) {
	if _, err := UpdateDoc([]byte("# no markers\n")); err == nil {
		t.Fatal("a document without markers was accepted")
	}
	out, err := UpdateDoc([]byte("before\n" + docBegin + "stale\n" + docEnd + "after\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(out); strings.Contains(s, "stale") || !strings.HasPrefix(s, "before\n") || !strings.HasSuffix(s, docEnd+"after\n") || !strings.Contains(s, "`GATEHOUSE_ADDR`") {
		t.Fatalf("got:\n%s", s)
	}
}
