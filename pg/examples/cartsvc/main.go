// Command cartsvc is an example cart-pricing service on tierset: an HTTP
// JSON API whose promotions live in PostgreSQL (package pg) and are served
// from Redis (package cache), kept in step by pg.Watch.
//
//	POST /v1/cart/price  {"lines": [{"promotion": "qty-3-5-10", "quantity": 7, "base": "70.00"}, ...]}
//	GET  /healthz        the process is up
//	GET  /readyz         Redis answers (503 otherwise)
//
// With -budget NAME (a budget published under -prefix, see
// budget.Publish) a request names its "customer" and each line whose
// promotion the budget caps says whether it can still be given
// ("budget": {"available": ...}); one that cannot is priced without its
// discount, so the price shown is the one a reservation honours.
//
// Run `go run ./examples/cartsvc -demo` (from the pg module) to seed
// PostgreSQL, warm Redis, start the service and price a few carts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/tierset/tierset"
	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/redisconf"
	"github.com/tierset/tierset/pg"
	"github.com/tierset/tierset/warm"
)

type config struct {
	addr, source, schema, redisURL, prefix string
	budget                                 string // a published budget's name: lines say what it allows
	minorDigits                            int
	demo                                   bool
}

func main() {
	var cfg config
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "listen `address`")
	flag.StringVar(&cfg.source, "source", os.Getenv("TIERSET_PG_URL"), "PostgreSQL `URL` holding the promotions (default $TIERSET_PG_URL); required")
	flag.StringVar(&cfg.schema, "schema", pg.DefaultSchema, "PostgreSQL `schema`")
	flag.StringVar(&cfg.redisURL, "redis", os.Getenv(redisconf.EnvURL), "Redis: host:port, a redis:// or rediss:// `URL`, or comma-separated cluster seeds (default $TIERSET_REDIS_URL); required")
	flag.StringVar(&cfg.prefix, "prefix", cache.DefaultPrefix, "Redis key `prefix`")
	flag.IntVar(&cfg.minorDigits, "minor-digits", 0, "the currency's minor-unit `digits`: 0 for the default 2 (USD/CNY), -1 for none (JPY), 1..9")
	flag.StringVar(&cfg.budget, "budget", "", "the `name` of a budget (published under -prefix, see budget.Publish): each line then says whether its promotion can still be given to the request's customer")
	flag.BoolVar(&cfg.demo, "demo", false, "seed a demo schema, warm, serve on a free port, price a few carts, clean up and exit")
	flag.Parse()
	// No default server: a service that silently priced carts from
	// whatever listens on 127.0.0.1:6379 db 0 is an incident waiting.
	if cfg.source == "" || cfg.redisURL == "" {
		log.Fatalf("cartsvc: -source (or $TIERSET_PG_URL) and -redis (or $%s) are required", redisconf.EnvURL)
	}
	redis.SetLogger(silentLogger{}) // the service reports Redis errors itself
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if cfg.demo {
		err = runDemo(ctx, cfg, os.Stdout)
	} else {
		err = serve(ctx, cfg, &lockedWriter{w: os.Stdout})
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Fatalf("cartsvc: %v", err)
	}
}

// silentLogger drops go-redis's internal log lines.
type silentLogger struct{}

func (silentLogger) Printf(context.Context, string, ...any) {}

// service is the running parts: the pool, the Redis client, the cache
// and the watcher keeping it in step with the database.
type service struct {
	pool  *pgxpool.Pool
	redis redis.UniversalClient
	cache *cache.Cache
	rules *pg.Rules
	// budget is the -budget named, nil without one.
	budget *budget.Budget
}

