package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v3"

	"gatehouse/internal/config"
)

// TestSettingsDoc: the settings tables of docs/configuration.md list every
// GATEHOUSE_* setting of the command with its flag and default, and
// nothing else. The tables are generated from the same declarations as the
// flags (make generate); this reads them as a user would, against the
// flags the command really has.
func TestSettingsDoc(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	// Rows: env vars | flags | default | meaning; a row may name several
	// settings (then as many flags, and one default or one each).
	rowRE := regexp.MustCompile("(?m)^\\| (`GATEHOUSE_[^|]*) \\| ([^|]*) \\| ([^|]*) \\| [^|]* \\|$")
	codeRE := regexp.MustCompile("`([^`]*)`")
	type row struct{ flag, def string }
	documented := map[string]row{}
	for _, m := range rowRE.FindAllStringSubmatch(section, -1) {
		envs, flags, defs := codeRE.FindAllStringSubmatch(m[1], -1), codeRE.FindAllStringSubmatch(m[2], -1), codeRE.FindAllStringSubmatch(m[3], -1)
		if len(envs) != len(flags) {
			t.Fatalf("docs/configuration.md row %q: %d env vars, %d flags", m[0], len(envs), len(flags))
		}
		for i, e := range envs {
			r := row{flag: flags[i][1]}
			switch len(defs) {
			case len(envs):
				r.def = defs[i][1]
			case 1:
				r.def = defs[0][1]
			}
			documented[e[1]] = r
		}
	}

	seen := map[string]bool{}
	for _, f := range config.Flags() {
		name := "--" + f.Names()[0]
		envs := envVars(f)
		if len(envs) != 1 {
			t.Errorf("%s: %d GATEHOUSE_* environment variables, want 1", name, len(envs))
			continue
		}
		env := envs[0]
		seen[env] = true
		r, ok := documented[env]
		switch {
		case !ok:
			t.Errorf("%s (%s) is not in docs/configuration.md (run make generate)", env, name)
		case r.flag != name:
			t.Errorf("%s: docs/configuration.md names flag %s, the command %s", env, r.flag, name)
		case !sameDefault(r.def, f):
			t.Errorf("%s: docs/configuration.md's default is %q, the command's %v", env, r.def, f.(cli.DocGenerationFlag).GetValue())
		}
	}
	for env := range documented {
		if !seen[env] {
			t.Errorf("docs/configuration.md lists %s, which the command does not read", env)
		}
	}
}

func envVars(f cli.Flag) []string {
	var out []string
	if s, ok := f.(interface{ GetEnvVars() []string }); ok {
		for _, e := range s.GetEnvVars() {
			if strings.HasPrefix(e, "GATEHOUSE_") {
				out = append(out, e)
			}
		}
	}
	return out
}

// sameDefault reports whether the documented default doc is the flag's:
// durations by value ("2h" is 2h0m0s), numbers, booleans and strings as
// text. A string flag without a default is documented in words ("empty",
// "dev: generated …"), which any text matches.
func sameDefault(doc string, f cli.Flag) bool {
	switch x := f.(type) {
	case *cli.DurationFlag:
		d, err := time.ParseDuration(doc)
		return err == nil && d == x.Value
	case *cli.IntFlag:
		return doc == strconv.Itoa(x.Value)
	case *cli.BoolFlag:
		return doc == strconv.FormatBool(x.Value)
	case *cli.StringFlag:
		return x.Value == "" || doc == x.Value
	case *cli.StringSliceFlag:
		return len(x.Value) == 0 || doc == strings.Join(x.Value, ",")
	}
	return false
}
