package main

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/datadir"
	"gatehouse/internal/demo"
	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
)

// TestDataDirHeldByAnother starts the binary twice on one data dir, each
// on listeners of its own. Embedded: while the first demo runs, a second
// `serve --demo --reset` and a second `serve --demo` exit non-zero at once,
// naming the data dir and that another gatehouse (its pid) holds it, and
// the first one's database is untouched; once the first has stopped, the
// dir starts again. On Postgres the data dir holds no database: two
// replicas sharing one start side by side.
func TestDataDirHeldByAnother(t *testing.T) {
	work := t.TempDir()
	bin := filepath.Join(work, "gatehouse")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		dir := t.TempDir()
		data := filepath.Join(dir, "data")
		env := []string{
			"GATEHOUSE_DATA_DIR=" + data,
			"GATEHOUSE_ADDR=127.0.0.1:0", "GATEHOUSE_ADMIN_ADDR=127.0.0.1:0",
			"GATEHOUSE_DEMO_RECEIVER=" + freeLoopback(t),
			"GATEHOUSE_DATABASE_URL=" + b.DatabaseURL, "GATEHOUSE_REDIS_URL=" + b.RedisURL,
		}
		if !b.Embedded() {
			env = append(env, "GATEHOUSE_REDIS_PREFIX="+b.KeyPrefix,
				"GATEHOUSE_MASTER_KEY="+base64.StdEncoding.EncodeToString(secret.RandomBytes(32)),
				"GATEHOUSE_JWT_SECRET="+base64.RawURLEncoding.EncodeToString(secret.RandomBytes(48)))
		}
		first := startDemo(t, bin, dir, env)
		defer first.stop(t)
		if !b.Embedded() {
			second := startDemo(t, bin, dir, env)
			second.stop(t)
			return
		}
		db := filepath.Join(data, "gatehouse.db")
		before, err := os.Stat(db)
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"serve", "--demo", "--reset"}, {"serve", "--demo"}, {"serve"}} {
			start := time.Now()
			out, err := runOnce(t, bin, dir, env, args...)
			if took := time.Since(start); err == nil || took > 10*time.Second {
				t.Fatalf("%s while another gatehouse serves the data dir: %v after %s\n%s", args, err, took, out)
			}
			pid := strconv.Itoa(first.cmd.Process.Pid)
			for _, want := range []string{"the data dir " + data + " is in use", "another gatehouse (pid " + pid + ")", datadir.LockFile} {
				if !strings.Contains(out, want) {
					t.Errorf("%s: the message does not say %q:\n%s", args, want, out)
				}
			}
			if strings.Contains(out, "listening") || strings.Contains(out, "demo reset") {
				t.Errorf("%s got further than the lock:\n%s", args, out)
			}
		}
		if _, err := os.Stat(filepath.Join(data, demo.ResetDir)); !os.IsNotExist(err) {
			t.Fatalf("a refused reset moved the database: %v", err)
		}
		if after, err := os.Stat(db); err != nil || !os.SameFile(before, after) {
			t.Fatalf("the running demo's database was replaced: %v", err)
		}
		first.stop(t)
		again := startDemo(t, bin, dir, env, "--reset") // the lock died with its holder
		again.stop(t)
	})
}
