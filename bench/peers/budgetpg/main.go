// Command budgetpg measures a promotion cap's reservations per second
// kept two ways, side by side in one run, at -clients concurrent clients:
//
//   - postgres: the cap as users keep it in PostgreSQL, one hot row,
//     UPDATE caps SET used = used + 1 WHERE id = $1 AND used < cap (one
//     autocommit statement a grant: a row lock held to its commit);
//   - tierset: budget.Reserve on Redis, one line on one uses cap (a hold of
//     an hour, so every grant stays counted);
//   - floor: what any design keeping Reserve's promises must write a
//     grant, and nothing else, on the same Redis: the order's record (an
//     HSET of the six fields Reserve writes), its hold (ZADD) and the
//     counter (HINCRBY), in one script a batch, batched as Reserve
//     batches but with two batches in flight where Reserve has one. It
//     checks no cap and reads no record: a bound from below on what
//     Reserve's latency could be here, not a way to keep a cap.
//
// Each case runs -d in -rounds interleaved rounds; the table gives grants
// per second, p50 and p99 of a call, and the ratio. Every grant is checked
// against the cap: after each case the counter (the row's used, Redis's
// counter through Remaining) must equal the grants the clients counted,
// and before timing both are driven past a small cap from 64 clients,
// which must grant exactly the cap.
//
//	cd bench/peers && go run ./budgetpg -redis redis://127.0.0.1:6379/0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/bench/peers/internal/cli"
	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/measure"
)

type config struct {
	redisURL   string
	pgURL      string
	clients    []int
	d          time.Duration
	rounds     int
	floorsPath string
	strict     bool
	cpuProfile string
}

