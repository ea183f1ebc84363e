package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// MasterName is the name the sentinels monitor.
const MasterName = "gatehouse"

// SentinelGroup is one master, one replica and three sentinels.
type SentinelGroup struct {
	// Servers are the master and the replica as started; which is master
	// now, Master tells.
	Servers   []*Redis
	Sentinels []*Redis
}

// StartSentinelGroup starts a master, a replica of it and three sentinels
// (quorum 2, a master is down after 1 s without answers), and waits until
// every sentinel knows the replica and the other sentinels.
func StartSentinelGroup(t testing.TB) *SentinelGroup {
	t.Helper()
	g := &SentinelGroup{}
	master := StartRedis(t)
	replica := StartRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	g.Servers = []*Redis{master, replica}
	for range 3 {
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		// The sentinel rewrites its file (what it learns), so each has its own.
		body := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %s 1000\n"+
			"sentinel failover-timeout %s 10000\n"+
			"sentinel parallel-syncs %s 1\n", MasterName, master.Port, MasterName, MasterName, MasterName)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		g.Sentinels = append(g.Sentinels, startIn(t, dir, conf, []string{"--sentinel"}))
	}
	g.waitReady(t)
	return g
}

// URL is the group's redis+sentinel:// URL.
func (g *SentinelGroup) URL() string {
	addrs := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		addrs[i] = s.Addr()
	}
	return "redis+sentinel://" + strings.Join(addrs, ",") + "/" + MasterName
}

// Master is the server the sentinels name as master now.
func (g *SentinelGroup) Master(t testing.TB) *Redis {
	t.Helper()
	addr := g.masterAddr(t)
	for _, s := range g.Servers {
		if s.Addr() == addr {
			return s
		}
	}
	t.Fatalf("sentinels name %s, which is none of the group's servers", addr)
	return nil
}

// Replica is the server that is not Master.
func (g *SentinelGroup) Replica(t testing.TB) *Redis {
	t.Helper()
	m := g.Master(t)
	for _, s := range g.Servers {
		if s != m {
			return s
		}
	}
	return nil
}

func (g *SentinelGroup) masterAddr(t testing.TB) string {
	t.Helper()
	for _, s := range g.Sentinels {
		c := s.Client()
		addr, err := c.Do(context.Background(), "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterName).StringSlice()
		if err == nil && len(addr) == 2 {
			return addr[0] + ":" + addr[1]
		}
	}
	t.Fatal("no sentinel names a master")
	return ""
}

// waitReady waits until every sentinel sees the replica up and the two
// other sentinels: before that a failover could find no replica to promote.
func (g *SentinelGroup) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range g.Sentinels {
		c := s.Client()
		for {
			ok := false
			replicas, err1 := c.Do(context.Background(), "SENTINEL", "REPLICAS", MasterName).Slice()
			others, err2 := c.Do(context.Background(), "SENTINEL", "SENTINELS", MasterName).Slice()
			if err1 == nil && err2 == nil && len(replicas) == 1 && len(others) == 2 {
				ok = strings.Contains(fmt.Sprint(replicas[0]), "master-link-status:ok")
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sentinel %s not ready: replicas %v %v, sentinels %d %v", s.Addr(), replicas, err1, len(others), err2)
			}
			time.Sleep(50 * time.Millisecond) // polling the sentinels' discovery
		}
	}
}

// Failover makes a sentinel promote the replica now (SENTINEL FAILOVER:
// the master is demoted while it takes writes) and waits until the new
// master accepts writes and every sentinel names it. It returns the new
// master.
func (g *SentinelGroup) Failover(t testing.TB) *Redis {
	t.Helper()
	old := g.Master(t)
	if err := g.Sentinels[0].Client().Do(context.Background(), "SENTINEL", "FAILOVER", MasterName).Err(); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := g.currentMaster(); m != nil && m != old && Writable(m.Client()) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatal("the failover did not complete within 30 s")
		}
		time.Sleep(20 * time.Millisecond) // polling the failover
	}
}

// currentMaster is the server every sentinel names, or nil while they
// disagree.
func (g *SentinelGroup) currentMaster() *Redis {
	var addr string
	for _, s := range g.Sentinels {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
		a, err := c.Do(context.Background(), "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterName).StringSlice()
		c.Close()
		if err != nil || len(a) != 2 || (addr != "" && addr != a[0]+":"+a[1]) {
			return nil
		}
		addr = a[0] + ":" + a[1]
	}
	for _, s := range g.Servers {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// Writable reports whether c's server is a master that takes a write.
func Writable(c *redis.Client) bool {
	return c.Set(context.Background(), "fleet:writable", "1", time.Second).Err() == nil
}
