package config

//go:generate go run ./docgen ../../docs/configuration.md

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// The generated part of docs/configuration.md lies between these lines.
const (
	docBegin = "<!-- BEGIN GENERATED SETTINGS: edit the tags in internal/config, then run make generate -->\n"
	docEnd   = "<!-- END GENERATED SETTINGS -->\n"
)

// DocTables renders the settings as markdown: per section a heading, its
// doc and a table of env var, flag, default and meaning.
func DocTables() string {
	var b strings.Builder
	all := Settings()
	for i, sec := range sections() {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "### %s\n\n%s\n\n| env var | flag | default | meaning |\n|---|---|---|---|\n", sec.name, sec.doc)
		for _, s := range all {
			if s.Section == sec.name {
				fmt.Fprintf(&b, "| `%s` | `--%s` | %s | %s |\n", s.Env, s.Flag, docDefault(s), docText.Replace(s.Doc))
			}
		}
	}
	return b.String()
}

// docText escapes what markdown would read as HTML or a table's column
// separator in the doc and empty tags.
var docText = strings.NewReplacer("<", "&lt;", ">", "&gt;", "|", `\|`)

// docDefault is the default column: the default as typed on the command
// line, or what an empty value means.
func docDefault(s Setting) string {
	switch {
	case s.Default != "":
		return "`" + s.Default + "`"
	case s.Type == reflect.TypeFor[string]() || s.Type == reflect.TypeFor[[]string]():
		if s.Empty != "" {
			return docText.Replace(s.Empty)
		}
		return "empty"
	case s.Type == reflect.TypeFor[time.Duration]():
		return "`0s`"
	}
	return "`" + fmt.Sprint(s.def.Interface()) + "`" // false, 0
}

// UpdateDoc returns doc with the text between its generated-settings
// markers replaced by DocTables.
func UpdateDoc(doc []byte) ([]byte, error) {
	begin := bytes.Index(doc, []byte(docBegin))
	end := bytes.Index(doc, []byte(docEnd))
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("config: the document lacks the generated-settings markers %q and %q", docBegin, docEnd)
	}
	var out bytes.Buffer
	out.Write(doc[:begin+len(docBegin)])
	out.WriteString("\n" + DocTables() + "\n")
	out.Write(doc[end:])
	return out.Bytes(), nil
}
