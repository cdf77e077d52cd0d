// Command peers compares tierset's delay queue with hibiken/asynq v0.26.0 on
// the same Redis, in the same run, doing the same work: schedule N tasks due
// at one instant about a second ahead and process them with a no-op handler
// at concurrency 8 (throughput, lateness, one-by-one enqueue rate, memory per
// scheduled task), then a steady offered rate with every task due 1 s after
// its enqueue (lateness), then N tasks enqueued one call each from 64
// goroutines at once (enqueue rate under concurrency).
//
// It lives in its own module so that asynq never enters tierset's go.mod:
//
//	cd bench/peers && go run . -redis redis://127.0.0.1:6379/0 [-n 20000] [-rate 1000]
//
// tierset uses the DB of -redis under a unique key prefix; asynq uses DB
// -asynq-db (default 5) and a unique queue, so only "asynq:{<queue>}:*" keys
// (and the queue's entry in asynq:queues) are written and then deleted. It
// never runs FLUSHDB or FLUSHALL.
package main

import (
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/measure"
)

// task is one job, the same bytes for every library.
type task struct {
	key     string
	payload []byte
	due     time.Time
}

// peer is one library under test.
type peer interface {
	name() string
	redis() *redis.Client
	// keyPattern matches every key the peer writes for its queue.
	keyPattern() string
	enqueue(ctx context.Context, t task) error
	// start runs a worker at concurrency 8 calling deliver with each payload.
	start(ctx context.Context, deliver func(payload []byte)) error
	stop()
	cleanup(ctx context.Context) error
}

type config struct {
	redisURL   string
	asynqDB    int
	n          int
	rate       int
	steady     time.Duration
	lead       time.Duration
	asynqFast  bool
	csvPath    string
	budget     time.Duration
	libs       string
	asynqUUID  bool
	floorsPath string
	strict     bool
}

func main() {
	var cfg config
	flag.StringVar(&cfg.redisURL, "redis", "redis://127.0.0.1:6379/0", "Redis URL (tierset uses its DB)")
	flag.IntVar(&cfg.asynqDB, "asynq-db", 5, "Redis DB number for asynq's keys on the same server")
	flag.IntVar(&cfg.n, "n", 20000, "tasks in the scheduled burst")
	flag.IntVar(&cfg.rate, "rate", 1000, "offered rate of the steady run (tasks/s)")
	flag.DurationVar(&cfg.steady, "steady", 5*time.Second, "length of the steady run")
	flag.DurationVar(&cfg.lead, "lead", time.Second, "due time ahead of enqueue: of each task in the steady run, of the burst's start for the burst")
	flag.BoolVar(&cfg.asynqFast, "asynq-fast", true, "also run asynq with DelayedTaskCheckInterval = 100ms")
	flag.StringVar(&cfg.csvPath, "csv", "", "also write the results as CSV to this file")
	flag.BoolVar(&cfg.asynqUUID, "asynq-uuid", false, "give asynq no TaskID (it makes 36-byte UUIDs) instead of the 25-byte business key")
	flag.StringVar(&cfg.libs, "libs", "tierset,asynq", "comma-separated libraries to run (tierset, asynq); the ratios need both")
	flag.DurationVar(&cfg.budget, "budget", 110*time.Second, "hard bound on the whole run")
	flag.StringVar(&cfg.floorsPath, "floors", "", "also write the floor rows as JSON to this file (go run ./bench -peers reads them)")
	flag.BoolVar(&cfg.strict, "strict", false, "exit 1 when a robust floor fails or cannot be judged")
	flag.Parse()
	floors, err := run(cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
	if cfg.floorsPath != "" {
		f, err := os.Create(cfg.floorsPath)
		if err == nil {
			err = errors.Join(floors.WriteJSON(f), f.Close())
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "peers: -floors:", err)
			os.Exit(1)
		}
	}
	if cfg.strict && len(floors.Failures(true)) > 0 {
		os.Exit(1)
	}
}

