package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"gatehouse/internal/apikey"
	"gatehouse/internal/secret"
	"gatehouse/internal/store"
	"gatehouse/internal/testenv"
)

// cliArgs returns the global flags that point the CLI at backend b.
func cliArgs(t *testing.T, b testenv.Backend) ([]string, string) {
	t.Helper()
	dir := t.TempDir()
	if b.Embedded() {
		return []string{"gatehouse", "--data-dir", dir}, "sqlite:" + dir + "/gatehouse.db"
	}
	return []string{"gatehouse", "--data-dir", dir, "--database-url", b.DatabaseURL,
		"--master-key", base64.StdEncoding.EncodeToString(secret.RandomBytes(32)),
		"--jwt-secret", base64.StdEncoding.EncodeToString(secret.RandomBytes(32))}, b.DatabaseURL
}

func runCLI(t *testing.T, args []string, stdin string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestAPIKeyCreateCommand(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		global, dbURL := cliArgs(t, b)
		out, errOut, err := runCLI(t, append(global, "apikey", "create", "--name", "ci"), "")
		if err != nil {
			t.Fatal(err, errOut)
		}
		key := strings.TrimSpace(out)
		if !strings.HasPrefix(key, apikey.KeyPrefix) || strings.Count(out, "\n") != 1 {
			t.Fatalf("stdout must hold the key alone: %q", out)
		}
		if !strings.Contains(errOut, `"ci"`) || strings.Contains(errOut, key) {
			t.Fatalf("stderr: %q", errOut)
		}
		db, err := store.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		row, err := apikey.NewService(db.Client, nil).Authenticate(context.Background(), key)
		if err != nil || row.Name != "ci" || row.Role != apikey.RoleAdmin {
			t.Fatalf("the printed key does not authenticate as an ADMIN key: %v %+v", err, row)
		}
		// --role READ_ONLY (any case, '-' for '_') makes a query-only key.
		for _, role := range []string{"READ_ONLY", "read-only"} {
			out, errOut, err = runCLI(t, append(global, "apikey", "create", "--name", "dashboard", "--role", role), "")
			if err != nil || !strings.Contains(errOut, "READ_ONLY") {
				t.Fatal(err, errOut)
			}
			ro, err := apikey.NewService(db.Client, nil).Authenticate(context.Background(), strings.TrimSpace(out))
			if err != nil || ro.Role != apikey.RoleReadOnly {
				t.Fatalf("--role %s: %v %+v", role, err, ro)
			}
		}
		if _, errOut, err := runCLI(t, append(global, "apikey", "create", "--name", "x", "--role", "root"), ""); err == nil || !strings.Contains(err.Error(), "ADMIN, READ_ONLY or PUBLISHER") {
			t.Fatalf("an unknown role was accepted: %v %s", err, errOut)
		}
		if _, _, err := runCLI(t, append(global, "apikey", "create", "--name", " "), ""); err == nil {
			t.Fatal("a blank name was accepted")
		}
		if _, _, err := runCLI(t, append(global, "apikey", "create"), ""); err == nil {
			t.Fatal("--name is required")
		}
	})
}

func TestUserCreateCommand(t *testing.T) {
	secret.PasswordCost = 4
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		global, dbURL := cliArgs(t, b)
		out, errOut, err := runCLI(t, append(global, "user", "create", "--username", "alice", "--role", "admin", "--role", "ops"), "s3cret-passw0rd\n")
		if err != nil {
			t.Fatal(err, errOut)
		}
		if !strings.Contains(out, `"alice"`) || !strings.Contains(out, "admin, ops") || strings.Contains(out+errOut, "s3cret") {
			t.Fatalf("output: %q %q", out, errOut)
		}
		db, err := store.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		u := db.User.Query().OnlyX(context.Background())
		if u.Username != "alice" || !secret.CheckPassword(u.PasswordHash, "s3cret-passw0rd") {
			t.Fatalf("stored user %q", u.Username)
		}
		// CRLF and a missing final newline are fine.
		if _, _, err := runCLI(t, append(global, "user", "create", "--username", "bob"), "another-pass\r\n"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := runCLI(t, append(global, "user", "create", "--username", "carol"), "no-newline-pass"); err != nil {
			t.Fatal(err)
		}
		for name, c := range map[string]struct {
			args  []string
			stdin string
		}{
			"duplicate":      {[]string{"--username", "alice"}, "s3cret-passw0rd\n"},
			"short password": {[]string{"--username", "dave"}, "short\n"},
			"no password":    {[]string{"--username", "dave"}, ""},
			"bad username":   {[]string{"--username", "da ve"}, "long-enough-pw\n"},
			"bad role":       {[]string{"--username", "dave", "--role", "a b"}, "long-enough-pw\n"},
		} {
			_, _, err := runCLI(t, append(append(global, "user", "create"), c.args...), c.stdin)
			if err == nil {
				t.Errorf("%s: accepted", name)
			} else if strings.Contains(err.Error(), "long-enough-pw") || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: the error repeats the password", name)
			}
		}
		if n := db.User.Query().CountX(context.Background()); n != 3 {
			t.Fatalf("%d users", n)
		}
	})
}
