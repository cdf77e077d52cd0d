// Command peers compares tierset's delay queue with the queues a Go team
// would pick instead, in one run, on one machine, doing the same work:
// hibiken/asynq and BullMQ (Node) on the same Redis, riverqueue/river on
// the local PostgreSQL. Every system runs four workloads:
//
//   - burst: -n tasks (20,000) due at one instant -burst-lead (2 s) ahead,
//     added with the library's fastest documented path (a batch call, or
//     64 concurrent callers where it has none) while one worker runs:
//     processing rate (first to last handled) and p99 lateness;
//   - steady: -rates (1,000 and 10,000 tasks/s) offered for -steady (5 s),
//     each task due -lead (1 s) after its enqueue: p99 lateness;
//   - memory: -mem-n (100,000) tasks due in an hour: bytes each adds to
//     Redis's used_memory, or for River to its job table with its indexes.
//
// Every handled task is checked against what was enqueued: a duplicate or
// a payload that is not ours marks the row INVALID; a task not handled
// within -wait of its due time leaves the row "behind", with its p99 a
// lower bound. Each peer runs with its defaults and with its best
// documented latency settings (printed with the table); the floors are
// judged against each peer's better configuration, on the median over
// -rounds interleaved rounds. A worker runs through each round of a Go
// library, warmed up by one task handled before the round's first; BullMQ
// runs one Node process (bullmq/bench.mjs) per workload.
//
// It lives in its own module so that asynq, River and pgx never enter
// tierset's go.mod:
//
//	cd bench/peers && (cd bullmq && npm ci) && go run . -redis redis://127.0.0.1:6379/0
//
// tierset and BullMQ use the DB of -redis under unique key prefixes; asynq
// uses DB -asynq-db (default 5) and a unique queue; River a schema of its
// own, dropped at the end. Only the keys each wrote are deleted: never
// FLUSHDB or FLUSHALL. BullMQ is skipped, with the reason, when node or
// its node_modules are missing; River when no PostgreSQL answers at -pg.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/bench/peers/internal/cli"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/measure"
)

// task is one job, the same bytes for every Go library.
type task struct {
	key     string
	payload []byte
	due     time.Time
}

type config struct {
	redisURL   string
	pgURL      string
	node       string
	asynqDB    int
	n          int
	memN       int
	rates      []int
	rounds     int
	steady     time.Duration
	lead       time.Duration
	burstLead  time.Duration
	wait       time.Duration
	budget     time.Duration
	libs       []string
	defaults   bool
	asynqUUID  bool
	tsBatch    int
	floorsPath string
	strict     bool
}

