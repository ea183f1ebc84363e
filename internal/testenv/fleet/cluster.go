package fleet

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/testenv"
)

// Cluster is a Redis Cluster of masters without replicas.
type Cluster struct {
	Nodes []*Redis
}

// StartCluster starts n cluster-enabled servers (n >= 3), joins them into a
// cluster with redis-cli --cluster create (slots spread evenly), and waits
// until every node reports cluster_state:ok. args are added to every
// server's command line ("--cluster-require-full-coverage", "no" …).
func StartCluster(t testing.TB, n int, serverArgs ...string) *Cluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		if testenv.Required() {
			t.Fatalf("redis-cli is not installed (required in CI): %v", err)
		}
		t.Skipf("redis-cli is not installed: %v", err)
	}
	c := &Cluster{}
	args := []string{"--cluster", "create"}
	for range n {
		node := StartRedis(t, append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"}, serverArgs...)...)
		c.Nodes = append(c.Nodes, node)
		args = append(args, node.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, append(args, "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, node := range c.Nodes {
		cl := node.Client()
		for {
			info, err := cl.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster node %s not ok: %q %v", node.Addr(), info, err)
			}
			time.Sleep(50 * time.Millisecond) // polling the cluster's convergence
		}
	}
	return c
}

// URL is the cluster's redis+cluster:// URL naming every node.
func (c *Cluster) URL() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return "redis+cluster://" + strings.Join(addrs, ",")
}

// Owner is the node of c serving the slot of key (by node 0's view, or
// the first node that answers).
func (c *Cluster) Owner(t testing.TB, key string) *Redis {
	t.Helper()
	ctx := context.Background()
	for _, n := range c.Nodes {
		cl := n.Client()
		slot, err := cl.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			continue
		}
		shards, err := cl.ClusterShards(ctx).Result()
		if err != nil {
			continue
		}
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if r.Start > slot || slot > r.End {
					continue
				}
				for _, nd := range sh.Nodes {
					for _, o := range c.Nodes {
						if nd.Role == "master" && int(nd.Port) == o.Port {
							return o
						}
					}
				}
			}
		}
	}
	t.Fatalf("no node of the cluster serves the slot of %q", key)
	return nil
}