// result is what one library measured.
type result struct {
	peer        string
	enqueueRate float64 // one by one, tasks/s
	enqueueConc float64 // one enqueue call per task from concGoroutines at once, tasks/s
	enqueueLate bool    // the burst enqueue outran its due time
	burst       latency
	burstWant   int
	steady      latency
	steadyWant  int
	steadyRate  float64 // offered rate actually achieved
	memDelta    float64 // INFO used_memory delta / N
	memKeys     float64 // MEMORY USAGE sum delta / N
}

func run(cfg config, out io.Writer) (*measure.Floors, error) {
	if cfg.n < 2 || cfg.rate < 1 || cfg.steady <= 0 || cfg.lead <= 0 {
		return nil, errors.New("-n ≥ 2, -rate ≥ 1, -steady > 0 and -lead > 0 are required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.budget)
	defer cancel()

	opt, err := redis.ParseURL(cfg.redisURL)
	if err != nil {
		return nil, fmt.Errorf("-redis: %w", err)
	}
	opt.ContextTimeoutEnabled = true // delay.New requires it
	aopt := *opt
	aopt.DB = cfg.asynqDB
	if aopt.DB == opt.DB {
		return nil, errors.New("-asynq-db must differ from the DB of -redis")
	}
	tc, ac := redis.NewClient(opt), redis.NewClient(&aopt)
	defer tc.Close()
	defer ac.Close()
	for _, c := range []*redis.Client{tc, ac} {
		if err := c.Ping(ctx).Err(); err != nil {
			return nil, fmt.Errorf("ping %s: %w", c.Options().Addr, err)
		}
	}

	runID := randomID()
	ts, err := newTiersetPeer(tc, "tsbench-"+runID, "peers-"+runID)
	if err != nil {
		return nil, err
	}
	libs := strings.Split(cfg.libs, ",")
	var peers []peer
	if slices.Contains(libs, "tierset") {
		peers = append(peers, ts)
	}
	if slices.Contains(libs, "asynq") {
		peers = append(peers, newAsynqPeer(ac, "tsbench-"+runID, "asynq (fwd 5s default)", 0, cfg.asynqUUID))
		if cfg.asynqFast {
			peers = append(peers, newAsynqPeer(ac, "tsbench-"+runID+"-f", "asynq (fwd 100ms)", 100*time.Millisecond, cfg.asynqUUID))
		}
	}
	if len(peers) == 0 {
		return nil, errors.New("-libs: nothing to run")
	}
	ids := "asynq TaskID = the business key"
	if cfg.asynqUUID {
		ids = "asynq's own UUID task IDs"
	}
	fmt.Fprintf(out, "peers: run %s, N=%d, steady %d/s for %v, lead %v, redis %s (tierset DB %d, asynq DB %d), payload %d B, business key %d B, %s\n",
		runID, cfg.n, cfg.rate, cfg.steady, cfg.lead, opt.Addr, opt.DB, aopt.DB, payloadSize, len(businessKey(runID, 0)), ids)
	fmt.Fprintln(out, "peers: both at concurrency 8 with a no-op handler (tierset: 1 worker, batch 100; asynq: 1 server); lateness = handler time − intended due time, one clock (Redis runs on this host)")
	fmt.Fprintln(out, "peers: shared machine and Redis: other clients and jobs run at the same time, so every number is noisy")

	var results []result
	for _, p := range peers {
		r, err := measurePeer(ctx, cfg, runID, p, out)
		cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
		if cerr := p.cleanup(cctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("%s cleanup: %w", p.name(), cerr))
		}
		if left, _ := measure.Keys(cctx, p.redis(), p.keyPattern()); len(left) > 0 {
			err = errors.Join(err, fmt.Errorf("%s cleanup left %d keys", p.name(), len(left)))
		}
		ccancel()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name(), err)
		}
		results = append(results, r)
	}
	printResults(out, cfg, results)
	floors := peerFloors(results)
	fmt.Fprintln(out, "\nfloors (robust: -strict fails on them; tight: printed only):")
	floors.Print(out)
	if cfg.csvPath != "" {
		if err := writeCSV(cfg.csvPath, results); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "\nwrote %s\n", cfg.csvPath)
	}
	return floors, nil
}

