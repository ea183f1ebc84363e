// Package costs measures what one request costs the shared backends, for
// capacity planning: a short phase against one gatehouse process alone,
// with the backends' own counters read before and after it.
//
//   - Round trips: the TCP segments carrying data that the gatehouse
//     process sent on its connections to Redis and to Postgres (tcp_info's
//     data_segs_out, through ss(8)). gatehouse writes each command, script
//     call, pipeline or pgx batch in one write on a TCP_NODELAY socket, so
//     a segment is a request it then waits for: a round trip.
//   - Redis: INFO commandstats (calls and µs per command; commands that
//     scripts run count as calls too) and INFO cpu (the whole server's
//     CPU, which adds reading, parsing and replying to the commands' own
//     time).
//   - Postgres: pg_stat_statements when the server loads it (statements
//     and their execution time, this database only), and, when Postgres
//     runs on this machine, the CPU time of the backends serving this
//     database (/proc). Neither includes the WAL writer, checkpointer or
//     autovacuum, which are shared by every database of the server.
//
// On a shared Redis the commandstats and CPU figures include other
// clients' work; the round trips and the Postgres figures are this
// process's and this database's alone.
package costs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"gatehouse/cmd/gatehouse-bench/internal/bench"
	"gatehouse/cmd/gatehouse-bench/internal/load"
	"gatehouse/cmd/gatehouse-bench/internal/proc"

	"github.com/redis/go-redis/v9"
)

// Recorder keeps the cost figures (the run's report) and what could not be
// measured.
type Recorder interface {
	AddCost(Figure)
	Skip(what, why string)
}

// Figure is what one request cost the backends in a cost phase.
type Figure struct {
	Name     string  `json:"name"`
	Requests int     `json:"requests"`
	Seconds  float64 `json:"seconds"`
	// GatehouseCPUus is the gatehouse process's CPU per request.
	GatehouseCPUus float64 `json:"gatehouse_cpu_us"`

	RedisRoundTrips float64 `json:"redis_round_trips"`
	// RedisCallsBy and RedisUSBy are calls and µs per request by command
	// (INFO commandstats): a script's own calls count under their names
	// too, and the script's µs include theirs.
	RedisCallsBy map[string]float64 `json:"redis_calls_by_command"`
	RedisUSBy    map[string]float64 `json:"redis_us_by_command"`
	// RedisCPUus is the Redis server's CPU per request (INFO cpu).
	RedisCPUus float64 `json:"redis_cpu_us"`

	PostgresRoundTrips float64 `json:"postgres_round_trips"`
	// PostgresStatements and PostgresExecUS come from pg_stat_statements
	// (-1: not loaded on the server).
	PostgresStatements float64 `json:"postgres_statements"`
	PostgresExecUS     float64 `json:"postgres_exec_us"`
	// PostgresCPUus is the CPU of the database's backends (/proc; -1: the
	// server is not on this machine).
	PostgresCPUus float64 `json:"postgres_cpu_us"`
	// PostgresSource says where PostgresCPUus or PostgresExecUS came from.
	PostgresSource string `json:"postgres_source"`
}

// Sampler reads the backends' counters around a cost phase.
type Sampler struct {
	rdb       *redis.Client
	db        *sql.DB // the bench database, for pg_stat_statements
	dbName    string
	pid       int      // the gatehouse process
	redisAddr []string // ip:port forms of the Redis server
	pgAddr    []string // … and of Postgres
	pgLocal   bool     // Postgres's processes are visible in /proc
	pgss      bool     // pg_stat_statements answers in db
	pgssWhy   string   // why not
	ss        string   // ss(8), or "" when missing
}

