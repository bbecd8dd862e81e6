package chaos

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"seckill/internal/testenv"
)

// A Redis Cluster of real redis-servers on loopback, created as an
// operator does (redis-cli --cluster create), for the fleet (fleet_test.go).

// redisCluster is the nodes of one cluster.
type redisCluster struct {
	t     testing.TB
	Nodes []*testenv.Redis
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	ID, Addr, MasterID string
	Master, Fail       bool
	Slots              [][2]int
}

func (n clusterNode) owns(slot int) bool {
	for _, r := range n.Slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

// startCluster starts masters × (1 + replicasEach) redis-servers in
// cluster mode (no persistence: a killed node's data is gone, as the
// failover scenario wants), creates the cluster with redis-cli and waits
// until every node says cluster_state:ok and every replica is in sync.
//
// The node timeout is short (1.5s) so a killed master is failed over in
// seconds; cluster-require-full-coverage no lets the other masters serve
// their slots meanwhile (only the dead master's slots answer errors), and
// cluster-replica-validity-factor 0 lets a replica take over however long
// ago it last heard from its master.
func startCluster(t testing.TB, masters, replicasEach int) *redisCluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli is required for the cluster (it comes with redis-server; make test installs it): %v", err)
	}
	c := &redisCluster{t: t}
	var addrs []string
	for range masters * (1 + replicasEach) {
		r := testenv.StartRedis(t, testenv.WithRedisArgs(
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(testenv.FreePort(t)),
			"--cluster-node-timeout", "1500", "--cluster-require-full-coverage", "no",
			"--cluster-replica-validity-factor", "0"))
		c.Nodes = append(c.Nodes, r)
		addrs = append(addrs, r.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicasEach), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitOK(c.Nodes, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return c
}

// Addrs are every node's address (what the processes are given).
func (c *redisCluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr)
	}
	return out
}

// node finds the started node at addr.
func (c *redisCluster) node(addr string) *testenv.Redis {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// waitOK waits until each of nodes reports cluster_state:ok with all 16384
// slots served by live masters, and each replica among them has its
// replication link up.
func (c *redisCluster) waitOK(nodes []*testenv.Redis, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var last error
	for {
		last = nil
		for _, n := range nodes {
			if err := nodeHealthy(ctx, n.Addr); err != nil {
				last = fmt.Errorf("%s: %w", n.Addr, err)
				break
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not ok after %v: %v", d, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// nodeHealthy: the node sees the whole cluster ok; a replica is in sync.
func nodeHealthy(ctx context.Context, addr string) error {
	info, err := nodeDo(ctx, addr, "CLUSTER", "INFO")
	if err != nil {
		return err
	}
	for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:16384"} {
		if !strings.Contains(info, want) {
			return fmt.Errorf("CLUSTER INFO lacks %s", want)
		}
	}
	repl, err := nodeDo(ctx, addr, "INFO", "replication")
	if err != nil {
		return err
	}
	if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
		return fmt.Errorf("replica link not up")
	}
	return nil
}

// view is the cluster as a node at addr sees it.
func (c *redisCluster) view(ctx context.Context, addr string) ([]clusterNode, error) {
	s, err := nodeDo(ctx, addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	return parseClusterNodes(s)
}

// slotMaster returns the live master that serves slot, as the node at
// addr sees the cluster.
func (c *redisCluster) slotMaster(ctx context.Context, addr string, slot int) (clusterNode, []clusterNode, error) {
	nodes, err := c.view(ctx, addr)
	if err != nil {
		return clusterNode{}, nil, err
	}
	for _, n := range nodes {
		if n.Master && !n.Fail && n.owns(slot) {
			return n, nodes, nil
		}
	}
	return clusterNode{}, nodes, fmt.Errorf("no live master serves slot %d", slot)
}

// masterOf returns the live master that serves slot, and its replica, as
// the master itself sees them. Right after the cluster is created a node
// may not have heard yet (gossip) which node replicates which: it asks
// again for up to 15s.
func (c *redisCluster) masterOf(ctx context.Context, slot int) (master, replica clusterNode, err error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		master, replica, err = c.masterOnce(ctx, slot)
		if err == nil || time.Now().After(deadline) {
			return master, replica, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *redisCluster) masterOnce(ctx context.Context, slot int) (master, replica clusterNode, err error) {
	master, _, err = c.slotMaster(ctx, c.Nodes[0].Addr, slot)
	if err != nil {
		return master, replica, err
	}
	master, nodes, err := c.slotMaster(ctx, master.Addr, slot)
	if err != nil {
		return master, replica, err
	}
	for _, n := range nodes {
		if !n.Master && n.MasterID == master.ID {
			return master, n, nil
		}
	}
	return master, replica, fmt.Errorf("master %s has no replica in its view %+v", master.Addr, nodes)
}

// parseClusterNodes reads CLUSTER NODES: "<id> <ip:port@bus> <flags>
// <master> <ping> <pong> <epoch> <link> <slot ranges…>".
func parseClusterNodes(s string) ([]clusterNode, error) {
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q", line)
		}
		n := clusterNode{ID: f[0], Addr: strings.SplitN(f[1], "@", 2)[0], MasterID: f[3]}
		flags := "," + f[2] + ","
		n.Master = strings.Contains(flags, ",master,")
		n.Fail = strings.Contains(flags, ",fail,") || strings.Contains(flags, ",fail?,") || strings.Contains(flags, ",noaddr,")
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") { // a slot being migrated
				continue
			}
			lo, hi, _ := strings.Cut(r, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				return nil, fmt.Errorf("slot range %q", r)
			}
			b := a
			if hi != "" {
				if b, err = strconv.Atoi(hi); err != nil {
					return nil, fmt.Errorf("slot range %q", r)
				}
			}
			n.Slots = append(n.Slots, [2]int{a, b})
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out, nil
}

// nodeDo runs one command on the node at addr itself (not routed) and
// returns its reply as text (an integer in decimal).
func nodeDo(ctx context.Context, addr string, args ...string) (string, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true,
		DisableRetry: true, Dialer: net.Dialer{Timeout: time.Second}})
	if err != nil {
		return "", err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r := c.Do(ctx, c.B().Arbitrary(args...).Build())
	if v, err := r.ToInt64(); err == nil {
		return strconv.FormatInt(v, 10), nil
	}
	v, err := r.ToString()
	// RESP3 answers CLUSTER NODES and INFO as verbatim strings, which
	// rueidis hands over with their format ("txt:") in front.
	return strings.TrimPrefix(v, "txt:"), err
}

// keySlot is the cluster slot of key: CRC16 (XMODEM) of its hash tag (the
// part between the first { and the next }, when not empty) mod 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
