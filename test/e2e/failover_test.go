package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/internal/slot"
	"github.com/tierset/tierset/internal/testredis"
)

// EnvFailover switches the failover test on (CI sets it).
const EnvFailover = "TIERSET_FAILOVER"

// TestFailover kills one master of a real 3+3 cluster (SIGKILL, by pid)
// while a cart-match loop over promotions on all three masters and a delay
// worker fed by a steady producer are running, and measures what the
// library's users see:
//
//   - cart matches recover within 6 s of the kill;
//   - the queue resumes: tasks enqueued after the failover are handled;
//   - no acknowledged task is lost, and no task is in two handlers while a
//     lease that Redis still knows about is held. Redeliveries whose first
//     ack (or take) died with the master are at-least-once, allowed, and
//     counted.
//
// "Acknowledged" needs care. Redis replicates asynchronously: a write the
// master acknowledged but had not yet sent to its replica is gone when the
// replica takes over, and no client library can prevent that. The producer
// therefore runs WAIT 1 after every enqueue on the same connection and only
// counts a task as acknowledged when one replica confirmed it. Tasks whose
// WAIT timed out or whose enqueue failed are retried with the same (key,
// token), which the queue's idempotent enqueue turns into a no-op when the
// first attempt did land. The same limit applies to takes and acks made
// just before the kill: the new master may not know a task was taken (so it
// is delivered again at once) or acked (so it comes back when its lease
// expires). Both are counted and reported, not hidden.
//
// It starts its OWN cluster (scripts/redis-cluster.sh, base port 22001 or
// the next free block, in a temp dir) and always stops it: the shared CI
// cluster that other packages' tests use in parallel must never lose a
// master.
func TestFailover(t *testing.T) {
	cl := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	cc := cl.client(t, ctx)
	owner := slotOwners(t, ctx, cc)
	prefix := testredis.Prefix(t)

	// The queue, and the master it lives on: that master is the victim.
	const queueName = "failover"
	qopts := delay.Options{Prefix: prefix, Lease: 2 * time.Second, Observer: &delay.Recorder{}}
	q, err := delay.New(cc, queueName, qopts)
	if err != nil {
		t.Fatalf("delay.New: %v", err)
	}
	victim := owner(slot.Of(q.Keys()[0]))

	// Promotions until every master holds at least two.
	var promos []gradient.Promotion
	perMaster := map[string]int{}
	onVictim := 0
	for i := 0; len(perMaster) < 3 || minCount(perMaster) < 2; i++ {
		id := "fo-" + strconv.Itoa(i)
		addr := owner(slot.Of(prefix + ":{p:" + id + "}:tiers"))
		if perMaster[addr] >= 2 {
			continue
		}
		perMaster[addr]++
		if addr == victim {
			onVictim++
		}
		promos = append(promos, foPromotion(id))
	}
	c, err := cache.New(cc, cache.Options{Prefix: prefix})
	if err != nil {
		t.Fatalf("cache.New: %v", err)
	}
	if _, err := c.Refresh(ctx, promos...); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	cart := make([]cache.Query, len(promos))
	for i, p := range promos {
		cart[i] = cache.QuantityQuery(p.ID, 7) // hits the "5" tier
	}
	if onVictim == 0 {
		t.Fatalf("no promotion on the victim master %s", victim)
	}

	runCtx, stopRun := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Also on t.Fatal: no goroutine may outlive the test.
	defer func() { stopRun(); wg.Wait() }()

	// (a) Cart matches: four loops, so the recovery time is not rounded up
	// to one loop's timeout (a cart stuck on the dead master holds its
	// loop for up to its 1 s deadline).
	carts := &cartLog{}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				mctx, mcancel := context.WithTimeout(runCtx, time.Second)
				start := time.Now()
				rs, err := c.MatchCart(mctx, cart, cache.MatchOptions{})
				mcancel()
				ok := err == nil
				for _, r := range rs {
					if r.Err != nil || r.Tier == nil || r.Tier.ID != "t5" {
						ok = false
					}
				}
				if runCtx.Err() == nil {
					carts.add(start, time.Now(), ok)
				}
				if !ok {
					time.Sleep(20 * time.Millisecond) // no hot loop on a dead master
				}
			}
		}()
	}

	// (b) The worker, recording every delivery.
	deliveries := &deliveryLog{byKey: map[string][]delivery{}, active: map[string]bool{}}
	w, err := delay.NewWorker(q, func(ctx context.Context, task *delay.Task) error {
		deliveries.begin(task)
		deliveries.end(task.Key)
		return nil
	}, delay.WorkerOptions{Concurrency: 4, ReconnectMax: 500 * time.Millisecond, IdleCheck: time.Second})
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = w.Run(runCtx) }()

	// The producer: one task every 10 ms, each confirmed by WAIT 1.
	prod := &producer{cc: cc, name: queueName, opts: qopts, acked: map[string]time.Time{}}
	prodCtx, stopProd := context.WithCancel(runCtx)
	defer stopProd()
	wg.Add(1)
	go func() { defer wg.Done(); prod.run(prodCtx, t) }()

	// Steady state, then the kill.
	time.Sleep(2 * time.Second)
	if n := deliveries.count(); n == 0 {
		t.Fatalf("no task handled before the kill")
	}
	pid := masterPID(t, ctx, cc, cl, victim)
	killAt := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
	t.Logf("killed master %s (pid %d) at %s; it held the queue and %d of %d promotions",
		victim, pid, killAt.Format("15:04:05.000"), onVictim, len(promos))
	promoted := watchPromotion(runCtx, cl, victim, slot.Of(q.Keys()[0]))

	// Wait for both to recover, then keep running a while so tasks
	// enqueued after the recovery must be handled too.
	cartRecovered, queueRecovered := time.Time{}, time.Time{}
	deadline := killAt.Add(20 * time.Second)
	for time.Now().Before(deadline) && (cartRecovered.IsZero() || queueRecovered.IsZero()) {
		time.Sleep(50 * time.Millisecond)
		if cartRecovered.IsZero() {
			cartRecovered = carts.recoveredAfter(killAt)
		}
		if queueRecovered.IsZero() {
			queueRecovered = deliveries.firstEnqueuedAfter(killAt, prod)
		}
	}
	time.Sleep(3 * time.Second)
	stopProd()
	// Drain: every acknowledged task must be handled; tasks whose ack died
	// with the master come back after their 2 s lease.
	acked := prod.ackedKeys()
	drained := false
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if deliveries.missing(acked) == 0 {
			drained = true
			break
		}
	}
	time.Sleep(500 * time.Millisecond) // late redeliveries show up in the log
	stopRun()
	wg.Wait()

	// Report.
	select {
	case at := <-promoted:
		t.Logf("server side: the replica took over the queue's slot %v after the kill (cluster-node-timeout 2000 ms)", at.Sub(killAt).Round(time.Millisecond))
	default:
		t.Logf("server side: no promotion seen by the watcher")
	}
	failedCarts, okCarts, lastFail := carts.stats(killAt)
	t.Logf("carts: %d ok, %d failed after the kill; last failure %v after the kill", okCarts, failedCarts, lastFail.Round(time.Millisecond))
	if cartRecovered.IsZero() {
		t.Errorf("cart matches did not recover within 20 s of the kill")
	} else {
		rec := cartRecovered.Sub(killAt)
		t.Logf("cart recovery: %v after the kill", rec.Round(time.Millisecond))
		if rec > 6*time.Second {
			t.Errorf("cart matches recovered %v after the kill, want ≤ 6 s", rec.Round(time.Millisecond))
		}
		if late := carts.failuresAfter(cartRecovered); late > 0 {
			t.Errorf("%d cart matches failed after the recovery at %v", late, rec.Round(time.Millisecond))
		}
	}
	if queueRecovered.IsZero() {
		t.Errorf("no task enqueued after the kill was handled within 20 s: the queue did not resume")
	} else {
		t.Logf("queue recovery: first task enqueued after the kill handled %v after the kill", queueRecovered.Sub(killAt).Round(time.Millisecond))
	}
	rep := deliveries.report(killAt)
	t.Logf("tasks: %d acknowledged (WAIT 1), %d enqueue attempts failed or unconfirmed and retried, %d acknowledged after the recovery",
		len(acked), prod.retries.Load(), prod.ackedAfter(queueRecovered))
	t.Logf("deliveries: %d total of %d tasks; redeliveries %d (after lease expiry %d, take lost with the master %d, re-enqueued by the producer's retry after the first was acked %d)",
		rep.total, rep.tasks, rep.redelivered, rep.afterLease, rep.takeLost, rep.reEnqueued)
	if !drained {
		t.Errorf("%d acknowledged tasks were never handled (lost): e.g. %v", deliveries.missing(acked), deliveries.missingSample(acked, 5))
	}
	if rep.concurrent > 0 {
		t.Errorf("%d times a task was in two handlers at once", rep.concurrent)
	}
	if rep.leaseViolations > 0 {
		t.Errorf("%d redeliveries while a lease the server still knew was held: %v", rep.leaseViolations, rep.violationSample)
	}
	if after := prod.ackedAfter(queueRecovered); !queueRecovered.IsZero() && after == 0 {
		t.Errorf("no task was enqueued after the queue recovered; the resume check is empty")
	}
	rec := qopts.Observer.(*delay.Recorder)
	t.Logf("queue observer: enqueued %d (duplicates %d), delivered %d, acked %d, swept back %d, errors %d",
		rec.Enqueued.Load(), rec.Duplicates.Load(), rec.Delivered.Load(), rec.Acked.Load(), rec.Swept.Load(), rec.Errors.Load())
}

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