// NewSampler prepares the sampler for gatehouse process pid on
// database dbName (db is connected to it). It enables pg_stat_statements
// in that database (dropped with it) when the server preloads it; it
// never changes the server's configuration.
func NewSampler(ctx context.Context, rdb *redis.Client, db *sql.DB, dbName string, pid int, redisURL, pgURL string) *Sampler {
	s := &Sampler{rdb: rdb, db: db, dbName: dbName, pid: pid}
	s.ss, _ = exec.LookPath("ss")
	if ro, err := redis.ParseURL(redisURL); err == nil {
		s.redisAddr = resolveAddr(ro.Addr)
	}
	if u, err := url.Parse(pgURL); err == nil {
		port := u.Port()
		if port == "" {
			port = "5432"
		}
		s.pgAddr = resolveAddr(net.JoinHostPort(u.Hostname(), port))
		s.pgLocal = slices.ContainsFunc(s.pgAddr, func(a string) bool {
			h, _, _ := net.SplitHostPort(a)
			ip := net.ParseIP(h)
			return ip != nil && ip.IsLoopback()
		})
	}
	var preload string
	if err := db.QueryRowContext(ctx, "SELECT current_setting('shared_preload_libraries')").Scan(&preload); err != nil {
		s.pgssWhy = err.Error()
		return s
	}
	if !strings.Contains(preload, "pg_stat_statements") {
		s.pgssWhy = "pg_stat_statements is not in the server's shared_preload_libraries"
		return s
	}
	if _, err := db.ExecContext(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		s.pgssWhy = "CREATE EXTENSION pg_stat_statements: " + err.Error()
		return s
	}
	s.pgss = true
	return s
}

// resolveAddr lists the ip:port forms of host:port (as ss prints them).
func resolveAddr(hostport string) []string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil
	}
	if host == "" || host == "localhost" {
		return []string{"127.0.0.1:" + port, "[::1]:" + port}
	}
	ips, err := net.LookupHost(host)
	if err != nil {
		return []string{hostport}
	}
	var out []string
	for _, ip := range ips {
		out = append(out, net.JoinHostPort(ip, port))
	}
	return out
}

// counters are the counters at one moment.
type counters struct {
	at          time.Time
	gatehouse   time.Duration
	segs        map[string]int64 // socket (local→peer) → data segments sent
	redisCalls  map[string]int64
	redisUS     map[string]int64
	redisCPU    float64 // seconds
	pgssCalls   int64
	pgssExecMS  float64
	pgBackends  map[int]time.Duration
	errs        []error
	redisPeerOf map[string]bool // sockets whose peer is Redis
}

// snapshot reads every counter now; what it could not read is in errs.
func (s *Sampler) snapshot(ctx context.Context) counters {
	snap := counters{at: time.Now(), redisPeerOf: map[string]bool{}}
	var err error
	if snap.gatehouse, err = proc.CPU(s.pid); err != nil {
		snap.errs = append(snap.errs, fmt.Errorf("gatehouse CPU: %w", err))
	}
	snap.segs, err = s.sockets(snap.redisPeerOf)
	if err != nil {
		snap.errs = append(snap.errs, fmt.Errorf("round trips: %w", err))
	}
	info, err := s.rdb.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		snap.errs = append(snap.errs, fmt.Errorf("redis INFO: %w", err))
	}
	snap.redisCalls, snap.redisUS, snap.redisCPU = parseRedisInfo(info)
	if s.pgss {
		// This database's statements, but the sampler's own.
		err := s.db.QueryRowContext(ctx, `SELECT coalesce(sum(calls), 0)::bigint, coalesce(sum(total_exec_time), 0)::float8
			FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND query NOT LIKE '%pg_stat_statements%'`).Scan(&snap.pgssCalls, &snap.pgssExecMS)
		if err != nil {
			snap.errs = append(snap.errs, fmt.Errorf("pg_stat_statements: %w", err))
		}
	}
	if s.pgLocal {
		snap.pgBackends = postgresBackends(s.dbName)
	}
	return snap
}

// sockets reads the data segments the gatehouse process sent on each of
// its connections to Redis or Postgres, marking those to Redis in redis.
func (s *Sampler) sockets(redisSockets map[string]bool) (map[string]int64, error) {
	if s.ss == "" {
		return nil, errors.New("ss (iproute2) is not installed")
	}
	out, err := exec.Command(s.ss, "-tinpH", "state", "established").Output()
	if err != nil {
		return nil, fmt.Errorf("ss: %w", err)
	}
	m := map[string]int64{}
	for _, c := range parseSS(string(out)) {
		if !slices.Contains(c.pids, s.pid) {
			continue
		}
		key := c.local + ">" + c.peer
		switch {
		case slices.Contains(s.redisAddr, c.peer):
			redisSockets[key] = true
		case slices.Contains(s.pgAddr, c.peer):
		default:
			continue
		}
		m[key] = c.dataSegsOut
	}
	return m, nil
}

