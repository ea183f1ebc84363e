package fleet

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gatehouse/internal/testenv"
)

// PgBouncer is a pgbouncer process of the test in front of the shared
// Postgres server (testenv.PostgresAdminURL), on a free loopback port.
type PgBouncer struct {
	Port int
	Dir  string
	// Mode is the pool_mode: "transaction" or "session".
	Mode string

	cmd  *exec.Cmd
	done chan struct{}
}

// StartPgBouncer starts a pgbouncer (Debian's 1.18 in CI) in pool mode
// mode ("transaction", "session") that forwards every database to the
// Postgres server of testenv.PostgresAdminURL, with trust authentication
// of that URL's user. As root it runs as the postgres user (pgbouncer
// refuses root). Each of settings is a line added to the [pgbouncer]
// section ("default_pool_size = 2"). A missing pgbouncer skips the test,
// or fails it when services are required (testenv.Required).
func StartPgBouncer(t testing.TB, mode string, settings ...string) *PgBouncer {
	t.Helper()
	return StartPgBouncerTo(t, testenv.PostgresAdminURL(), mode, settings...)
}

// StartPgBouncerTo is StartPgBouncer in front of the Postgres server of
// upstream (a private one of the test, say), trusting that URL's user.
func StartPgBouncerTo(t testing.TB, upstream, mode string, settings ...string) *PgBouncer {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if testenv.Required() {
			t.Fatalf("pgbouncer is not installed (required in CI; apt-get install pgbouncer): %v", err)
		}
		t.Skipf("pgbouncer is not installed: %v", err)
	}
	admin, err := url.Parse(upstream)
	if err != nil {
		t.Fatalf("postgres URL: %v", err)
	}
	host, port := admin.Hostname(), admin.Port()
	if port == "" {
		port = "5432"
	}
	pgUser := admin.User.Username()
	if pgUser == "" {
		pgUser = "postgres"
	}
	// pgbouncer reads its files as the user it runs as: a directory of its own.
	dir, err := os.MkdirTemp("", "pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("pgbouncer refuses to run as root and there is no postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	var lastErr error
	for range 5 {
		b := &PgBouncer{Port: freePort(t), Dir: dir, Mode: mode}
		ini := filepath.Join(dir, "pgbouncer.ini")
		body := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
max_client_conn = 1000
default_pool_size = 20
ignore_startup_parameters = extra_float_digits
server_check_delay = 0
`, host, port, b.Port, filepath.Join(dir, "userlist.txt"), mode) + strings.Join(settings, "\n") + "\n"
		if err := writeOwned(filepath.Join(dir, "userlist.txt"), fmt.Sprintf("%q \"\"\n", pgUser), cred); err != nil {
			t.Fatal(err)
		}
		if err := writeOwned(ini, body, cred); err != nil {
			t.Fatal(err)
		}
		if lastErr = b.start(bin, ini, cred); lastErr == nil {
			t.Cleanup(b.Kill)
			return b
		}
	}
	t.Fatalf("pgbouncer did not start: %v", lastErr)
	return nil
}

func writeOwned(path, body string, cred *syscall.Credential) error {
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return err
	}
	if cred != nil {
		return os.Chown(path, int(cred.Uid), int(cred.Gid))
	}
	return nil
}

func (b *PgBouncer) start(bin, ini string, cred *syscall.Credential) error {
	cmd := exec.Command(bin, ini)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := os.OpenFile(filepath.Join(b.Dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); out.Close(); close(done) }()
	b.cmd, b.done = cmd, done
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("pgbouncer on port %d exited at start: %s", b.Port, b.Log())
		default:
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(b.Port), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			b.Kill()
			return fmt.Errorf("pgbouncer on port %d did not answer: %w; log: %s", b.Port, err, b.Log())
		}
		time.Sleep(20 * time.Millisecond) // waiting for a child process to listen
	}
}

// URL is the URL of database db (a URL of the Postgres server, such as
// testenv.PostgresURL's: its database name is kept) through this pgbouncer.
func (b *PgBouncer) URL(t testing.TB, direct string) string {
	t.Helper()
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = "127.0.0.1:" + strconv.Itoa(b.Port)
	return u.String()
}

// Log is pgbouncer's log so far.
func (b *PgBouncer) Log() string {
	out, _ := os.ReadFile(filepath.Join(b.Dir, "stdout.log"))
	return string(out)
}

// Kill ends pgbouncer by its PID and waits.
func (b *PgBouncer) Kill() {
	if b.cmd == nil {
		return
	}
	select {
	case <-b.done:
		return
	default:
	}
	_ = b.cmd.Process.Kill()
	<-b.done
}
