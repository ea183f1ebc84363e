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
// until every node reports cluster_state:ok.
func StartCluster(t testing.TB, n int) *Cluster {
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
		node := StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
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