// ssConn is one established TCP connection as ss -tinp prints it.
type ssConn struct {
	local, peer string
	pids        []int
	dataSegsOut int64
}

// parseSS reads `ss -tinpH state established`: a line with the queues,
// addresses and users:((…,pid=N,…)) of each connection, then an indented
// line of its tcp_info.
func parseSS(out string) []ssConn {
	var conns []ssConn
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			f := strings.Fields(line)
			if len(f) < 4 {
				continue
			}
			c := ssConn{local: f[2], peer: f[3]}
			for _, part := range strings.Split(line, "pid=")[1:] {
				end := strings.IndexFunc(part, func(r rune) bool { return r < '0' || r > '9' })
				if n, err := strconv.Atoi(part[:max(end, 0)]); err == nil {
					c.pids = append(c.pids, n)
				}
			}
			conns = append(conns, c)
			continue
		}
		if len(conns) == 0 {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "data_segs_out:"); ok {
				conns[len(conns)-1].dataSegsOut, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return conns
}

// parseRedisInfo reads INFO commandstats and cpu: calls and µs per
// command, and the server's CPU seconds (user + system).
func parseRedisInfo(info string) (calls, usec map[string]int64, cpu float64) {
	calls, usec = map[string]int64{}, map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "cmdstat_"); ok {
			name, fields, _ := strings.Cut(rest, ":")
			for _, kv := range strings.Split(fields, ",") {
				k, v, _ := strings.Cut(kv, "=")
				n, _ := strconv.ParseInt(v, 10, 64)
				switch k {
				case "calls":
					calls[name] = n
				case "usec":
					usec[name] = n
				}
			}
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f
		}
	}
	return calls, usec, cpu
}

// postgresBackends is the CPU time of each Postgres backend serving
// database db on this machine, by pid: processes whose title (Postgres
// sets it as "postgres: [cluster: ]user database client state") names db.
func postgresBackends(db string) map[int]time.Duration {
	m := map[int]time.Duration{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		title, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.HasPrefix(string(title), "postgres: ") {
			continue
		}
		if !slices.Contains(strings.Fields(strings.TrimRight(string(title), "\x00")), db) {
			continue
		}
		if t, err := proc.CPU(pid); err == nil {
			m[pid] = t
		}
	}
	return m
}

// costs is what happened between two snapshots, per request.
func (s *Sampler) costs(name string, a, b counters, requests int) Figure {
	n := float64(max(requests, 1))
	f := Figure{Name: name, Requests: requests, Seconds: b.at.Sub(a.at).Seconds(), RedisCallsBy: map[string]float64{}, RedisUSBy: map[string]float64{}}
	f.GatehouseCPUus = float64((b.gatehouse - a.gatehouse).Microseconds()) / n
	for k, after := range b.segs {
		d := float64(after - a.segs[k]) // a connection opened in the phase counts whole
		if b.redisPeerOf[k] {
			f.RedisRoundTrips += d / n
		} else {
			f.PostgresRoundTrips += d / n
		}
	}
	for cmd, after := range b.redisCalls {
		if d := after - a.redisCalls[cmd]; d > 0 && cmd != "info" { // the sampler's own
			f.RedisCallsBy[cmd] = float64(d) / n
			f.RedisUSBy[cmd] = float64(b.redisUS[cmd]-a.redisUS[cmd]) / n
		}
	}
	f.RedisCPUus = (b.redisCPU - a.redisCPU) * 1e6 / n
	f.PostgresStatements, f.PostgresExecUS = -1, -1
	if s.pgss {
		f.PostgresStatements = float64(b.pgssCalls-a.pgssCalls) / n
		f.PostgresExecUS = (b.pgssExecMS - a.pgssExecMS) * 1000 / n
	}
	f.PostgresCPUus = -1
	if s.pgLocal {
		var cpu time.Duration
		for pid, after := range b.pgBackends {
			cpu += after - a.pgBackends[pid] // a backend started in the phase counts whole
		}
		f.PostgresCPUus = float64(cpu.Microseconds()) / n
	}
	switch {
	case s.pgss && s.pgLocal:
		f.PostgresSource = "pg_stat_statements and /proc"
	case s.pgss:
		f.PostgresSource = "pg_stat_statements; no CPU figure: the server is not on this machine"
	case s.pgLocal:
		f.PostgresSource = "/proc; no statement figures: " + s.pgssWhy
	default:
		f.PostgresSource = "none: " + s.pgssWhy + ", and the server is not on this machine"
	}
	return f
}

