package fleettest_test

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/secret"
	"gatehouse/internal/testenv"
	"gatehouse/internal/testenv/fleet"
)

// TestReadyGaugeWithoutProbes: the readiness gauges follow reality when
// nobody calls /readyz. A gatehouse process on Postgres and a private
// Redis (its own process, so that its gauges are its own) is scraped only:
// ready at start; with Redis frozen, gatehouse_ready_check{check="kv"}
// turns 0 and gatehouse_dependency_state{dependency="kv"} names
// "unavailable" (the database's stay ok, and gatehouse_ready stays 1: the
// replica can still serve what needs no Redis) within the refresh period
// and the checks' budget; thawed, ok again.
func TestReadyGaugeWithoutProbes(t *testing.T) {
	t.Parallel()
	bin := gatehouseBinary(t)
	rds := fleet.StartRedis(t)
	p := launch(t, bin, []string{"serve"}, t.TempDir(),
		"GATEHOUSE_DATABASE_URL="+testenv.PostgresURL(t), "GATEHOUSE_REDIS_URL="+rds.URL(),
		"GATEHOUSE_MASTER_KEY="+base64.StdEncoding.EncodeToString(secret.RandomBytes(32)),
		"GATEHOUSE_JWT_SECRET="+hex.EncodeToString(secret.RandomBytes(32)), "GATEHOUSE_SHUTDOWN_DRAIN=0s")
	gauges := func() (ready, db, kv, kvState string) {
		res, err := http.Get(p.admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			name, v, _ := strings.Cut(sc.Text(), " ")
			switch name {
			case "gatehouse_ready":
				ready = v
			case `gatehouse_ready_check{check="database"}`:
				db = v
			case `gatehouse_ready_check{check="kv"}`:
				kv = v
			}
			if strings.HasPrefix(name, `gatehouse_dependency_state{dependency="kv",state="`) && v == "1" {
				kvState = strings.TrimSuffix(strings.TrimPrefix(name, `gatehouse_dependency_state{dependency="kv",state="`), `"}`)
			}
		}
		return
	}
	expect := func(what, ready, db, kv, kvState string, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			r, d, k, ks := gauges()
			if r == ready && d == db && k == kv && ks == kvState {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: gatehouse_ready %s, database %s, kv %s (%s); want %s, %s, %s (%s)", what, r, d, k, ks, ready, db, kv, kvState)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	expect("at start", "1", "1", "1", "ok", 0)
	rds.Freeze()
	defer rds.Thaw()
	t0 := time.Now()
	expect("Redis frozen, no probe", "1", "1", "0", "unavailable", 10*time.Second) // 5 s refresh + 2 s budget
	t.Logf("the gauges saw the frozen Redis after %v", time.Since(t0))
	rds.Thaw()
	expect("Redis thawed, no probe", "1", "1", "1", "ok", 10*time.Second)
	if strings.Contains(p.logs(), "path=/readyz") {
		t.Fatal("something probed /readyz")
	}
}
