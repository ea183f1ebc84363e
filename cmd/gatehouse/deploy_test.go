package main

import (
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"gatehouse/internal/config"
	"gatehouse/internal/testenv"
)

// The container files checked here live at the top of the repository.
const (
	dockerfilePath   = "../../Dockerfile"
	dockerignorePath = "../../.dockerignore"
	composePath      = "../../compose.yaml"
)

// instruction is one Dockerfile instruction: its keyword (upper case), its
// --flags, and the rest of the line (continuations joined).
type instruction struct {
	cmd   string
	flags map[string]string
	args  string
}

// exec is the instruction's exec form (a JSON array), or nil for the shell form.
func (in instruction) exec() []string {
	var out []string
	if json.Unmarshal([]byte(in.args), &out) != nil {
		return nil
	}
	return out
}

// parseDockerfile splits a Dockerfile into stages of instructions. It reads
// what this repository's Dockerfile uses (comments, line continuations,
// --flags, exec and shell forms), not the whole grammar; a line it cannot
// read fails the test rather than being skipped.
func parseDockerfile(t *testing.T, text string) [][]instruction {
	t.Helper()
	var stages [][]instruction
	var logical []string
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasPrefix(trimmed, "#") { // a comment inside a continued instruction
			continue
		}
		if body, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(trimmed)
		logical = append(logical, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatalf("Dockerfile ends inside a continued line: %q", cur.String())
	}
	for _, l := range logical {
		kw, rest, _ := strings.Cut(l, " ")
		in := instruction{cmd: strings.ToUpper(kw), flags: map[string]string{}}
		rest = strings.TrimSpace(rest)
		for strings.HasPrefix(rest, "--") {
			var f string
			f, rest, _ = strings.Cut(rest, " ")
			k, v, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
			in.flags[k] = v
			rest = strings.TrimSpace(rest)
		}
		in.args = rest
		switch {
		case in.cmd == "FROM":
			stages = append(stages, []instruction{in})
		case in.cmd == "ARG" && len(stages) == 0: // global build arguments
		case len(stages) == 0:
			t.Fatalf("Dockerfile: %s before the first FROM", in.cmd)
		default:
			stages[len(stages)-1] = append(stages[len(stages)-1], in)
		}
	}
	return stages
}

// settingEnv is every GATEHOUSE_* variable the command reads as a setting.
func settingEnv() map[string]bool {
	m := map[string]bool{}
	for _, s := range config.Settings() {
		m[s.Env] = true
	}
	return m
}