func foPromotion(id string) gradient.Promotion {
	p := gradient.Promotion{ID: id, Metric: gradient.Quantity, MinorDigits: 2}
	for _, n := range []int64{3, 5, 10} {
		p.Tiers = append(p.Tiers, gradient.Tier{
			ID: "t" + strconv.FormatInt(n, 10), Threshold: decimal.NewFromInt(n),
			Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(2 * n)},
		})
	}
	return p
}

// cartLog records every cart match: when it started and ended, and whether
// every line came back with the right tier.
type cartLog struct {
	mu   sync.Mutex
	runs []cartRun
}

type cartRun struct {
	start, end time.Time
	ok         bool
}

func (c *cartLog) add(start, end time.Time, ok bool) {
	c.mu.Lock()
	c.runs = append(c.runs, cartRun{start, end, ok})
	c.mu.Unlock()
}

// recoveredAfter returns the end of the first successful cart S after the
// kill such that every cart started after S started succeeded too (and at
// least 20 did, so a lone lucky success does not count); zero before that.
func (c *cartLog) recoveredAfter(kill time.Time) time.Time {
	c.mu.Lock()
	runs := append([]cartRun(nil), c.runs...)
	c.mu.Unlock()
	sort.Slice(runs, func(i, j int) bool { return runs[i].start.Before(runs[j].start) })
	lastFail := -1
	for i, r := range runs {
		if !r.ok && r.end.After(kill) {
			lastFail = i
		}
	}
	if lastFail < 0 || len(runs)-lastFail-1 < 20 {
		return time.Time{}
	}
	first := time.Time{}
	for _, r := range runs[lastFail+1:] {
		if first.IsZero() || r.end.Before(first) {
			first = r.end
		}
	}
	return first
}

