// Package bench holds what every part of the load harness shares: one
// run's settings (the command line's flags) and random identifiers.
package bench

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"time"

	"gatehouse/internal/config"
)

// DefaultSQLiteSync is the server's default GATEHOUSE_SQLITE_SYNC: the
// floors run with it unless told otherwise.
var DefaultSQLiteSync = config.Defaults().Database.SQLiteSync

// Options are the command-line settings.
type Options struct {
	Gatehouse   string
	Out         string
	Phase       time.Duration
	Warmup      time.Duration
	Workers     int
	PostgresURL string
	RedisURL    string
	// Before is an earlier gatehouse binary whose webhook figures are
	// measured in the same run (embedded only), for before/after.
	Before string
	// SignedOnly measures the signed order query and its floors only.
	SignedOnly bool
	// DeductOnly measures the Postgres deduction phases and their floor only.
	DeductOnly bool
	// PublishOnly measures the webhook publishing phases (Postgres) only.
	PublishOnly bool
	// FanoutOnly measures the fan-out drain only, on both backends;
	// WebhooksOnly every webhook phase (drain, fan-out, isolation).
	FanoutOnly, WebhooksOnly bool
	// Binary overrides Gatehouse for one gatehouse.Start (the -before runs).
	Binary string
	// PinCPU, when set, runs one gatehouse.Start under `taskset -c PinCPU`
	// with GOMAXPROCS=1 (the overload phases).
	PinCPU string
	// OverloadOnly measures only the overload phases (package overload);
	// OverloadFor is how long each offers 1.5 × its capacity.
	OverloadOnly bool
	OverloadFor  time.Duration
	// SQLiteSync is GATEHOUSE_SQLITE_SYNC of every embedded gatehouse
	// and the synchronous setting of every SQLite floor, so both pay for
	// the same durability.
	SQLiteSync string
}

// RandomBytes returns n random bytes.
func RandomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// RandomHex returns n random bytes in hex.
func RandomHex(n int) string { return hex.EncodeToString(RandomBytes(n)) }

// EventID is a new webhook message id, shaped like gatehouse's.
func EventID() string {
	return "msg_" + base64.RawURLEncoding.EncodeToString(RandomBytes(16))
}