// TestDockerfileRules: the image is a static binary on an empty base (no
// shell), run by a user other than root, with CA certificates, a data
// directory that user can write, listeners reachable from outside the
// container, and a HEALTHCHECK that runs the binary itself; every
// GATEHOUSE_* it sets is a setting of the command.
func TestDockerfileRules(t *testing.T) {
	raw, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	stages := parseDockerfile(t, string(raw))
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage build (build, then the image), got %d stage(s)", len(stages))
	}
	builtStatic := false
	for _, st := range stages[:len(stages)-1] {
		for _, in := range st {
			if in.cmd == "RUN" && strings.Contains(in.args, "CGO_ENABLED=0") && strings.Contains(in.args, "go build") && strings.Contains(in.args, "./cmd/gatehouse") {
				builtStatic = true
			}
		}
	}
	if !builtStatic {
		t.Error("no build stage runs CGO_ENABLED=0 go build … ./cmd/gatehouse (a static binary)")
	}

	final := stages[len(stages)-1]
	base := final[0].args
	if base != "scratch" && !strings.HasPrefix(base, "gcr.io/distroless/static") || strings.Contains(base, ":debug") {
		t.Errorf("the image is based on %q: want scratch or distroless static (no shell)", base)
	}
	var (
		user, entry, health []string
		env                 = map[string]string{}
		copies              []instruction
		exposed             []string
	)
	for _, in := range final[1:] {
		switch in.cmd {
		case "RUN", "SHELL":
			t.Errorf("the final stage has %s %s: it has no shell to run it", in.cmd, in.args)
		case "USER":
			user = strings.Split(in.args, ":")
		case "ENTRYPOINT":
			if entry = in.exec(); entry == nil {
				t.Errorf("ENTRYPOINT %s is in shell form; there is no shell", in.args)
			}
		case "HEALTHCHECK":
			cmd, rest, _ := strings.Cut(in.args, " ")
			if cmd != "CMD" {
				t.Errorf("HEALTHCHECK %s: want CMD [...]", in.args)
			}
			health = instruction{args: strings.TrimSpace(rest)}.exec()
			if health == nil {
				t.Errorf("HEALTHCHECK %s is in shell form; there is no shell", in.args)
			}
			if d, err := time.ParseDuration(in.flags["timeout"]); err != nil || d < 3*time.Second {
				t.Errorf("HEALTHCHECK --timeout=%s: want at least 3s (/readyz allows each check 2s)", in.flags["timeout"])
			}
		case "ENV":
			for _, kv := range strings.Fields(in.args) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Errorf("ENV %s: want KEY=value pairs", in.args)
				}
				env[k] = v
			}
		case "COPY", "ADD":
			copies = append(copies, in)
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in.args)...)
		}
	}

	if len(user) == 0 || user[0] == "" || user[0] == "0" || user[0] == "root" || len(user) > 1 && (user[1] == "0" || user[1] == "root") {
		t.Errorf("USER %v: the process must not run as root (or group root)", user)
	}
	if len(entry) == 0 || filepath.Base(entry[0]) != "gatehouse" {
		t.Fatalf("ENTRYPOINT %v: want the gatehouse binary", entry)
	}
	if len(health) < 2 || health[0] != entry[0] || health[1] != "healthcheck" {
		t.Errorf("HEALTHCHECK CMD %v: want the binary itself, [%q, \"healthcheck\", …]", health, entry[0])
	}

	copied := func(dest string) *instruction {
		for i, c := range copies {
			f := strings.Fields(c.args)
			if len(f) >= 2 && strings.TrimSuffix(f[len(f)-1], "/") == strings.TrimSuffix(dest, "/") {
				return &copies[i]
			}
		}
		return nil
	}
	if copied(entry[0]) == nil {
		t.Errorf("nothing copies the binary to %s", entry[0])
	}
	if copied("/etc") == nil && copied("/etc/ssl/certs") == nil && copied("/etc/ssl/certs/ca-certificates.crt") == nil {
		t.Error("no CA certificates are copied (outbound HTTPS: webhooks, payments, rediss://)")
	}
	dataDir := env["GATEHOUSE_DATA_DIR"]
	if dataDir == "" {
		t.Error("ENV sets no GATEHOUSE_DATA_DIR")
	} else if c := copiedDir(copies, dataDir); c == nil || len(user) == 0 || c.flags["chown"] != strings.Join(user, ":") {
		t.Errorf("the data dir %s must be created owned by the USER %v (COPY --chown)", dataDir, user)
	}

	settings := settingEnv()
	for k := range env {
		if strings.HasPrefix(k, "GATEHOUSE_") && !settings[k] {
			t.Errorf("ENV %s is not a setting of gatehouse", k)
		}
	}
	for _, k := range []string{"GATEHOUSE_ADDR", "GATEHOUSE_ADMIN_ADDR"} {
		host, port, err := net.SplitHostPort(env[k])
		if err != nil {
			t.Errorf("ENV %s=%q: want host:port", k, env[k])
			continue
		}
		if ip, err := netip.ParseAddr(host); host != "" && (err != nil || !ip.IsUnspecified()) {
			t.Errorf("ENV %s=%q: bind every interface (0.0.0.0), or nothing outside the container reaches it", k, env[k])
		}
		if !slices.Contains(exposed, port) && !slices.Contains(exposed, port+"/tcp") {
			t.Errorf("EXPOSE %v lacks %s's port %s", exposed, k, port)
		}
	}

	ignore, err := os.ReadFile(dockerignorePath)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	var patterns []string
	for _, l := range strings.Split(string(ignore), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, strings.TrimPrefix(l, "/"))
		}
	}
	for _, must := range []string{".git", "bin", "data"} {
		if !slices.Contains(patterns, must) {
			t.Errorf(".dockerignore does not keep %s out of the build context", must)
		}
	}
	// Nothing the build needs may be left out.
	for _, need := range []string{"go.mod", "go.sum", "cmd", "internal", "ent", "graph", "rest", "web-schema"} {
		for _, p := range patterns {
			if ok, _ := filepath.Match(p, need); ok {
				t.Errorf(".dockerignore pattern %q leaves out %s, which the build needs", p, need)
			}
		}
	}
}

