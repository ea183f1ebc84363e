package config

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestDevKeysConcurrentStartsAgree: gatehouses started together on a
// brand-new data dir (here goroutines released at once by a barrier, each
// creating and reading the files through its own descriptors, as separate
// processes would) all end with the keys the files hold, and exactly one of
// them generated each key. A file created empty and written afterwards
// let a start read it in between and run with an empty JWT secret (or fail
// on an empty master key).
func TestDevKeysConcurrentStartsAgree(t *testing.T) {
	const rounds, starts = 50, 16
	for range rounds {
		dir := filepath.Join(t.TempDir(), "data")
		cfgs := make([]Config, starts)
		errs := make([]error, starts)
		var ready, done sync.WaitGroup
		gate := make(chan struct{})
		for i := range cfgs {
			cfgs[i] = Defaults()
			cfgs[i].Database.DataDir = dir
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				ready.Done()
				<-gate
				errs[i] = cfgs[i].Resolve()
			}()
		}
		ready.Wait()
		close(gate)
		done.Wait()

		master, err := os.ReadFile(filepath.Join(dir, "master.key"))
		if err != nil {
			t.Fatal(err)
		}
		jwt, err := os.ReadFile(filepath.Join(dir, "jwt.key"))
		if err != nil {
			t.Fatal(err)
		}
		generated := map[string]int{}
		for i, c := range cfgs {
			if errs[i] != nil {
				t.Fatalf("start %d: %v", i, errs[i])
			}
			if len(c.MasterKey) != 32 || len(c.JWTSecret) < 32 {
				t.Fatalf("start %d: master key of %d bytes, JWT secret of %d", i, len(c.MasterKey), len(c.JWTSecret))
			}
			if string(c.JWTSecret)+"\n" != string(jwt) {
				t.Fatalf("start %d runs with a JWT secret the data dir does not hold", i)
			}
			if string(c.MasterKey) != string(cfgs[0].MasterKey) {
				t.Fatalf("starts 0 and %d run with different master keys", i)
			}
			for _, k := range c.GeneratedKeys {
				generated[k]++
			}
		}
		if generated["master.key"] != 1 || generated["jwt.key"] != 1 {
			t.Fatalf("generated %v, want each key once", generated)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 2 {
			t.Fatalf("the data dir holds %d files, want the two keys alone", len(entries))
		}
		stored := Defaults()
		stored.Database.DataDir = dir
		if err := stored.Resolve(); err != nil || string(stored.MasterKey) != string(cfgs[0].MasterKey) {
			t.Fatalf("the stored master key %q is not the one the starts run with (%v)", master, err)
		}
	}
}

// TestShortDevJWTKeyRefused: a jwt.key in the data dir that is empty or
// shorter than 32 bytes is refused, naming the file, as a short
// GATEHOUSE_JWT_SECRET is: no session is signed with next to no key.
func TestShortDevJWTKeyRefused(t *testing.T) {
	for _, content := range []string{"", "\n", "short-key\n"} {
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "jwt.key"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		c := Defaults()
		c.Database.DataDir = dir
		err := c.Resolve()
		if err == nil || !strings.Contains(err.Error(), "jwt.key") || !strings.Contains(err.Error(), "at least 32") {
			t.Errorf("jwt.key %q: Resolve said %v, want the file refused", content, err)
		}
	}
}