func main() {
	var cfg config
	var clients string
	flag.StringVar(&cfg.redisURL, "redis", "redis://127.0.0.1:6379/0", "Redis URL (keys under a unique prefix, deleted at the end)")
	flag.StringVar(&cfg.pgURL, "pg", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL (a schema of its own, dropped at the end)")
	flag.StringVar(&clients, "clients", "1,16,64", "comma-separated concurrent client counts")
	flag.DurationVar(&cfg.d, "d", 2*time.Second, "time per way, client count and round")
	flag.IntVar(&cfg.rounds, "rounds", 2, "interleaved rounds (the table sums them)")
	flag.StringVar(&cfg.floorsPath, "floors", "", "also write the floor rows as JSON to this file (go run ./bench -service reads them)")
	flag.BoolVar(&cfg.strict, "strict", false, "exit 1 when a robust floor fails or cannot be judged")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of this process during the first timed tierset case at the most clients to this file")
	flag.Parse()
	cfg.clients = cli.PositiveInts("budgetpg", "clients", clients)
	floors, err := run(cfg, os.Stdout)
	cli.Finish("budgetpg", floors, err, cfg.floorsPath, cfg.strict)
}

// way grants one use of a cap; ok false is a refusal at the cap.
type way struct {
	name  string
	grant func(ctx context.Context, i int64) (ok bool, err error)
	// used is the way's own counter, read back to check the grants.
	used func(ctx context.Context) (int64, error)
	// reset makes a fresh cap of limit.
	reset func(ctx context.Context, limit int64) error
}

// result sums a way's rounds at one client count.
type result struct {
	grants  int64
	elapsed time.Duration
	samples measure.Samples // every call's time (drive's result leaves it empty)
}

func (r *result) rate() float64 { return float64(r.grants) / r.elapsed.Seconds() }

func run(cfg config, out io.Writer) (*measure.Floors, error) {
	sctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sctx, 10*time.Minute)
	defer cancel()
	id := measure.RunID()
	maxClients := 64
	for _, c := range cfg.clients {
		maxClients = max(maxClients, c)
	}

	pcfg, err := pgxpool.ParseConfig(cfg.pgURL)
	if err != nil {
		return nil, fmt.Errorf("-pg: %w", err)
	}
	pcfg.MaxConns, pcfg.MinConns = int32(maxClients), int32(maxClients)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL: %w", err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("no PostgreSQL answers: %w", err)
	}
	schema := pgx.Identifier{"tsbench_budget_" + id}.Sanitize()
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		if _, err := pool.Exec(cctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			fmt.Fprintln(os.Stderr, "budgetpg: drop schema:", err)
		}
	}()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+
		".caps (id text PRIMARY KEY, cap bigint NOT NULL, used bigint NOT NULL DEFAULT 0 CHECK (used <= cap))"); err != nil {
		return nil, err
	}

	opt, err := redis.ParseURL(cfg.redisURL)
	if err != nil {
		return nil, fmt.Errorf("-redis: %w", err)
	}
	opt.PoolSize = max(opt.PoolSize, maxClients)
	opt.ContextTimeoutEnabled = true // budget.New requires it
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	prefix := "tsbench-budgetpg-" + id
	defer func() {
		// One DEL a key, and a run leaves a record per grant: over 250,000
		// in a run of the defaults, more than 30 s of DELs on a busy
		// machine.
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer ccancel()
		if _, err := measure.DeleteKeys(cctx, rdb, prefix+"*"); err != nil {
			fmt.Fprintln(os.Stderr, "budgetpg: delete keys:", err)
		}
	}()

	ways := []*way{postgresWay(pool, schema), tiersetWay(rdb, prefix), floorWay(rdb, prefix)}
	// The oversell check: 64 clients drive each way that keeps a cap past
	// a cap of 1,000.
	for _, w := range ways[:2] {
		if err := w.reset(ctx, 1000); err != nil {
			return nil, fmt.Errorf("%s: %w", w.name, err)
		}
		r, err := drive(ctx, w, 64, 0, 3000, &measure.Samples{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.name, err)
		}
		if r.grants != 1000 {
			return nil, fmt.Errorf("%s: 3,000 tries from 64 clients on a cap of 1,000 granted %d", w.name, r.grants)
		}
		if err := check(ctx, w, r.grants); err != nil {
			return nil, err
		}
	}
	fmt.Fprintln(out, "budgetpg: 3,000 reservations from 64 clients on a cap of 1,000: both ways granted exactly 1,000 and their counters say 1,000")
	fmt.Fprintf(out, "budgetpg: redis %s, PostgreSQL %s:%d/%s, %d rounds × %v per case, clients %v; load average %s\n",
		opt.Addr, pcfg.ConnConfig.Host, pcfg.ConnConfig.Port, pcfg.ConnConfig.Database, cfg.rounds, cfg.d, cfg.clients, cli.LoadAvg())

	res := map[string]map[int]*result{}
	for _, w := range ways {
		res[w.name] = map[int]*result{}
		for _, c := range cfg.clients {
			res[w.name][c] = &result{}
		}
	}
	for range cfg.rounds {
		for _, c := range cfg.clients {
			for _, w := range ways {
				// A cap no client reaches in the time: every call is a grant,
				// and the counter must end equal to the grants.
				if err := w.reset(ctx, budget.MaxAmount); err != nil {
					return nil, fmt.Errorf("%s: %w", w.name, err)
				}
				t := res[w.name][c]
				stop, err := profile(cfg, w, c)
				if err != nil {
					return nil, err
				}
				r, err := drive(ctx, w, c, cfg.d, 0, &t.samples)
				stop()
				if err != nil {
					return nil, fmt.Errorf("%s at %d clients: %w", w.name, c, err)
				}
				if err := check(ctx, w, r.grants); err != nil {
					return nil, err
				}
				t.grants += r.grants
				t.elapsed += r.elapsed
			}
		}
	}
	fmt.Fprintf(out, "  %-10s %8s %12s %10s %10s %14s\n", "way", "clients", "grants/s", "p50", "p99", "way/pg")
	for _, c := range cfg.clients {
		pgR := res["postgres"][c]
		for _, w := range ways {
			r := res[w.name][c]
			s := r.samples.Summary()
			ratio := ""
			if w.name != "postgres" {
				ratio = fmt.Sprintf("%.1f×", r.rate()/pgR.rate())
			}
			fmt.Fprintf(out, "  %-10s %8d %12.0f %10v %10v %14s\n", w.name, c, r.rate(),
				s.P50.Round(time.Microsecond), s.P99.Round(time.Microsecond), ratio)
		}
	}
	floors := judge(cfg, res)
	fmt.Fprintln(out, "\nfloors (robust: -strict fails on them):")
	floors.Print(out)
	return floors, nil
}

// profile starts the -cpuprofile of the first timed tierset case at the
// most clients; stop ends it (a no-op for any other case).
func profile(cfg config, w *way, c int) (stop func(), err error) {
	if cfg.cpuProfile == "" || w.name != "tierset" || c != slices.Max(cfg.clients) || profiled {
		return func() {}, nil
	}
	profiled = true
	f, err := os.Create(cfg.cpuProfile)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

var profiled bool

// check compares a way's counter with the grants its clients counted.
func check(ctx context.Context, w *way, grants int64) error {
	used, err := w.used(ctx)
	if err != nil {
		return fmt.Errorf("%s: read counter: %w", w.name, err)
	}
	if used != grants {
		return fmt.Errorf("%s: counter %d after %d grants", w.name, used, grants)
	}
	return nil
}

// drive calls grant from conc clients for d, or until tries calls when
// tries > 0, adding each call's time to samples.
func drive(ctx context.Context, w *way, conc int, d time.Duration, tries int64, samples *measure.Samples) (*result, error) {
	var r result
	var seq, grants atomic.Int64
	var first atomic.Pointer[error]
	end := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for first.Load() == nil {
				i := seq.Add(1)
				if tries > 0 && i > tries || tries == 0 && !time.Now().Before(end) {
					return
				}
				t0 := time.Now()
				ok, err := w.grant(ctx, i)
				samples.Add(time.Since(t0))
				if err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
				if ok {
					grants.Add(1)
				}
			}
		})
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	if e := first.Load(); e != nil {
		return nil, *e
	}
	r.grants = grants.Load()
	return &r, nil
}

