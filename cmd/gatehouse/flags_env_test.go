package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"

	"gatehouse/internal/config"
)

// TestEveryFlagHasAnEnvVar: every flag of every command reads one
// GATEHOUSE_* environment variable. The root's are the settings (their
// table is generated, TestSettingsDoc); a subcommand's has a name of its
// own (never a setting's, which it would silently shadow) and a row in
// the commands table of docs/configuration.md.
func TestEveryFlagHasAnEnvVar(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	rowRE := regexp.MustCompile("(?m)^\\| `gatehouse ([a-z ]+?)(?: URL)?` \\| `(--[a-z-]+)` \\| `(GATEHOUSE_[A-Z_]+)` \\|")
	documented := map[string]string{} // "webhook listen --addr" -> env
	for _, m := range rowRE.FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]+" "+m[2]] = m[3]
	}
	settings := settingEnv()
	root := rootCommand(nil, nil, nil)
	for _, f := range root.Flags {
		if envs := flagEnv(f); len(envs) != 1 || !settings[envs[0]] {
			t.Errorf("gatehouse --%s: environment variables %v, want its setting's", f.Names()[0], envs)
		}
	}
	seen := map[string]bool{}
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := strings.TrimSpace(path + " " + c.Name)
			for _, f := range c.Flags {
				flag := "--" + f.Names()[0]
				envs := flagEnv(f)
				switch {
				case len(envs) != 1:
					t.Errorf("gatehouse %s %s: environment variables %v, want exactly one GATEHOUSE_*", name, flag, envs)
					continue
				case settings[envs[0]]:
					t.Errorf("gatehouse %s %s: %s is a setting's variable", name, flag, envs[0])
				case seen[envs[0]]:
					t.Errorf("gatehouse %s %s: %s is read by another flag too", name, flag, envs[0])
				}
				seen[envs[0]] = true
				if got, ok := documented[name+" "+flag]; !ok || got != envs[0] {
					t.Errorf("gatehouse %s %s (%s): docs/configuration.md's commands table says %q", name, flag, envs[0], got)
				}
				delete(documented, name+" "+flag)
			}
			walk(name, c.Commands)
		}
	}
	walk("", root.Commands)
	for row := range documented {
		t.Errorf("docs/configuration.md lists gatehouse %s, which no command has", row)
	}
	if len(config.Settings()) == 0 || len(seen) == 0 {
		t.Fatal("no flags found")
	}
}

// flagEnv is the GATEHOUSE_* environment variables f reads.
func flagEnv(f cli.Flag) []string { return envVars(f) }