// copiedDir is the COPY that creates directory dir: one whose destination
// is dir, or its parent when the source's last element is dir's name (a
// directory copied with its parent keeps its mode).
func copiedDir(copies []instruction, dir string) *instruction {
	for i, c := range copies {
		f := strings.Fields(c.args)
		if len(f) < 2 {
			continue
		}
		src, dest := path.Clean(f[len(f)-2]), path.Clean(f[len(f)-1])
		if dest == path.Clean(dir) || dest == path.Dir(path.Clean(dir)) && path.Base(src) == path.Base(dir) {
			return &copies[i]
		}
	}
	return nil
}

// TestComposeRules: compose.yaml runs Postgres, a Redis that cannot evict,
// at least two gatehouse replicas sharing their keys and stores, and
// HAProxy in front checking each replica's /readyz; the replicas drain on
// shutdown and trust HAProxy's forwarded headers; every GATEHOUSE_* name is
// a setting of the command. When haproxy is installed its configuration
// is checked by haproxy itself.
func TestComposeRules(t *testing.T) {
	raw, err := os.ReadFile(composePath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Build       any               `yaml:"build"`
			Image       string            `yaml:"image"`
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Configs     []struct {
				Source string `yaml:"source"`
				Target string `yaml:"target"`
			} `yaml:"configs"`
			// A list of names, or a map of names to settings.
			Networks any `yaml:"networks"`
		} `yaml:"services"`
		Configs map[string]struct {
			Content string `yaml:"content"`
		} `yaml:"configs"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}

	settings := settingEnv()
	var replicas []string
	var haproxyCfg, haproxyIP string
	for name, s := range doc.Services {
		for k := range s.Environment {
			if strings.HasPrefix(k, "GATEHOUSE_") && !settings[k] {
				t.Errorf("service %s: %s is not a setting of gatehouse", name, k)
			}
		}
		switch {
		case s.Build != nil:
			replicas = append(replicas, name)
		case strings.Contains(s.Image, "/redis:"):
			if i := slices.Index(s.Command, "--maxmemory-policy"); i < 0 || i+1 >= len(s.Command) || s.Command[i+1] != "noeviction" {
				t.Errorf("service %s: command %v must set --maxmemory-policy noeviction", name, s.Command)
			}
		case strings.Contains(s.Image, "/haproxy:"):
			for _, c := range s.Configs {
				if c.Target == "/usr/local/etc/haproxy/haproxy.cfg" {
					haproxyCfg = doc.Configs[c.Source].Content
				}
			}
			if nets, ok := s.Networks.(map[string]any); ok {
				for _, n := range nets {
					if settings, ok := n.(map[string]any); ok {
						haproxyIP, _ = settings["ipv4_address"].(string)
					}
				}
			}
		}
	}
	slices.Sort(replicas)
	if len(replicas) < 2 {
		t.Fatalf("want at least two gatehouse replicas (services built from the Dockerfile), got %v", replicas)
	}
	if _, ok := doc.Services["postgres"]; !ok {
		t.Error("no postgres service")
	}
	if haproxyCfg == "" || haproxyIP == "" {
		t.Fatal("no haproxy service with its configuration (configs: content:) and a fixed address")
	}

	first := doc.Services[replicas[0]].Environment
	for _, name := range replicas {
		env := doc.Services[name].Environment
		for _, k := range []string{"GATEHOUSE_MASTER_KEY", "GATEHOUSE_JWT_SECRET", "GATEHOUSE_DATABASE_URL", "GATEHOUSE_REDIS_URL"} {
			if env[k] == "" || env[k] != first[k] {
				t.Errorf("%s: %s=%q, %s has %q: replicas must share it", name, k, env[k], replicas[0], first[k])
			}
		}
		if !strings.HasPrefix(env["GATEHOUSE_DATABASE_URL"], "postgres://") || !strings.HasPrefix(env["GATEHOUSE_REDIS_URL"], "redis") {
			t.Errorf("%s: replicas need Postgres and Redis, got %q and %q", name, env["GATEHOUSE_DATABASE_URL"], env["GATEHOUSE_REDIS_URL"])
		}
		if d, err := time.ParseDuration(env["GATEHOUSE_SHUTDOWN_DRAIN"]); err != nil || d < 2*time.Second {
			t.Errorf("%s: GATEHOUSE_SHUTDOWN_DRAIN=%q: want a drain longer than HAProxy needs to see the 503 (2 checks)", name, env["GATEHOUSE_SHUTDOWN_DRAIN"])
		}
		trusted, err := config.ParseTrustedProxies(env["GATEHOUSE_TRUSTED_PROXIES"])
		ip, ipErr := netip.ParseAddr(haproxyIP)
		if err != nil || ipErr != nil || len(trusted) == 0 || !slices.ContainsFunc(trusted, func(p netip.Prefix) bool { return p.Contains(ip) }) {
			t.Errorf("%s: GATEHOUSE_TRUSTED_PROXIES=%q must name HAProxy's address %s", name, env["GATEHOUSE_TRUSTED_PROXIES"], haproxyIP)
		}
	}

	// Every backend holding a replica checks /readyz and bounds the
	// requests in flight per replica (maxconn), queueing the rest for a
	// bounded time (timeout queue in the defaults); every replica is in
	// the public backend with checks on.
	if !slices.ContainsFunc(haproxySections(haproxyCfg, "defaults")["defaults"], func(l string) bool { return strings.HasPrefix(l, "timeout queue ") }) {
		t.Error("HAProxy defaults lack a timeout queue: requests over maxconn would wait for timeout connect or forever")
	}
	backends := haproxySections(haproxyCfg, "backend")
	checked := map[string]bool{}
	for name, lines := range backends {
		if !slices.Contains(lines, "option httpchk GET /readyz") {
			t.Errorf("HAProxy backend %s lacks option httpchk GET /readyz", name)
		}
		if !slices.ContainsFunc(lines, func(l string) bool {
			f := strings.Fields(l)
			return len(f) > 0 && (f[0] == "default-server" || f[0] == "server") && slices.Contains(f, "maxconn")
		}) {
			t.Errorf("HAProxy backend %s sets no maxconn per server", name)
		}
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) >= 3 && f[0] == "server" && slices.Contains(f, "check") {
				host, _, _ := net.SplitHostPort(f[2])
				checked[host] = true
			}
		}
	}
	for _, r := range replicas {
		if !checked[r] {
			t.Errorf("replica %s is not a checked server of any HAProxy backend", r)
		}
	}

	if _, err := exec.LookPath("haproxy"); err != nil {
		if testenv.Required() {
			t.Fatalf("haproxy is not installed (required in CI to check compose.yaml's configuration): %v", err)
		}
		t.Log("haproxy not installed: its own check of the configuration is skipped")
		return
	}
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(haproxyCfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("haproxy", "-c", "-f", cfg).CombinedOutput(); err != nil {
		t.Errorf("haproxy -c refuses compose.yaml's configuration: %v\n%s", err, out)
	}
}

// haproxySections maps the name of each section of kind ("backend", …) to
// its trimmed lines.
func haproxySections(cfg, kind string) map[string][]string {
	out := map[string][]string{}
	var cur string
	for _, l := range strings.Split(cfg, "\n") {
		trimmed := strings.TrimSpace(l)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if l[0] != ' ' && l[0] != '\t' { // a section header
			cur = ""
			if f := strings.Fields(trimmed); f[0] == kind {
				cur = kind // an unnamed section (defaults) by its kind
				if len(f) >= 2 {
					cur = f[1]
				}
				out[cur] = nil
			}
			continue
		}
		if cur != "" {
			out[cur] = append(out[cur], trimmed)
		}
	}
	return out
}
