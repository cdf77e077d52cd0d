package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset"
	"github.com/tierset/tierset/internal/testredis"
)

// cluster is a 3+3 cluster this test started with scripts/redis-cluster.sh.
type cluster struct {
	dir   string
	seeds []string
	pids  map[string]int // "127.0.0.1:port" -> pid, from nodes.tsv
}

// startCluster starts the test's own cluster, or skips the test unless
// EnvFailover is 1 and redis-server is on PATH. env adds settings of
// scripts/redis-cluster.sh (NAME=value) to its defaults.
func startCluster(t *testing.T, env ...string) *cluster {
	t.Helper()
	if os.Getenv(EnvFailover) != "1" {
		t.Skipf("%s not set to 1", EnvFailover)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH")
	}
	dir := filepath.Join(t.TempDir(), "cluster")
	base := os.Getenv("TIERSET_FAILOVER_BASE_PORT")
	if base == "" {
		base = "22001" // with its bus ports (+10000) below the ephemeral range: no client socket can hold them
	}
	// Later entries win, so CI's own TIERSET_CLUSTER_* never leak in; the
	// 6 s bound assumes the script's node timeout of 2000 ms.
	env = append(append(os.Environ(), "TIERSET_CLUSTER_BASE_PORT="+base, "TIERSET_CLUSTER_DIR="+dir,
		"TIERSET_CLUSTER_NODE_TIMEOUT=2000"), env...)
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "redis-cluster.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// Registered before `up` runs, so a half-started cluster is stopped too.
	t.Cleanup(func() {
		cmd := exec.Command(script, "down")
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("redis-cluster.sh down: %v\n%s", err, out)
		}
	})
	cmd := exec.Command(script, "up")
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("redis-cluster.sh up: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	cl := &cluster{dir: dir, seeds: strings.Split(lines[len(lines)-1], ","), pids: map[string]int{}}
	f, err := os.Open(filepath.Join(dir, "nodes.tsv"))
	if err != nil {
		t.Fatalf("nodes.tsv: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) < 2 {
			continue
		}
		if pid, err := strconv.Atoi(fields[1]); err == nil {
			cl.pids["127.0.0.1:"+fields[0]] = pid
		}
	}
	if len(cl.pids) != 6 || len(cl.seeds) != 6 {
		t.Fatalf("cluster: %d pids, %d seeds, want 6 each (%s)", len(cl.pids), len(cl.seeds), stdout.String())
	}
	t.Logf("own cluster up in %v: %s", time.Since(start).Round(time.Millisecond), strings.Join(cl.seeds, ","))
	return cl
}

// client is a cluster client of cl that answered a PING, closed at cleanup.
func (cl *cluster) client(t *testing.T, ctx context.Context) *redis.ClusterClient {
	t.Helper()
	cc := tierset.NewClusterClient(cl.seeds...)
	t.Cleanup(func() { _ = cc.Close() })
	if err := cc.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping: %v", err)
	}
	return cc
}

// killPID kills process pid at once (SIGKILL where there are signals).
func killPID(t *testing.T, pid int) {
	t.Helper()
	p, err := os.FindProcess(pid)
	if err == nil {
		err = p.Kill()
	}
	if err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
}

// masterPID reads the victim's pid from INFO server and checks it against
// the pid the script recorded, so the test can only ever kill its own node.
func masterPID(t *testing.T, ctx context.Context, cc *redis.ClusterClient, cl *cluster, addr string) int {
	t.Helper()
	want, ok := cl.pids[addr]
	if !ok {
		t.Fatalf("%s is not a node of the test's own cluster", addr)
	}
	var pid int
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		if m.Options().Addr != addr {
			return nil
		}
		info, err := m.Info(ctx, "server").Result()
		if err != nil {
			return err
		}
		pid, err = strconv.Atoi(testredis.InfoFields(info)["process_id"])
		return err
	})
	if err != nil {
		t.Fatalf("INFO server on %s: %v", addr, err)
	}
	if pid != want {
		t.Fatalf("%s reports pid %d, nodes.tsv says %d", addr, pid, want)
	}
	return pid
}

// watchPromotion polls a surviving node's CLUSTER SLOTS every 20 ms and
// sends the time the slot's owner stopped being victim: the server-side
// failover time, which bounds what any client can do.
func watchPromotion(ctx context.Context, cl *cluster, victim string, sl int) <-chan time.Time {
	out := make(chan time.Time, 1)
	var addr string
	for a := range cl.pids {
		if a != victim {
			addr = a
			break
		}
	}
	go func() {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer c.Close()
		for ctx.Err() == nil {
			//lint:ignore SA1019 the tests read the slot map as delay.Sharded does (CLUSTER SLOTS, see sharded.go)
			ranges, err := c.ClusterSlots(ctx).Result()
			if err == nil {
				for _, r := range ranges {
					if sl >= r.Start && sl <= r.End && len(r.Nodes) > 0 && r.Nodes[0].Addr != victim {
						out <- time.Now()
						return
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return out
}

// slotOwners returns slot -> master address, from CLUSTER SLOTS.
func slotOwners(t *testing.T, ctx context.Context, cc *redis.ClusterClient) func(int) string {
	t.Helper()
	//lint:ignore SA1019 the tests read the slot map as delay.Sharded does (CLUSTER SLOTS, see sharded.go)
	ranges, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER SLOTS: %v", err)
	}
	return func(s int) string {
		for _, r := range ranges {
			if s >= r.Start && s <= r.End && len(r.Nodes) > 0 {
				return r.Nodes[0].Addr
			}
		}
		return ""
	}
}

func minCount(m map[string]int) int {
	lo := -1
	for _, v := range m {
		if lo < 0 || v < lo {
			lo = v
		}
	}
	return lo
}
