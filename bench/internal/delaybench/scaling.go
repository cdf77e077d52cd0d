package delaybench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/measure"
)

// RunScaling measures the sharded delay queue on a Redis Cluster with K=1
// shard (one master busy) and K=3 shards placed on three distinct masters,
// and prints tasks/s for batched enqueue and for take+ack end to end (no-op
// handler), the K=3/K=1 ratios, and where the CPU went: the client process
// (getrusage) and each master (INFO cpu), against the machine's budget of
// wall time × cores. On one small machine the client, the three masters and
// their replicas share the same cores, so the ratio says as much about the
// machine as about the queue; the CPU columns show which.
func RunScaling(ctx context.Context, addrs []string, quick bool, out io.Writer) error {
	if len(addrs) == 0 {
		return errors.New("scaling: needs -cluster seeds")
	}
	c := tierset.NewClusterClient(addrs...)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("scaling: ping: %w", err)
	}
	n, producers := 150_000, 3
	if quick {
		n = 30_000
	}
	prefix := "tierset-scaling-" + measure.RunID()
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = deletePrefix(cctx, c, prefix)
	}()

	name, placement, err := scalingName(ctx, c, prefix)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nsharded delay queue on Redis Cluster: %d tasks per run, %d producers, one worker per shard, batch 100, no-op handler; GOMAXPROCS %d, NumCPU %d\n",
		n, producers, runtime.GOMAXPROCS(0), runtime.NumCPU())
	fmt.Fprintf(out, "queue %q: K=3 shards on masters %s\n", name, scalingPlacement(placement))

	var rows []scalingRow
	for _, conc := range scalingConcurrency {
		for _, k := range []int{1, 3} {
			r, err := scalingRun(ctx, c, prefix, name, k, conc, n, producers)
			if err != nil {
				return fmt.Errorf("scaling K=%d concurrency %d: %w", k, conc, err)
			}
			rows = append(rows, r)
			if err := deletePrefix(ctx, c, prefix); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(out, "%-3s %-7s %-5s %10s %11s %7s %8s %8s %8s  %s\n", "K", "masters", "conc", "enqueue/s", "take+ack/s",
		"client", "servers", "ours", "host", "server CPU seconds during take+ack")
	for _, r := range rows {
		budget := r.takeAckWall.Seconds() * float64(runtime.NumCPU())
		host := "n/a"
		if r.hostBusy >= 0 {
			host = fmt.Sprintf("%.0f%%", 100*r.hostBusy)
		}
		fmt.Fprintf(out, "%-3d %-7d %-5d %10.0f %11.0f %6.0f%% %7.0f%% %7.0f%% %8s  %s\n", r.k, r.masters, r.conc, r.enqueueRate, r.takeAckRate,
			100*r.clientCPU/budget, 100*r.serverCPU/budget, 100*(r.clientCPU+r.serverCPU)/budget, host, r.masterCPU)
	}
	for i := 0; i+1 < len(rows); i += 2 {
		fmt.Fprintf(out, "ratio K=3/K=1 at concurrency %d per shard: enqueue %.2fx, take+ack %.2fx\n",
			rows[i].conc, rows[i+1].enqueueRate/rows[i].enqueueRate, rows[i+1].takeAckRate/rows[i].takeAckRate)
	}
	fmt.Fprintf(out, "client, servers, ours: CPU time (bench process getrusage; INFO cpu of all 6 nodes) over the take+ack phase, "+
		"as a share of wall time × %d cores; host: share of all cores busy with any process (/proc/stat). Client, masters "+
		"and replicas share those cores: when host nears 100%% the ratio is the machine's limit, not the queue's, and "+
		"host minus ours is other load.\n", runtime.NumCPU())
	return nil
}

// scalingConcurrency lists the handler slots of each shard's worker. At 8
// (what the single-queue bench uses) one shard is bound by round trips: a
// take brings at most 8 tasks. At 128 a take fills its batch and one
// shard is bound by its master's CPU, which is what sharding relieves.
var scalingConcurrency = []int{8, 128}

type scalingRow struct {
	k, masters, conc         int
	enqueueRate, takeAckRate float64
	takeAckWall              time.Duration
	clientCPU                float64 // seconds
	serverCPU                float64 // seconds, all nodes
	hostBusy                 float64 // share of all cores busy (any process), -1 unknown
	masterCPU                string
}

// scalingName picks a queue name whose three shards land on three distinct
// masters: a shard's master follows from the CRC16 of its hash tag, so a
// given name may put two of three shards on one master (see
// delay.Sharded.Placement). The bench shows the placement it measured.
func scalingName(ctx context.Context, c *redis.ClusterClient, prefix string) (string, map[string][]int, error) {
	for i := range 100 {
		name := "scale" + strconv.Itoa(i)
		s, err := delay.NewSharded(c, name, delay.ShardedOptions{Shards: 3, Queue: delay.Options{Prefix: prefix}})
		if err != nil {
			return "", nil, err
		}
		p, err := s.Placement(ctx)
		if err != nil {
			return "", nil, err
		}
		if len(p) == 3 {
			return name, p, nil
		}
	}
	return "", nil, errors.New("scaling: no queue name among 100 puts 3 shards on 3 masters (is this a 3-master cluster?)")
}

func scalingPlacement(p map[string][]int) string {
	var parts []string
	for addr, shards := range p {
		parts = append(parts, fmt.Sprintf("%s:%v", addr, shards))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func scalingRun(ctx context.Context, c *redis.ClusterClient, prefix, name string, k, conc, n, producers int) (scalingRow, error) {
	var acks atomic.Int64
	obs := delay.Observer{OnAck: func(string) { acks.Add(1) }}
	s, err := delay.NewSharded(c, name, delay.ShardedOptions{Shards: k, Queue: delay.Options{Prefix: prefix, Observer: obs}})
	if err != nil {
		return scalingRow{}, err
	}
	p, err := s.Placement(ctx)
	if err != nil {
		return scalingRow{}, err
	}
	row := scalingRow{k: k, conc: conc, masters: len(p)}

	// Enqueue: producers send EnqueueBatch calls of 1000·K jobs (so 1000
	// per shard pipeline), due now.
	jobs := make([]delay.Job, n)
	for i := range jobs {
		jobs[i] = delay.Job{Key: businessKey(name, i), Payload: []byte("p")}
	}
	chunk := 1000 * k
	var wg sync.WaitGroup
	errs := make([]error, producers)
	start := time.Now()
	for pi := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := pi * chunk; lo < n; lo += producers * chunk {
				res, err := s.EnqueueBatch(ctx, jobs[lo:min(lo+chunk, n)])
				if err == nil {
					for _, r := range res {
						if r.Err != nil {
							err = r.Err
							break
						}
					}
				}
				if err != nil {
					errs[pi] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return row, err
	}
	row.enqueueRate = float64(n) / time.Since(start).Seconds()

	// Take+ack: one worker per shard, from start to the last ack.
	w, err := delay.NewPool(delay.PoolOptions{Concurrency: conc * k, ShutdownTimeout: 5 * time.Second})
	if err != nil {
		return row, err
	}
	if err := w.Add(s, func(context.Context, *delay.Task) error { return nil }, delay.QueueOptions{BatchSize: 100}); err != nil {
		return row, err
	}
	cpu0, err := scalingNodeCPU(ctx, c)
	if err != nil {
		return row, err
	}
	ru0, st0 := scalingRusage(), scalingProcStat()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	start = time.Now()
	go func() { done <- w.Run(wctx) }()
	deadline := time.Now().Add(2 * time.Minute)
	for acks.Load() < int64(n) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(2 * time.Millisecond)
	}
	row.takeAckWall = time.Since(start)
	ru1, st1 := scalingRusage(), scalingProcStat()
	cpu1, err := scalingNodeCPU(ctx, c)
	stop()
	<-done
	if err != nil {
		return row, err
	}
	acked := acks.Load()
	if acked < int64(n) {
		return row, fmt.Errorf("take+ack: %d of %d acked within 2 min", acked, n)
	}
	row.takeAckRate = float64(acked) / row.takeAckWall.Seconds()
	row.clientCPU = ru1 - ru0
	if st0.total > 0 && st1.total > st0.total {
		row.hostBusy = float64(st1.busy-st0.busy) / float64(st1.total-st0.total)
	} else {
		row.hostBusy = -1
	}
	var parts []string
	for addr, before := range cpu0.masters {
		d := cpu1.masters[addr] - before
		row.serverCPU += d
		parts = append(parts, fmt.Sprintf("%s %.2f", addr, d))
	}
	sort.Strings(parts)
	replicas := cpu1.replicas - cpu0.replicas
	row.serverCPU += replicas
	parts = append(parts, fmt.Sprintf("replicas %.2f", replicas))
	row.masterCPU = strings.Join(parts, ", ")
	return row, nil
}

type scalingCPU struct {
	masters  map[string]float64 // addr -> used_cpu_user+sys, seconds
	replicas float64            // sum over the replicas
}

// scalingNodeCPU reads used_cpu_user+used_cpu_sys of every node.
func scalingNodeCPU(ctx context.Context, c *redis.ClusterClient) (scalingCPU, error) {
	var mu sync.Mutex
	out := scalingCPU{masters: map[string]float64{}}
	read := func(ctx context.Context, n *redis.Client) (float64, error) {
		info, err := n.Info(ctx, "cpu").Result()
		if err != nil {
			return 0, err
		}
		var sum float64
		for _, line := range strings.Split(info, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f
			}
		}
		return sum, nil
	}
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		v, err := read(ctx, m)
		mu.Lock()
		out.masters[m.Options().Addr] = v
		mu.Unlock()
		return err
	})
	if err != nil {
		return out, err
	}
	err = c.ForEachSlave(ctx, func(ctx context.Context, r *redis.Client) error {
		v, err := read(ctx, r)
		mu.Lock()
		out.replicas += v
		mu.Unlock()
		return err
	})
	return out, err
}

// scalingRusage is this process's user+sys CPU time in seconds (0 where
// the platform cannot tell).
func scalingRusage() float64 {
	d, _ := measure.ProcessCPU()
	return d.Seconds()
}

type scalingStat struct{ busy, total uint64 }

// scalingProcStat reads the aggregate cpu line of /proc/stat (zero when
// unavailable, e.g. not Linux).
func scalingProcStat() scalingStat {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return scalingStat{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return scalingStat{}
	}
	var st scalingStat
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		st.total += n
		if i != 3 && i != 4 { // idle, iowait
			st.busy += n
		}
	}
	return st
}
