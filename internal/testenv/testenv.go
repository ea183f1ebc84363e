// Package testenv gives tests their real backing services: a fresh Postgres
// database and a private Redis key prefix per caller.
//
// When a service is unreachable the test is skipped on a developer machine
// but FAILS in CI (CI=true) or when GATEHOUSE_TEST_REQUIRE_SERVICES=1, so a
// green CI always means both backends were exercised.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	"github.com/redis/go-redis/v9"
)

// Default service addresses; override with GATEHOUSE_TEST_POSTGRES_URL and
// GATEHOUSE_TEST_REDIS_URL.
const (
	DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
)

// Required reports whether missing services must fail tests instead of skipping them.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("CI") == "1" || os.Getenv("GATEHOUSE_TEST_REQUIRE_SERVICES") == "1"
}

func unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("%s is unreachable (required in CI): %v", what, err)
	}
	t.Skipf("%s is unreachable, skipping (set GATEHOUSE_TEST_REQUIRE_SERVICES=1 to fail instead): %v", what, err)
}

// PostgresAdminURL is the URL of the server tests create their databases on.
func PostgresAdminURL() string {
	if v := os.Getenv("GATEHOUSE_TEST_POSTGRES_URL"); v != "" {
		return v
	}
	return DefaultPostgresURL
}

// RedisURL returns the Redis URL for tests, or skips/fails when Redis is down.
func RedisURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("GATEHOUSE_TEST_REDIS_URL")
	if u == "" {
		u = DefaultRedisURL
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("GATEHOUSE_TEST_REDIS_URL: %v", err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		unavailable(t, "Redis", err)
	}
	return u
}

// KeyPrefix returns a key prefix unique to this test, so that tests sharing
// one Redis server never see each other's keys.
func KeyPrefix(t testing.TB) string {
	t.Helper()
	return "test:" + sanitize(t.Name()) + ":" + RandomSuffix() + ":"
}

// PostgresURL creates a fresh, empty database for the calling test and
// returns its URL; the database is dropped when the test ends.
func PostgresURL(t testing.TB) string {
	t.Helper()
	admin := PostgresAdminURL()
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		unavailable(t, "PostgreSQL", err)
	}
	name := "gh_" + strings.ToLower(sanitize(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	name += "_" + RandomSuffix()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", admin)
		if err != nil {
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("parse %q: %v", admin, err)
	}
	u.Path = "/" + name
	return u.String()
}

// RandomSuffix returns 8 random hex characters.
func RandomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Backend names a storage combination the same test runs against.
type Backend struct {
	Name        string // "sqlite" or "postgres"
	DatabaseURL string // empty for sqlite: the caller opens a file in t.TempDir()
	RedisURL    string // empty: in-process store
	KeyPrefix   string // Redis key prefix private to the test
}

// Embedded reports whether this is the SQLite + in-process combination.
func (b Backend) Embedded() bool { return b.DatabaseURL == "" }

// Run runs fn as a subtest against each storage combination: embedded SQLite
// + in-process store, and Postgres (a fresh database) + Redis (a private key
// prefix). Services are looked up inside the subtest, so a missing Postgres
// skips (or, in CI, fails) only the postgres half.
func Run(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		fn(t, Backend{Name: "sqlite"})
	})
	t.Run("postgres", func(t *testing.T) {
		b := Backend{Name: "postgres", RedisURL: RedisURL(t), KeyPrefix: KeyPrefix(t)}
		b.DatabaseURL = PostgresURL(t)
		fn(t, b)
	})
}
