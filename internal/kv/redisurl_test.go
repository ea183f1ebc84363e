package kv

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestRedisURLForms: each documented URL form gives go-redis's client for
// its topology with the hosts, credentials, database and options it names,
// and bad URLs are refused without echoing a password.
func TestRedisURLForms(t *testing.T) {
	c, topo, err := newRedisClient("redis+cluster://u:pw@h1:7000,h2:7001,h3:7002?dial_timeout=3s", nil)
	if err != nil || topo != Cluster {
		t.Fatalf("cluster: %v %v", topo, err)
	}
	co := c.(*redis.ClusterClient).Options()
	if strings.Join(co.Addrs, ",") != "h1:7000,h2:7001,h3:7002" || co.Username != "u" || co.Password != "pw" || co.DialTimeout.Seconds() != 3 || co.MaxRetries != -1 {
		t.Fatalf("cluster options: %+v", co)
	}
	c.Close()

	c, topo, err = newRedisClient("rediss+sentinel://:pw@s1:26379,s2:26380/mymaster/2?sentinel_password=spw", nil)
	if err != nil || topo != Sentinel {
		t.Fatalf("sentinel: %v %v", topo, err)
	}
	so := c.(*redis.Client).Options()
	if so.Password != "pw" || so.DB != 2 || so.TLSConfig == nil || so.ReadTimeout != ioTimeout {
		t.Fatalf("sentinel options: %+v", so)
	}
	c.Close()

	c, topo, err = newRedisClient("rediss://:pw@r:6380/1", nil)
	if err != nil || topo != Single || c.(*redis.Client).Options().TLSConfig == nil {
		t.Fatalf("rediss: %v %v", topo, err)
	}
	c.Close()

	for _, bad := range []string{
		"redis://h1:1,h2:2/0",                 // several hosts, one node
		"redis+sentinel://:secretpw@s1:26379", // no master name
		"redis+cluster://:secretpw@h1:1/0",    // a database on a cluster
		"memcached://h:1",
		"redis+cluster://:secretpw@h1:1?bogus=1",
	} {
		if _, _, err := newRedisClient(bad, nil); err == nil {
			t.Errorf("%s accepted", bad)
		} else if strings.Contains(err.Error(), "secretpw") {
			t.Errorf("%s: error echoes the password: %v", bad, err)
		}
	}
}

// TestKeySlot: Redis Cluster's slots of known keys (CLUSTER KEYSLOT).
func TestKeySlot(t *testing.T) {
	for tag, want := range map[string]uint16{"foo": 12182, "bar": 5061, "user1000": 3443} {
		if got := keySlot(tag); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", tag, got, want)
		}
	}
}

// TestDeployDocRedisURLs: every GATEHOUSE_REDIS_URL a reader copies from
// docs/deploy.md is accepted, as the topology its section names.
func TestDeployDocRedisURLs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Topology{"redis": Single, "rediss": Single, "redis+cluster": Cluster, "redis+sentinel": Sentinel}
	seen := map[Topology]bool{}
	for _, m := range regexp.MustCompile(`GATEHOUSE_REDIS_URL='([^']+)'`).FindAllStringSubmatch(string(doc), -1) {
		raw := m[1]
		c, topo, err := newRedisClient(raw, nil)
		if err != nil {
			t.Errorf("docs/deploy.md: %s: %v", raw, err)
			continue
		}
		c.Close()
		scheme, _, _ := strings.Cut(raw, "://")
		if topo != want[scheme] {
			t.Errorf("docs/deploy.md: %s is a %s URL, want %s", raw, topo, want[scheme])
		}
		seen[topo] = true
	}
	for _, topo := range []Topology{Single, Cluster, Sentinel} {
		if !seen[topo] {
			t.Errorf("docs/deploy.md shows no %s URL", topo)
		}
	}
}