func postgresWay(pool *pgxpool.Pool, schema string) *way {
	return &way{
		name: "postgres",
		grant: func(ctx context.Context, _ int64) (bool, error) {
			tag, err := pool.Exec(ctx, "UPDATE "+schema+".caps SET used = used + 1 WHERE id = $1 AND used < cap", "summer")
			return tag.RowsAffected() == 1, err
		},
		used: func(ctx context.Context) (int64, error) {
			var n int64
			err := pool.QueryRow(ctx, "SELECT used FROM "+schema+".caps WHERE id = $1", "summer").Scan(&n)
			return n, err
		},
		reset: func(ctx context.Context, limit int64) error {
			_, err := pool.Exec(ctx, "INSERT INTO "+schema+".caps (id, cap) VALUES ('summer', $1) ON CONFLICT (id) DO UPDATE SET cap = $1, used = 0", limit)
			return err
		},
	}
}

func tiersetWay(rdb *redis.Client, prefix string) *way {
	var bg *budget.Budget
	var limit int64
	var gen atomic.Int64
	return &way{
		name: "tierset",
		grant: func(ctx context.Context, i int64) (bool, error) {
			_, err := bg.Reserve(ctx, budget.Request{Order: fmt.Sprint("o", i),
				Lines: []budget.Line{{Promotion: "summer", Uses: 1}}, Hold: time.Hour})
			if errors.Is(err, budget.ErrLimit) {
				return false, nil
			}
			return err == nil, err
		},
		used: func(ctx context.Context) (int64, error) {
			left, err := bg.Remaining(ctx, nil, "summer")
			return limit - left["summer"].Uses, err
		},
		reset: func(ctx context.Context, l int64) error {
			// A budget of its own per case: fresh counters and orders.
			b, err := budget.New(rdb, fmt.Sprintf("cap%d", gen.Add(1)), budget.Options{Prefix: prefix,
				Promotions: []budget.Promotion{{ID: "summer", Caps: []budget.Cap{{Measure: budget.Uses, Limit: l}}}}})
			if err != nil {
				return err
			}
			if _, err := b.Rebuild(ctx, nil); err != nil {
				return err
			}
			bg, limit = b, l
			return nil
		},
	}
}

// The floors, at floorClients concurrent clients, side by side in the
// same run.
//
// The targets, 20× PostgreSQL's grants/s with a p99 of 2 ms, are
// printed, not failing: on the shared 2-core machine, with Reserve
// batched, the 20× was met in some runs and missed in others and the p99
// was missed in all, as was the floor way's, the writes alone
// (docs/benchmarks.md, "A cap against PostgreSQL"). The
// robust floor is what held there in every run with a margin of 2× (4.6×
// the lowest, in a -quick run at load 21, before batching).
const (
	floorClients = 64
	floorRobust  = 2.0                  // tierset grants/s over PostgreSQL's, robust
	floorTarget  = 20.0                 // the same, the target (tight)
	floorP99     = 2 * time.Millisecond // tierset's p99 per reservation (tight)
)

func judge(cfg config, res map[string]map[int]*result) *measure.Floors {
	t := &measure.Floors{}
	rows := []measure.Floor{
		{Name: fmt.Sprintf("reservations/s at %d clients, tierset (Redis) / PostgreSQL one hot row", floorClients), Want: fmt.Sprintf("≥ %.0f×", floorRobust), Kind: measure.Robust},
		{Name: fmt.Sprintf("reservations/s at %d clients, tierset (Redis) / PostgreSQL one hot row (target)", floorClients), Want: fmt.Sprintf("≥ %.0f×", floorTarget), Kind: measure.Tight},
		{Name: fmt.Sprintf("reservation p99 at %d clients, tierset (Redis)", floorClients), Want: fmt.Sprintf("≤ %v", floorP99), Kind: measure.Tight},
	}
	for i := range rows {
		rows[i].Subject = "budget"
	}
	if !slices.Contains(cfg.clients, floorClients) {
		for _, f := range rows {
			t.Skip(f, fmt.Sprintf("-clients has no %d", floorClients))
		}
		return t
	}
	pgR, tsR := res["postgres"][floorClients], res["tierset"][floorClients]
	x := tsR.rate() / pgR.rate()
	f := rows[0]
	f.Value, f.Note = fmt.Sprintf("%.1f×", x), fmt.Sprintf("%.0f against %.0f grants/s", tsR.rate(), pgR.rate())
	t.Judge(f, x >= floorRobust)
	f.Name, f.Want, f.Kind = rows[1].Name, rows[1].Want, rows[1].Kind
	t.Judge(f, x >= floorTarget)
	p99 := tsR.samples.Summary().P99
	f = rows[2]
	f.Value = p99.Round(time.Microsecond).String()
	if fl := res["floor"][floorClients]; fl != nil {
		f.Note = fmt.Sprintf("the floor way (the writes alone, no checks) %v", fl.samples.Summary().P99.Round(time.Microsecond))
	}
	t.Judge(f, p99 <= floorP99)
	return t
}