func randomID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// measurePeer runs the burst, steady and concurrent-enqueue phases for one library.
func measurePeer(ctx context.Context, cfg config, runID string, p peer, out io.Writer) (result, error) {
	r := result{peer: p.name(), burstWant: cfg.n}
	fmt.Fprintf(out, "\n== %s\n", p.name())

	// Burst: schedule every task, due at one instant lead after the start,
	// with no worker running, measure memory, then start the worker and
	// time it from the first delivery to the last. When the enqueue outruns
	// the due time (a slow or loaded machine), the burst lateness includes
	// that wait and is flagged.
	rec := newRecorder(cfg.n)
	mem0, _, err := measure.UsedMemory(ctx, p.redis())
	if err != nil {
		return r, err
	}
	keys0, _, _, err := measure.KeysMemory(ctx, p.redis(), p.keyPattern())
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	due := t0.Add(cfg.lead).Truncate(time.Millisecond)
	for i := range cfg.n {
		n := uint64(i)
		if err := p.enqueue(ctx, task{key: businessKey(runID, n), payload: makePayload(due, n), due: due}); err != nil {
			return r, fmt.Errorf("burst enqueue %d: %w", i, err)
		}
	}
	enqEnd := time.Now()
	r.enqueueRate = float64(cfg.n) / enqEnd.Sub(t0).Seconds()
	mem1, _, err := measure.UsedMemory(ctx, p.redis())
	if err != nil {
		return r, err
	}
	keys1, _, _, err := measure.KeysMemory(ctx, p.redis(), p.keyPattern())
	if err != nil {
		return r, err
	}
	r.enqueueLate = enqEnd.After(due)
	r.memDelta = float64(mem1-mem0) / float64(cfg.n)
	r.memKeys = float64(keys1-keys0) / float64(cfg.n)
	fmt.Fprintf(out, "burst: enqueued %d one by one in %v (%.0f/s), due at +%v; starting the worker\n",
		cfg.n, enqEnd.Sub(t0).Round(time.Millisecond), r.enqueueRate, cfg.lead)
	if err := p.start(ctx, rec.deliver); err != nil {
		return r, fmt.Errorf("start worker: %w", err)
	}
	if !rec.wait(ctx, time.Now().Add(cfg.lead+30*time.Second)) {
		fmt.Fprintf(out, "burst: TIMEOUT with %d of %d delivered\n", rec.summary().delivered, cfg.n)
	}
	p.stop()
	r.burst = rec.summary()

	// Steady: a producer at a fixed rate, each task due lead after its enqueue.
	want := int(float64(cfg.rate) * cfg.steady.Seconds())
	r.steadyWant = want
	rec = newRecorder(want)
	if err := p.start(ctx, rec.deliver); err != nil {
		return r, fmt.Errorf("start worker: %w", err)
	}
	time.Sleep(200 * time.Millisecond)
	interval := time.Second / time.Duration(cfg.rate)
	start := time.Now()
	for i := range want {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		n := uint64(cfg.n + i)
		due := time.Now().Add(cfg.lead).Truncate(time.Millisecond)
		if err := p.enqueue(ctx, task{key: businessKey(runID, n), payload: makePayload(due, n), due: due}); err != nil {
			return r, fmt.Errorf("steady enqueue %d: %w", i, err)
		}
	}
	r.steadyRate = float64(want) / time.Since(start).Seconds()
	if !rec.wait(ctx, time.Now().Add(cfg.lead+15*time.Second)) {
		fmt.Fprintf(out, "steady: TIMEOUT with %d of %d delivered\n", rec.summary().delivered, want)
	}
	p.stop()
	r.steady = rec.summary()
	fmt.Fprintf(out, "steady: offered %.0f/s, delivered %d of %d\n", r.steadyRate, r.steady.delivered, want)

	// Concurrent enqueue: N tasks due in an hour (no worker runs), one
	// enqueue call each, from concGoroutines goroutines at once, as a
	// service's request handlers would make them.
	r.enqueueConc, err = enqueueConcurrent(ctx, p, runID, cfg.n, uint64(cfg.n+want))
	if err != nil {
		return r, err
	}
	fmt.Fprintf(out, "concurrent: enqueued %d from %d goroutines (%.0f/s)\n", cfg.n, concGoroutines, r.enqueueConc)
	return r, nil
}

