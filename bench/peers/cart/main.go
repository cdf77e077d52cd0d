// Command cart prices the same 20-line carts four ways, side by side in
// one run, and checks every answer against the in-memory oracle
// (gradient.Matcher):
//
//   - sql per line: PostgreSQL, one indexed query per line, the query a
//     team starts from (SELECT … WHERE promotion_id = $1 AND threshold <= $2
//     ORDER BY threshold DESC LIMIT 1), 20 round trips a cart;
//   - sql one query: PostgreSQL, the whole cart in one prepared query
//     (unnest the lines, LEFT JOIN LATERAL the same ORDER BY … LIMIT 1);
//   - tierset: cache.MatchCart on Redis, one round trip a cart;
//   - tierset near: the same with Options.NearCache.
//
// The 20 promotions have 3 to 3000 tiers (log-spaced), half priced by
// amount, half by count, stored by pg.Rules in pg's own schema (its
// UNIQUE (promotion_id, threshold) index serves both SQL forms) and warmed
// into Redis by cache.Refresh. At each of -clients concurrent clients
// every way runs for -d, in -rounds interleaved rounds; the table gives
// carts/s, p50 and p99 per cart, and the CPU seconds per 1,000 carts of
// the PostgreSQL backends serving this program (utime + stime from
// /proc/<pid>/stat of each pooled connection's backend) and of the Redis
// server (INFO used_cpu_user + used_cpu_sys: the whole server, so run it
// on a private one, as go run ./bench -service does).
//
//	cd bench/peers && go run ./cart -redis redis://127.0.0.1:6379/0
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/bench/peers/internal/cli"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/internal/measure"
	"github.com/tierset/tierset/pg"
)

type config struct {
	redisURL   string
	pgURL      string
	clients    []int
	d          time.Duration
	rounds     int
	carts      int
	floorsPath string
	strict     bool
}

func main() {
	var cfg config
	var clients string
	flag.StringVar(&cfg.redisURL, "redis", "redis://127.0.0.1:6379/0", "Redis URL (keys under a unique prefix, deleted at the end)")
	flag.StringVar(&cfg.pgURL, "pg", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL (a schema of its own, dropped at the end)")
	flag.StringVar(&clients, "clients", "1,16,64", "comma-separated concurrent client counts")
	flag.DurationVar(&cfg.d, "d", time.Second, "time per way, client count and round")
	flag.IntVar(&cfg.rounds, "rounds", 2, "interleaved rounds (the table sums them)")
	flag.IntVar(&cfg.carts, "carts", 512, "distinct carts replayed")
	flag.StringVar(&cfg.floorsPath, "floors", "", "also write the floor rows as JSON to this file (go run ./bench -service reads them)")
	flag.BoolVar(&cfg.strict, "strict", false, "exit 1 when a robust floor fails or cannot be judged")
	flag.Parse()
	cfg.clients = cli.PositiveInts("cart", "clients", clients)
	floors, err := run(cfg, os.Stdout)
	cli.Finish("cart", floors, err, cfg.floorsPath, cfg.strict)
}

func run(cfg config, out io.Writer) (*measure.Floors, error) {
	sctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sctx, 10*time.Minute)
	defer cancel()
	id := measure.RunID()
	w, err := newWorkload(cfg.carts, 1)
	if err != nil {
		return nil, err
	}

	maxClients := 1
	for _, c := range cfg.clients {
		maxClients = max(maxClients, c)
	}
	pcfg, err := pgxpool.ParseConfig(cfg.pgURL)
	if err != nil {
		return nil, fmt.Errorf("-pg: %w", err)
	}
	pcfg.MaxConns, pcfg.MinConns = int32(maxClients), int32(maxClients)
	backends := newBackends()
	pcfg.AfterConnect = backends.afterConnect
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL: %w", err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("no PostgreSQL answers: %w", err)
	}
	schema := "tsbench_cart_" + id
	sq, err := loadSQL(ctx, pool, schema, w)
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		if _, err := pool.Exec(cctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			fmt.Fprintln(os.Stderr, "cart: drop schema:", err)
		}
	}()
	if err != nil {
		return nil, err
	}

	opt, err := redis.ParseURL(cfg.redisURL)
	if err != nil {
		return nil, fmt.Errorf("-redis: %w", err)
	}
	opt.PoolSize = max(opt.PoolSize, maxClients)
	opt.ContextTimeoutEnabled = true // cache.New requires it
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	prefix := "tsbench-cart-" + id
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		if _, err := measure.DeleteKeys(cctx, rdb, prefix+":*"); err != nil {
			fmt.Fprintln(os.Stderr, "cart: delete keys:", err)
		}
	}()
	plain, err := cache.New(rdb, cache.Options{Prefix: prefix})
	if err != nil {
		return nil, err
	}
	if _, err := plain.Refresh(ctx, w.promos...); err != nil {
		return nil, fmt.Errorf("warm Redis: %w", err)
	}
	near, err := cache.New(rdb, cache.Options{Prefix: prefix, NearCache: &cache.NearCacheOptions{}})
	if err != nil {
		return nil, err
	}
	defer near.Close()

	ways := []way{
		{name: "sql per line", price: sq.perLine},
		{name: "sql one query", price: sq.oneQuery},
		{name: "tierset", price: tiersetWay(plain)},
		{name: "tierset near", price: tiersetWay(near)},
	}
	// Every way prices every cart once, checked, before any timing (this
	// also fills the near cache and PostgreSQL's buffers).
	for _, wy := range ways {
		for i := range w.carts {
			got, err := wy.price(ctx, w.carts[i])
			if err != nil {
				return nil, fmt.Errorf("%s: cart %d: %w", wy.name, i, err)
			}
			if err := w.check(i, got); err != nil {
				return nil, fmt.Errorf("%s: %w", wy.name, err)
			}
		}
	}
	fmt.Fprintf(out, "cart: %d promotions (%s tiers; amount and count), %d-line carts, %d distinct; every way's answers to all of them matched the oracle before timing\n",
		len(w.promos), w.tierCounts(), len(w.promos), len(w.carts))
	fmt.Fprintf(out, "cart: redis %s, PostgreSQL %s:%d/%s, %d rounds × %v per case, clients %v; load average %s\n",
		opt.Addr, pcfg.ConnConfig.Host, pcfg.ConnConfig.Port, pcfg.ConnConfig.Database, cfg.rounds, cfg.d, cfg.clients, cli.LoadAvg())

	res, err := measureAll(ctx, cfg, w, ways, rdb, backends)
	if err != nil {
		return nil, err
	}
	printTable(out, cfg, ways, res)
	floors := judge(cfg, res)
	fmt.Fprintln(out, "\nfloors (robust: -strict fails on them):")
	floors.Print(out)
	return floors, nil
}

// loadSQL migrates pg's schema and saves the promotions through pg.Rules.
func loadSQL(ctx context.Context, pool *pgxpool.Pool, schema string, w *workload) (*sqlWays, error) {
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return nil, err
	}
	if _, err := pg.Migrate(ctx, pool, schema); err != nil {
		return nil, fmt.Errorf("pg.Migrate: %w", err)
	}
	rules, err := pg.NewRules(pool, schema)
	if err != nil {
		return nil, err
	}
	for _, p := range w.promos {
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return rules.Save(ctx, tx, p) }); err != nil {
			return nil, err
		}
	}
	if _, err := pool.Exec(ctx, "ANALYZE "+pgx.Identifier{schema, "tiers"}.Sanitize()); err != nil {
		return nil, err
	}
	return newSQLWays(pool, schema), nil
}