func (c *cartLog) failuresAfter(t time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.runs {
		if !r.ok && r.start.After(t) {
			n++
		}
	}
	return n
}

func (c *cartLog) stats(kill time.Time) (failed, ok int, lastFail time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.runs {
		if r.end.Before(kill) {
			continue
		}
		if r.ok {
			ok++
		} else {
			failed++
			lastFail = r.end.Sub(kill)
		}
	}
	return failed, ok, lastFail
}

// delivery is one handling of a task, with its lease as the server set it.
type delivery struct {
	id          string // the queue's task ID
	fence       int64
	deliveredAt time.Time // Redis TIME at take
	deadline    time.Time // lease end, Redis clock
	handledAt   time.Time // client clock
}

type deliveryLog struct {
	mu         sync.Mutex
	byKey      map[string][]delivery
	active     map[string]bool
	concurrent int
	n          int
}

func (d *deliveryLog) begin(t *delay.Task) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.active[t.Key] {
		d.concurrent++
	}
	d.active[t.Key] = true
	d.byKey[t.Key] = append(d.byKey[t.Key], delivery{t.ID, t.Lease.Fence, t.DeliveredAt, t.Deadline, time.Now()})
	d.n++
}

func (d *deliveryLog) end(key string) {
	d.mu.Lock()
	delete(d.active, key)
	d.mu.Unlock()
}

func (d *deliveryLog) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

func (d *deliveryLog) missing(keys []string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, k := range keys {
		if len(d.byKey[k]) == 0 {
			n++
		}
	}
	return n
}

func (d *deliveryLog) missingSample(keys []string, max int) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, k := range keys {
		if len(d.byKey[k]) == 0 && len(out) < max {
			out = append(out, k)
		}
	}
	return out
}

// firstEnqueuedAfter returns when the first task whose enqueue started
// after kill was handled (zero if none yet).
func (d *deliveryLog) firstEnqueuedAfter(kill time.Time, p *producer) time.Time {
	p.mu.Lock()
	var keys []string
	for k, at := range p.firstTry {
		if at.After(kill) {
			keys = append(keys, k)
		}
	}
	p.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	var first time.Time
	for _, k := range keys {
		for _, dl := range d.byKey[k] {
			if first.IsZero() || dl.handledAt.Before(first) {
				first = dl.handledAt
			}
		}
	}
	return first
}

type deliveryReport struct {
	total, tasks, redelivered, afterLease, takeLost, reEnqueued, concurrent, leaseViolations int
	violationSample                                                                          []string
}