func main() {
	var cfg config
	var rates, libs string
	flag.StringVar(&cfg.redisURL, "redis", "redis://127.0.0.1:6379/0", "Redis URL (tierset and BullMQ use its DB)")
	flag.StringVar(&cfg.pgURL, "pg", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL for River (a schema of its own)")
	flag.StringVar(&cfg.node, "node", "node", "the Node.js binary for BullMQ")
	flag.IntVar(&cfg.asynqDB, "asynq-db", 5, "Redis DB number for asynq's keys on the same server")
	flag.IntVar(&cfg.n, "n", 20000, "tasks in the burst")
	flag.IntVar(&cfg.memN, "mem-n", 100000, "pending tasks for the memory figure")
	flag.StringVar(&rates, "rates", "1000,10000", "comma-separated offered rates of the steady workloads (tasks/s)")
	flag.IntVar(&cfg.rounds, "rounds", 3, "interleaved rounds (the table shows medians)")
	flag.DurationVar(&cfg.steady, "steady", 5*time.Second, "length of each steady workload")
	flag.DurationVar(&cfg.lead, "lead", time.Second, "each steady task is due this long after its enqueue")
	flag.DurationVar(&cfg.burstLead, "burst-lead", 2*time.Second, "the burst is due this long after its first enqueue")
	flag.DurationVar(&cfg.wait, "wait", 10*time.Second, "how long a workload waits for stragglers after its last due time")
	flag.StringVar(&libs, "libs", "tierset,asynq,bullmq,river", "comma-separated systems to run; the ratios need tierset")
	flag.BoolVar(&cfg.defaults, "defaults", true, "also run each peer with its default settings, besides its best latency settings")
	flag.IntVar(&cfg.tsBatch, "tierset-batch", 1000, fmt.Sprintf("tierset's WorkerOptions.BatchSize (1..%d); above its concurrency of %d, Prefetch defaults to it", delay.MaxBatch, handlers))
	flag.BoolVar(&cfg.asynqUUID, "asynq-uuid", false, "give asynq no TaskID (it makes 36-byte UUIDs) instead of the 25-byte business key")
	flag.DurationVar(&cfg.budget, "budget", 20*time.Minute, "hard bound on the whole run")
	flag.StringVar(&cfg.floorsPath, "floors", "", "also write the floor rows as JSON to this file (go run ./bench -peers reads them)")
	flag.BoolVar(&cfg.strict, "strict", false, "exit 1 when a robust floor fails or cannot be judged")
	flag.Parse()
	cfg.rates = cli.PositiveInts("peers", "rates", rates)
	cfg.libs = strings.Split(libs, ",")
	floors, err := run(cfg, os.Stdout)
	cli.Finish("peers", floors, err, cfg.floorsPath, cfg.strict)
}

// outcome is everything one system measured over the rounds.
type outcome struct {
	sys     system
	bursts  []phase
	steady  map[int][]phase
	mem     float64
	memWhat string
	memOK   bool
}

func run(cfg config, out io.Writer) (*measure.Floors, error) {
	if cfg.n < 2 || cfg.memN < 1 || cfg.rounds < 1 || cfg.steady <= 0 || cfg.lead <= 0 || cfg.burstLead <= 0 || cfg.wait <= 0 || cfg.tsBatch < 1 || cfg.tsBatch > delay.MaxBatch {
		return nil, fmt.Errorf("-n ≥ 2, -mem-n ≥ 1, -rounds ≥ 1, -tierset-batch in 1..%d and positive -steady, -lead, -burst-lead, -wait are required", delay.MaxBatch)
	}
	// Ctrl-C or SIGTERM ends the run through the same cleanup (River's
	// schemas, every key written) as its end.
	sctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sctx, cfg.budget)
	defer cancel()
	began := time.Now()

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

	runID := measure.RunID()
	skipped := map[string]string{} // product → why it did not run
	var systems []system
	want := func(lib string) bool { return slices.Contains(cfg.libs, lib) }
	if want("tierset") {
		ts, err := newTiersetPeer(tc, "tsbench-"+runID, "peers-"+runID, cfg.tsBatch)
		if err != nil {
			return nil, err
		}
		systems = append(systems, goSystem{ts})
	}
	if want("asynq") {
		if cfg.defaults {
			systems = append(systems, goSystem{newAsynqPeer(ac, "tsbench-"+runID, "asynq defaults", 0, 0, cfg.asynqUUID)})
		}
		systems = append(systems, goSystem{newAsynqPeer(ac, "tsbench-"+runID+"-f", "asynq tuned", 10*time.Millisecond, 10*time.Millisecond, cfg.asynqUUID)})
	}
	if want("bullmq") {
		if why := bullmqMissing(cfg.node); why != "" {
			skipped["BullMQ"] = why
		} else {
			if cfg.defaults {
				systems = append(systems, &bullmqPeer{label: "BullMQ defaults", node: cfg.node, url: cfg.redisURL, rdb: tc, prefix: "tsbench-bq-" + runID})
			}
			systems = append(systems, &bullmqPeer{label: "BullMQ tuned", node: cfg.node, url: cfg.redisURL, rdb: tc, prefix: "tsbench-bqf-" + runID, fast: true})
		}
	}
	var pool *pgxpool.Pool
	if want("river") {
		pool, err = openPG(ctx, cfg.pgURL)
		if err != nil {
			skipped["River"] = err.Error()
		} else {
			defer pool.Close()
			if cfg.defaults {
				rp, err := newRiverPeer(ctx, pool, "tsbench_river_"+runID, "River defaults", false)
				if err != nil {
					cleanupAll(systems)
					return nil, err
				}
				systems = append(systems, goSystem{rp})
			}
			rp, err := newRiverPeer(ctx, pool, "tsbench_riverf_"+runID, "River tuned", true)
			if err != nil {
				cleanupAll(systems)
				return nil, err
			}
			systems = append(systems, goSystem{rp})
		}
	}
	if len(systems) == 0 {
		return nil, errors.New("-libs: nothing to run")
	}
	defer cleanupAll(systems)

	fmt.Fprintf(out, "peers: run %s, %d interleaved rounds; burst %d due %v after its first enqueue; steady %v/s for %v, each due %v after its enqueue; memory over %d pending; wait %v for stragglers\n",
		runID, cfg.rounds, cfg.n, cfg.burstLead, cfg.rates, cfg.steady, cfg.lead, cfg.memN, cfg.wait)
	fmt.Fprintf(out, "peers: redis %s (tierset, BullMQ DB %d; asynq DB %d), PostgreSQL %s; no-op handlers; lateness = handled − intended due time, one clock (everything runs on this host)\n",
		opt.Addr, opt.DB, aopt.DB, redactPG(cfg.pgURL))
	fmt.Fprintf(out, "peers: load average at start %s (a shared machine: every number is noisy)\n", cli.LoadAvg())
	for p, why := range skipped {
		fmt.Fprintf(out, "peers: %s SKIPPED: %s\n", p, why)
	}

	outs := make([]*outcome, len(systems))
	for i, s := range systems {
		outs[i] = &outcome{sys: s, steady: map[int][]phase{}}
	}
	var next uint64 = 1 // task numbers never repeat within a run
	w := workload{run: runID, n: cfg.n, memN: cfg.memN, burstLead: cfg.burstLead, lead: cfg.lead, length: cfg.steady, wait: cfg.wait}
	for round := range cfg.rounds {
		for k := range outs {
			o := outs[(k+round)%len(outs)] // each round starts with the next system
			t0 := time.Now()
			w.first = next + 1 // next is the warm-up task's number
			next = w.first + w.span(cfg.rates)
			burst, steady, err := o.sys.round(ctx, w, cfg.rates)
			if err != nil {
				return nil, fmt.Errorf("%s round %d: %w", o.sys.name(), round+1, err)
			}
			o.bursts = append(o.bursts, burst)
			for i, rate := range cfg.rates {
				o.steady[rate] = append(o.steady[rate], steady[i])
			}
			if round == 0 && firstOfProduct(outs, o) {
				w.first, next = next, next+uint64(cfg.memN)
				o.mem, o.memWhat, err = o.sys.memory(ctx, w)
				if err != nil {
					return nil, fmt.Errorf("%s memory: %w", o.sys.name(), err)
				}
				o.memOK = true
			}
			fmt.Fprintf(out, "round %d: %-16s %s (%v)\n", round+1, o.sys.name(), o.brief(cfg, round), time.Since(t0).Round(100*time.Millisecond))
		}
	}
	printTable(out, cfg, outs)
	floors := peerFloors(cfg, outs, skipped)
	fmt.Fprintln(out, "\nfloors (robust: -strict fails on them; tight: printed only):")
	floors.Print(out)
	fmt.Fprintf(out, "\npeers: done in %v, load average at end %s\n", time.Since(began).Round(time.Second), cli.LoadAvg())
	return floors, nil
}

// firstOfProduct: memory is measured once per library (its settings do
// not change how a pending task is stored).
func firstOfProduct(outs []*outcome, o *outcome) bool {
	for _, x := range outs {
		if x.sys.product() == o.sys.product() {
			return x == o
		}
	}
	return false
}

func cleanupAll(systems []system) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, s := range systems {
		if err := s.cleanup(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "peers: %s cleanup: %v\n", s.name(), err)
		}
	}
}

func openPG(ctx context.Context, url string) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("-pg: %w", err)
	}
	pcfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("no PostgreSQL at %s: %w", redactPG(url), err)
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("no PostgreSQL answers at %s: %w", redactPG(url), err)
	}
	return pool, nil
}

// redactPG drops a password from a PostgreSQL URL for printing.
func redactPG(url string) string {
	if cfg, err := pgxpool.ParseConfig(url); err == nil {
		return fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	}
	return "(unparsable URL)"
}