func open(ctx context.Context, cfg config, log io.Writer) (*service, error) {
	pool, err := pgxpool.New(ctx, cfg.source)
	if err != nil {
		return nil, fmt.Errorf("postgres %s: %w", pg.RedactURL(cfg.source), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres %s: %w", pg.RedactURL(cfg.source), err)
	}
	tgt, err := redisconf.Parse(cfg.redisURL)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("-redis: %w", err)
	}
	if err := redisconf.Probe(ctx, tgt, 3*time.Second); err != nil {
		pool.Close()
		return nil, fmt.Errorf("redis %s: %w", redisconf.Redact(cfg.redisURL), err)
	}
	var rc redis.UniversalClient
	if tgt.Single != nil {
		rc = redis.NewClient(tgt.Single)
	} else {
		rc = redis.NewClusterClient(tgt.ClusterOptions(tierset.ClusterOptions()))
	}
	r, err := pg.NewRules(pool, cfg.schema)
	var c *cache.Cache
	if err == nil {
		// The cart path a sale day needs: ladders held in process (kept
		// true by client tracking), and a promotion Redis lost loaded once
		// from the database instead of by every cart.
		c, err = cache.New(rc, cache.Options{Prefix: cfg.prefix, MinorDigits: cfg.minorDigits,
			NearCache: &cache.NearCacheOptions{}, Loader: rulesLoader(r)})
	}
	if err != nil {
		pool.Close()
		_ = rc.Close()
		return nil, err
	}
	var bg *budget.Budget
	if cfg.budget != "" {
		if bg, err = budget.Open(ctx, rc, cfg.budget, budget.Options{Prefix: cfg.prefix}); err != nil {
			_ = c.Close()
			pool.Close()
			_ = rc.Close()
			return nil, fmt.Errorf("-budget: %w", err)
		}
		fmt.Fprintf(log, "cartsvc: budget %s caps %d promotions\n", cfg.budget, len(bg.Promotions()))
	}
	fmt.Fprintf(log, "cartsvc: promotions from %s schema %s, served from %s prefix %s\n",
		pg.RedactURL(cfg.source), cfg.schema, tgt, cfg.prefix)
	return &service{pool: pool, redis: rc, cache: c, rules: r, budget: bg}, nil
}

// rulesLoader reads one promotion from the database for cache.Loader.
func rulesLoader(r *pg.Rules) cache.Loader {
	return cache.LoaderFunc(func(ctx context.Context, id string) (*gradient.Promotion, error) {
		p, found, err := r.LoadOne(ctx, id)
		switch {
		case err != nil:
			return nil, err
		case !found:
			return nil, cache.ErrUnknownPromotion
		}
		return &p, nil
	})
}

func (s *service) close() {
	_ = s.cache.Close()
	_ = s.redis.Close()
	s.pool.Close()
}

// lockedWriter lets the watcher, the server and the demo share one log.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// start warms Redis from the database, starts the watcher and serves on
// l until ctx ends; done yields the server's error once the watcher has
// stopped too. log must be safe for concurrent writes.
func (s *service) start(ctx context.Context, l net.Listener, cfg config, log io.Writer) (done <-chan error, err error) {
	sum, err := warm.FromSource(ctx, s.cache, s.rules, warm.Options{})
	if err != nil && !errors.Is(err, warm.ErrRefused) {
		return nil, fmt.Errorf("warm: %w", err)
	}
	fmt.Fprintf(log, "cartsvc: warmed: added %d, updated %d, unchanged %d, refused %d\n",
		len(sum.Added), len(sum.Updated), len(sum.Unchanged), len(sum.Refused))
	for _, e := range sum.Errors {
		fmt.Fprintf(log, "cartsvc: refused: %v\n", e)
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		_ = pg.Watch(ctx, s.pool, s.rules, s.cache, pg.WatchOptions{OnEvent: func(e pg.WatchEvent) {
			switch e.Kind {
			case pg.WatchRefreshed, pg.WatchDeleted, pg.WatchSkipped, pg.WatchError:
				fmt.Fprintf(log, "cartsvc: watch: %s %s %v\n", e.Kind, e.ID, errOrEmpty(e.Err))
			}
		}})
	}()
	h := newServer(s.cache, serverOptions{
		MinorDigits: cfg.minorDigits,
		Ready:       func(ctx context.Context) error { return s.redis.Ping(ctx).Err() },
		Budget:      s.offerer(),
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	ch := make(chan error, 1)
	go func() {
		err := srv.Serve(l)
		<-watched // done means nothing of the service runs any more
		ch <- err
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(log, "cartsvc: serving on http://%s\n", l.Addr())
	return ch, nil
}

// offerer is the service's budget as a server option: nil without one
// (a nil *budget.Budget in the interface would not be nil).
func (s *service) offerer() Offerer {
	if s.budget == nil {
		return nil
	}
	return s.budget
}

func errOrEmpty(err error) any {
	if err == nil {
		return ""
	}
	return err
}

func serve(ctx context.Context, cfg config, log io.Writer) error {
	s, err := open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer s.close()
	l, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	done, err := s.start(ctx, l, cfg, log)
	if err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
