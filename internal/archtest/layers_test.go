package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The layers, lowest first. A package may import its own layer and those
// below it. Prefixes match a package and everything under it.
const (
	infrastructure = iota // storage, transport, crypto, settings: no business rule
	domain                // one business concept each, behind its service
	frontDoor             // rest/, graph/, the console and the portal: thin adapters
	wiring                // assembles the app; test support
	command               // cmd/: flags wired to internal/
)

var layerNames = []string{"infrastructure", "domain", "front door", "wiring", "command"}

var layers = map[string]int{
	"internal/batch": infrastructure, "internal/benchfloor": infrastructure,
	"internal/combine": infrastructure, "internal/config": infrastructure,
	"internal/datadir": infrastructure, "internal/depstate": infrastructure,
	"internal/errs": infrastructure, "internal/httpx": infrastructure,
	"internal/kv": infrastructure, "internal/outbound": infrastructure,
	"internal/periodic": infrastructure, "internal/redact": infrastructure,
	"internal/requestlog": infrastructure, "internal/secret": infrastructure,
	"internal/shed": infrastructure, "internal/store": infrastructure,
	"internal/telemetry": infrastructure, "internal/ui": infrastructure,

	"internal/apikey": domain, "internal/audit": domain, "internal/identity": domain,
	"internal/inventory": domain, "internal/oauth": domain, "internal/order": domain,
	"internal/partner": domain, "internal/payment": domain, "internal/ticket": domain,
	"internal/webhook": domain,

	"rest": frontDoor, "graph": frontDoor, "internal/console": frontDoor, "internal/portal": frontDoor,

	"internal/app": wiring, "internal/demo": wiring, "internal/alerting": wiring,
	"internal/archtest": wiring, "internal/e2e": wiring, "internal/store/storetest": wiring, "internal/fleettest": wiring,
	"internal/rollingtest": wiring, "internal/testenv": wiring, "docs": wiring,
	"internal/kv/kvtest": wiring, "graph/graphtest": wiring,

	"cmd": command,
}

// notEntities are the packages of ent/ that are not an entity's.
var notEntities = map[string]bool{"migrate": true, "runtime": true, "schema": true, "hook": true,
	"predicate": true, "privacy": true, "enttest": true, "intercept": true, "internal": true}

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

func modulePackages(t *testing.T) (string, []pkg) {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "gatehouse/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return "gatehouse/", pkgs
}

// layerOf returns the layer of path (relative to the module) by its
// longest matching prefix, and false for a path no rule names.
func layerOf(path string) (int, bool) {
	best, layer := -1, 0
	for prefix, l := range layers {
		if (path == prefix || strings.HasPrefix(path, prefix+"/")) && len(prefix) > best {
			best, layer = len(prefix), l
		}
	}
	return layer, best >= 0
}

// entityPackage reports whether path is an Ent entity package (ent/user),
// not the client (ent) or a support package (ent/migrate, ent/runtime).
func entityPackage(path string) bool {
	rest, ok := strings.CutPrefix(path, "ent/")
	return ok && !strings.Contains(rest, "/") && !notEntities[rest]
}

// TestLayersImportDownwards: every package has a layer, imports nothing
// of a layer above its own, and infrastructure imports no Ent entity.
func TestLayersImportDownwards(t *testing.T) {
	mod, pkgs := modulePackages(t)
	for _, p := range pkgs {
		path := strings.TrimPrefix(p.ImportPath, mod)
		if path == "ent" || strings.HasPrefix(path, "ent/") {
			continue
		}
		own, ok := layerOf(path)
		if !ok {
			t.Errorf("%s has no layer: add it to layers in this file", path)
			continue
		}
		for _, imp := range p.Imports {
			dep, found := strings.CutPrefix(imp, mod)
			if !found {
				continue
			}
			if own == infrastructure && entityPackage(dep) {
				t.Errorf("%s (infrastructure) imports the Ent entity package %s", path, dep)
			}
			if dep == "ent" || strings.HasPrefix(dep, "ent/") {
				continue
			}
			if l, ok := layerOf(dep); ok && l > own {
				t.Errorf("%s (%s) imports %s (%s), a layer above it", path, layerNames[own], dep, layerNames[l])
			}
		}
	}
}

// maxPackageLines bounds a package's hand-written Go (tests and generated
// files aside).
const maxPackageLines = 2500

// TestNoPackageTooLarge: no hand-written package over maxPackageLines.
func TestNoPackageTooLarge(t *testing.T) {
	mod, pkgs := modulePackages(t)
	for _, p := range pkgs {
		path := strings.TrimPrefix(p.ImportPath, mod)
		if path == "ent" || strings.HasPrefix(path, "ent/") {
			continue
		}
		n := 0
		for _, f := range p.GoFiles {
			lines, generated := countLines(t, filepath.Join(p.Dir, f))
			if !generated {
				n += lines
			}
		}
		if n > maxPackageLines {
			t.Errorf("%s has %d hand-written lines (at most %d): split it by role", path, n, maxPackageLines)
		}
	}
}

// countLines counts a file's lines and tells whether it is generated (the
// "Code generated … DO NOT EDIT." line Go's tools recognise).
func countLines(t *testing.T, name string) (int, bool) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, generated := 0, false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if !generated && strings.HasPrefix(line, "// Code generated ") && strings.HasSuffix(line, " DO NOT EDIT.") {
			generated = true
		}
		n++
	}
	return n, generated
}