// report classifies every redelivery. After lease expiry (on the server's
// clock) is at-least-once and fine. Before expiry it is fine only when the
// earlier delivery was taken from the killed master just before the kill
// and the redelivery came from its successor: that take was acknowledged
// but never replicated, so the new master never knew of the lease. Any
// other early redelivery is a violation. A delivery of another task ID for
// the same key is not a redelivery of that task at all: the producer's
// retry of an enqueue whose WAIT was not confirmed arrived after the first
// task had been handled and acked (so deleted), and the queue rightly took
// it as a new task. It is counted apart.
//
// Deliveries are grouped by business key because the producer's key is
// what a lost task would be missed by.
func (d *deliveryLog) report(kill time.Time) deliveryReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := deliveryReport{tasks: len(d.byKey), concurrent: d.concurrent}
	for key, ds := range d.byKey {
		r.total += len(ds)
		sort.Slice(ds, func(i, j int) bool { return ds[i].deliveredAt.Before(ds[j].deliveredAt) })
		for i := 1; i < len(ds); i++ {
			r.redelivered++
			prev, cur := ds[i-1], ds[i]
			switch {
			case cur.id != prev.id:
				r.reEnqueued++
			case !cur.deliveredAt.Before(prev.deadline):
				r.afterLease++
			case prev.deliveredAt.Before(kill) && cur.deliveredAt.After(kill):
				r.takeLost++
			default:
				r.leaseViolations++
				if len(r.violationSample) < 5 {
					r.violationSample = append(r.violationSample, fmt.Sprintf("%s (task %s): fence %d lease until %s, fence %d at %s",
						key, cur.id, prev.fence, prev.deadline.Format("15:04:05.000"), cur.fence, cur.deliveredAt.Format("15:04:05.000")))
				}
			}
		}
	}
	return r
}

// producer enqueues one task every 10 ms on the master of the queue's
// slot, through a one-connection client so that WAIT 1 covers exactly the
// enqueue before it. A task counts as acknowledged only when WAIT says a
// replica has it (see enqueue). On any failure it re-resolves the master and retries the
// same (key, token), which the queue turns into a duplicate if the earlier
// attempt had landed.
type producer struct {
	cc      *redis.ClusterClient
	name    string
	opts    delay.Options
	retries atomic.Int64

	mu       sync.Mutex
	acked    map[string]time.Time // key -> when acknowledged
	firstTry map[string]time.Time
}

func (p *producer) run(ctx context.Context, t *testing.T) {
	p.mu.Lock()
	p.firstTry = map[string]time.Time{}
	p.mu.Unlock()
	var conn *redis.Client
	var q *delay.Queue
	var replicas int
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ctx.Err() == nil; i++ {
		key := "task-" + strconv.Itoa(i)
		p.mu.Lock()
		p.firstTry[key] = time.Now()
		p.mu.Unlock()
		for ctx.Err() == nil {
			if conn == nil {
				m, err := p.cc.MasterForKey(ctx, keyname.QueueTag(p.name))
				if err != nil {
					p.retries.Add(1)
					time.Sleep(100 * time.Millisecond)
					continue
				}
				conn = redis.NewClient(&redis.Options{Addr: m.Options().Addr, PoolSize: 1, MaxRetries: -1, ContextTimeoutEnabled: true,
					DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
				if q, err = delay.New(conn, p.name, p.opts); err != nil {
					t.Errorf("producer: delay.New: %v", err)
					return
				}
				info, err := conn.Info(ctx, "replication").Result()
				if err != nil {
					_ = conn.Close()
					conn = nil
					p.retries.Add(1)
					time.Sleep(100 * time.Millisecond)
					continue
				}
				replicas, _ = strconv.Atoi(testredis.InfoFields(info)["connected_slaves"])
			}
			if p.enqueue(ctx, conn, q, key, replicas) {
				break
			}
			p.retries.Add(1)
			_ = conn.Close()
			conn = nil
			time.Sleep(100 * time.Millisecond)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}

// enqueue writes one task and, when the master has a replica, waits for
// it to confirm. A promoted replica has no replica of its own until the
// dead node is revived; the test kills nothing more, so there the
// master's own acknowledgement is as durable as this run needs.
func (p *producer) enqueue(ctx context.Context, conn *redis.Client, q *delay.Queue, key string, replicas int) bool {
	ectx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := q.Enqueue(ectx, delay.Job{Key: key, Token: key, Payload: []byte("x")}); err != nil {
		return false
	}
	if replicas > 0 {
		n, err := conn.Do(ectx, "WAIT", 1, 500).Int()
		if err != nil || n < 1 {
			return false
		}
	}
	p.mu.Lock()
	p.acked[key] = time.Now()
	p.mu.Unlock()
	return true
}

func (p *producer) ackedKeys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.acked))
	for k := range p.acked {
		out = append(out, k)
	}
	return out
}

func (p *producer) ackedAfter(t time.Time) int {
	if t.IsZero() {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.acked {
		if at.After(t) {
			n++
		}
	}
	return n
}