const concGoroutines = 64

func enqueueConcurrent(ctx context.Context, p peer, runID string, n int, from uint64) (float64, error) {
	due := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	var next atomic.Int64
	errs := make([]error, concGoroutines)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range concGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				k := from + uint64(i)
				if err := p.enqueue(ctx, task{key: businessKey(runID, k), payload: makePayload(due, k), due: due}); err != nil {
					errs[g] = fmt.Errorf("concurrent enqueue %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	rate := float64(n) / time.Since(start).Seconds()
	return rate, errors.Join(errs...)
}

func printResults(out io.Writer, cfg config, rs []result) {
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, f func(r result) string) {
		fmt.Fprint(w, label+"\t")
		for _, r := range rs {
			fmt.Fprint(w, f(r)+"\t")
		}
		fmt.Fprintln(w)
	}
	row("metric", func(r result) string { return r.peer })
	row("enqueue one by one (tasks/s)", func(r result) string { return f0(r.enqueueRate) })
	row(fmt.Sprintf("enqueue from %d goroutines (tasks/s)", concGoroutines), func(r result) string { return f0(r.enqueueConc) })
	row(fmt.Sprintf("burst of %d: delivered", cfg.n), func(r result) string { return delivered(r.burst, r.burstWant) })
	row("burst: throughput first→last (tasks/s)", func(r result) string { return f0(r.burst.throughput) })
	row("burst: lateness p50 (ms)", func(r result) string { return ms(r.burst.p50) + flagIf(r.enqueueLate, " (*)") })
	row("burst: lateness p99 (ms)", func(r result) string { return ms(r.burst.p99) })
	row("burst: lateness max (ms)", func(r result) string { return ms(r.burst.max) })
	row(fmt.Sprintf("steady %d/s: delivered", cfg.rate), func(r result) string { return delivered(r.steady, r.steadyWant) })
	row("steady: lateness min (ms)", func(r result) string { return ms(r.steady.min) })
	row("steady: lateness p50 (ms)", func(r result) string { return ms(r.steady.p50) })
	row("steady: lateness p99 (ms)", func(r result) string { return ms(r.steady.p99) })
	row("steady: lateness max (ms)", func(r result) string { return ms(r.steady.max) })
	row(fmt.Sprintf("B/task, used_memory delta (incl. %d B payload)", payloadSize), func(r result) string { return f0(r.memDelta) })
	row("B/task, MEMORY USAGE of its keys", func(r result) string { return f0(r.memKeys) })
	row("B/task, used_memory delta, payload excluded", func(r result) string { return f0(r.memDelta - payloadSize) })
	w.Flush()
	for _, r := range rs {
		if r.enqueueLate {
			fmt.Fprintf(out, "(*) %s: the one-by-one enqueue took longer than -lead %v, so the burst lateness includes waiting for the enqueue to end\n", r.peer, cfg.lead)
		}
	}

	if len(rs) < 2 || rs[0].peer != "tierset" {
		return
	}
	ts := rs[0]
	fmt.Fprintln(out, "\nratios, tierset vs each asynq run (the judged ones are in the floors table):")
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, a := range rs[1:] {
		fmt.Fprintf(w, "%s\tenqueue one by one tierset/asynq\t%.2f×\n", a.peer, ts.enqueueRate/a.enqueueRate)
		fmt.Fprintf(w, "%s\tenqueue from %d goroutines tierset/asynq\t%.2f×\n", a.peer, concGoroutines, ts.enqueueConc/a.enqueueConc)
	}
	w.Flush()
}

// Floors against asynq. Burst processing is robust: it stays well above
// its floor (docs/benchmarks.md, "Against asynq"). Lateness and memory
// ratios are tight.
const (
	floorBurst    = 3.0   // tierset/asynq throughput, first to last delivery
	floorLateness = 100.0 // asynq/tierset steady p99
	floorMemory   = 0.5   // tierset/asynq bytes per task
)

// peerFloors judges tierset against the slowest-for-tierset asynq run
// (the worst ratio over the asynq configurations measured).
func peerFloors(rs []result) *measure.Floors {
	t := &measure.Floors{}
	burst := measure.Floor{Subject: "peers", Kind: measure.Robust, Name: "burst processing, tierset/asynq, first to last delivery", Want: fmt.Sprintf("≥ %.0f×", floorBurst)}
	if len(rs) < 2 || rs[0].peer != "tierset" {
		t.Skip(burst, "needs -libs tierset,asynq")
		return t
	}
	ts := rs[0]
	worst := func(ratio func(a result) float64) (float64, string) {
		w, who := math.Inf(1), ""
		for _, a := range rs[1:] {
			if x := ratio(a); x < w {
				w, who = x, a.peer
			}
		}
		return w, "worst: vs " + who
	}
	complete := ts.burst.delivered == ts.burstWant
	x, who := worst(func(a result) float64 { return ts.burst.throughput / a.burst.throughput })
	burst.Value, burst.Note = fmt.Sprintf("%.1f×", x), who
	if !complete {
		burst.Note += fmt.Sprintf("; tierset delivered %d of %d", ts.burst.delivered, ts.burstWant)
	}
	t.Judge(burst, complete && x >= floorBurst)
	x, who = worst(func(a result) float64 { return float64(a.steady.p99) / float64(max(ts.steady.p99, time.Microsecond)) })
	t.Judge(measure.Floor{Subject: "peers", Kind: measure.Tight, Name: "steady p99 lateness, asynq/tierset", Want: fmt.Sprintf("≥ %.0f×", floorLateness),
		Value: fmt.Sprintf("%.0f×", x), Note: who}, x >= floorLateness)
	x, who = worst(func(a result) float64 { return -ts.memDelta / a.memDelta })
	t.Judge(measure.Floor{Subject: "peers", Kind: measure.Tight, Name: "bytes per task, tierset/asynq (used_memory)", Want: fmt.Sprintf("≤ %.1f×", floorMemory),
		Value: fmt.Sprintf("%.2f×", -x), Note: who}, -x <= floorMemory)
	return t
}

func writeCSV(path string, rs []result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"peer", "enqueue_per_s", "burst_n", "burst_delivered", "burst_dups", "throughput_per_s",
		"burst_p50_ms", "burst_p99_ms", "burst_max_ms", "steady_rate", "steady_delivered", "steady_dups",
		"steady_min_ms", "steady_p50_ms", "steady_p99_ms", "steady_max_ms", "bytes_per_task_used_memory",
		"bytes_per_task_memory_usage", "payload_bytes", "enqueue_concurrent_per_s"})
	for _, r := range rs {
		_ = w.Write([]string{r.peer, f0(r.enqueueRate), strconv.Itoa(r.burstWant), strconv.Itoa(r.burst.delivered),
			strconv.Itoa(r.burst.dups), f0(r.burst.throughput), ms(r.burst.p50), ms(r.burst.p99), ms(r.burst.max),
			f0(r.steadyRate), strconv.Itoa(r.steady.delivered), strconv.Itoa(r.steady.dups), ms(r.steady.min),
			ms(r.steady.p50), ms(r.steady.p99), ms(r.steady.max), f0(r.memDelta), f0(r.memKeys), strconv.Itoa(payloadSize), f0(r.enqueueConc)})
	}
	w.Flush()
	return errors.Join(w.Error(), f.Close())
}

func f0(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

func flagIf(b bool, s string) string {
	if b {
		return s
	}
	return ""
}

func delivered(l latency, want int) string {
	s := fmt.Sprintf("%d/%d", l.delivered, want)
	if l.dups > 0 {
		s += fmt.Sprintf(" +%d dup", l.dups)
	}
	return s
}