// PhaseTime is how long a cost phase lasts: half a measured phase
// (the process is warm from the phase before it).
func PhaseTime(o bench.Options) time.Duration { return o.Phase / 2 }

// fleetConns is the concurrency one replica of a fleet typically sees
// (the load spread over replicas): 4 connections. Batches — one Redis
// pipeline or one deduction statement for the requests in flight
// together — form within a replica, so at 4 connections a request pays
// more of a round trip and of a script than at the harness's 32.
const fleetConns = 4

// Phases measures the cost of src's requests first at fleetConns
// connections (what a fleet's replica sees), then at the harness's own
// concurrency (batched): src must hold requests for both.
func Phases(ctx context.Context, o bench.Options, c *http.Client, rep Recorder, s *Sampler, name string, src load.Source) {
	for _, conns := range []int{fleetConns, o.Workers} {
		phase(ctx, o, c, rep, s, fmt.Sprintf("%s, %d connections", name, conns), conns, src)
	}
}

// phase drives src against the sampler's gatehouse alone, through conns
// connections, and records and prints what each request cost the
// backends, and what that means for how many gatehouse cores one Redis
// primary and one Postgres core carry.
func phase(ctx context.Context, o bench.Options, c *http.Client, rep Recorder, s *Sampler, name string, conns int, src load.Source) {
	before := s.snapshot(ctx)
	l := load.Drive(ctx, c, conns, PhaseTime(o), src)
	after := s.snapshot(ctx)
	if err := errors.Join(append(before.errs, after.errs...)...); err != nil {
		rep.Skip("costs per "+name, err.Error())
		return
	}
	f := s.costs(name, before, after, l.Requests)
	rep.AddCost(f)
	fmt.Printf("costs per %s (alone, %.1f s, %d requests, %.0f req/s):\n", name, f.Seconds, l.Requests, l.RPS)
	if l.Errors > 0 {
		fmt.Printf("  [%d errors, first: %s]\n", l.Errors, l.FirstError)
	}
	fmt.Printf("  gatehouse %6.1f µs CPU\n", f.GatehouseCPUus)
	var by []string
	for _, k := range slices.Sorted(maps.Keys(f.RedisCallsBy)) {
		by = append(by, fmt.Sprintf("%s %.2f (%.1f µs)", k, f.RedisCallsBy[k], f.RedisUSBy[k]))
	}
	fmt.Printf("  Redis     %6.2f round trips, %.1f µs of the server's CPU (INFO cpu)\n", f.RedisRoundTrips, f.RedisCPUus)
	fmt.Printf("            commands (INFO commandstats; a script's calls count under their names too): %s\n", strings.Join(by, ", "))
	pg := fmt.Sprintf("  Postgres  %6.2f round trips", f.PostgresRoundTrips)
	if f.PostgresStatements >= 0 {
		pg += fmt.Sprintf(", %.2f statements, %.1f µs executing", f.PostgresStatements, f.PostgresExecUS)
	}
	if f.PostgresCPUus >= 0 {
		pg += fmt.Sprintf(", %.1f µs CPU of the database's backends", f.PostgresCPUus)
	}
	fmt.Printf("%s [%s]\n", pg, f.PostgresSource)
	if f.RedisCPUus > 0 && f.GatehouseCPUus > 0 {
		fmt.Printf("  capacity  one Redis primary (one main thread) ≈ %.0f req/s of this kind ≈ %.1f gatehouse cores", 1e6/f.RedisCPUus, f.GatehouseCPUus/f.RedisCPUus)
		if f.PostgresCPUus > 0 {
			fmt.Printf("; one Postgres core ≈ %.0f req/s ≈ %.1f gatehouse cores", 1e6/f.PostgresCPUus, f.GatehouseCPUus/f.PostgresCPUus)
		}
		fmt.Println()
	}
}
