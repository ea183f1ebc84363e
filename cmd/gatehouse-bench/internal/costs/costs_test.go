package costs

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"gatehouse/internal/testenv"
)

// TestParseSS reads ss's two lines per connection: addresses and
// processes, then tcp_info.
func TestParseSS(t *testing.T) {
	out := "0      0      127.0.0.1:55370 127.0.0.1:6379 users:((\"ss\",pid=9413,fd=3),(\"bash\",pid=9411,fd=3))\n" +
		"\t bbr wscale:10,10 rto:204 mss:32768 bytes_sent:12 segs_out:6 segs_in:4 data_segs_out:2 data_segs_in:2 send 19660800000bps\n" +
		"0      0      [::1]:41000 [::1]:5432 users:((\"gatehouse\",pid=77,fd=11))\n" +
		"\t cubic rto:204 data_segs_out:47 data_segs_in:47\n"
	got := parseSS(out)
	if len(got) != 2 {
		t.Fatalf("%d connections: %+v", len(got), got)
	}
	if c := got[0]; c.local != "127.0.0.1:55370" || c.peer != "127.0.0.1:6379" || len(c.pids) != 2 || c.pids[0] != 9413 || c.pids[1] != 9411 || c.dataSegsOut != 2 {
		t.Errorf("first: %+v", c)
	}
	if c := got[1]; c.peer != "[::1]:5432" || len(c.pids) != 1 || c.pids[0] != 77 || c.dataSegsOut != 47 {
		t.Errorf("second: %+v", c)
	}
}

// TestParseRedisInfo reads calls and µs per command and the server's CPU.
func TestParseRedisInfo(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_evalsha:calls=849,usec=63872,usec_per_call=75.23,rejected_calls=0,failed_calls=17\r\n" +
		"cmdstat_script|flush:calls=1,usec=371,usec_per_call=371.00\r\n\r\n# CPU\r\nused_cpu_sys:1.5\r\nused_cpu_user:2.25\r\nused_cpu_sys_children:9\r\n"
	calls, usec, cpu := parseRedisInfo(info)
	if calls["evalsha"] != 849 || usec["evalsha"] != 63872 || calls["script|flush"] != 1 || cpu != 3.75 {
		t.Fatalf("calls %v usec %v cpu %v", calls, usec, cpu)
	}
}

// TestCostSampler: against the real Redis and Postgres, the sampler counts
// this process's round trips to each (a known number of sequential calls),
// the commands Redis ran, and the CPU of the backend serving the database.
func TestCostSampler(t *testing.T) {
	if _, err := exec.LookPath("ss"); err != nil {
		if testenv.Required() {
			t.Fatalf("ss (iproute2) is not installed: %v", err)
		}
		t.Skipf("ss (iproute2) is not installed: %v", err)
	}
	ctx := context.Background()
	redisURL, pgURL := testenv.RedisURL(t), testenv.PostgresURL(t)
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb, probe := redis.NewClient(opt), redis.NewClient(opt)
	defer rdb.Close()
	defer probe.Close()
	db, err := sql.Open("pgx", pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	meta, err := sql.Open("pgx", pgURL) // the sampler's own connection
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	u, _ := url.Parse(pgURL)
	dbName := strings.TrimPrefix(u.Path, "/")

	// Connections open and statements prepared before the first snapshot.
	if err := errors.Join(probe.Ping(ctx).Err(), rdb.Ping(ctx).Err()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	s := NewSampler(ctx, rdb, meta, dbName, os.Getpid(), redisURL, pgURL)
	before := s.snapshot(ctx)
	for range 10 {
		if err := probe.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		if _, err := db.ExecContext(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM generate_series(1, 3000000)").Scan(&n); err != nil {
		t.Fatal(err)
	}
	after := s.snapshot(ctx)
	for _, e := range append(before.errs, after.errs...) {
		t.Fatal(e)
	}
	f := s.costs("probe", before, after, 1)
	// The sampler's own connections are this process's too: they add one
	// INFO (and, with pg_stat_statements, one query) between the two
	// readings of ss. The count is prepared first (one more), and
	// database/sql may ping a connection idle for a second (one more).
	if f.RedisRoundTrips != 11 {
		t.Errorf("Redis round trips %v, want 10 PINGs + 1 INFO", f.RedisRoundTrips)
	}
	if f.PostgresRoundTrips < 7 || f.PostgresRoundTrips > 9 {
		t.Errorf("Postgres round trips %v, want 5 statements + the count prepared and run (+1 ping, +1 pg_stat_statements read)", f.PostgresRoundTrips)
	}
	if f.RedisCallsBy["ping"] < 10 {
		t.Errorf("Redis ran %v PINGs, want at least 10 (commandstats)", f.RedisCallsBy["ping"])
	}
	if _, ok := f.RedisCallsBy["info"]; ok {
		t.Error("the sampler's own INFO counts as a command of the process")
	}
	if !s.pgLocal || f.PostgresCPUus < 10_000 {
		t.Errorf("Postgres backend CPU %v µs for counting 3e6 rows (local %v): /proc reading is off", f.PostgresCPUus, s.pgLocal)
	}
	if f.RedisCPUus <= 0 {
		t.Errorf("Redis CPU %v µs", f.RedisCPUus)
	}
	t.Logf("%+v", f)
}
