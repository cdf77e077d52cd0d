// Command tierset-pg warms promotions from PostgreSQL into Redis, as
// `tierset warm -rules FILE` does from a file, and can keep watching.
//
// Usage:
//
//	tierset-pg migrate -source URL [-schema S]
//	tierset-pg warm    -source URL [-schema S] [-redis URL] [-prefix P] [-prune [-max-prune N]] [-dry-run] [-watch [-full-every D]]
//	tierset-pg import  -source URL [-schema S] -rules FILE [-prune [-max-prune N]] [-dry-run]
//
// -redis takes host:port, a redis:// or rediss:// URL, or comma-separated
// cluster seeds, as every tierset command does. import loads a rules file
// (the format `tierset warm -rules` reads) into the tables in one
// transaction, with warm's refusal rules: a promotion gradient refuses is
// reported by ID and not written (exit 1), and -prune deletes rows the
// file lacks only up to -max-prune.
//
// -source is a PostgreSQL URL (postgres://user@host:5432/db); a password
// in it is never printed. warm validates every promotion with gradient: a
// promotion it refuses is reported by ID and skipped, the rest are warmed,
// and the exit code is 1. Every write carries the promotion's revision
// and every deletion (kept as a tombstone row) its own, so a warm-up
// racing a watcher never puts back an older version: what Redis already
// holds newer is reported as stale. -watch then keeps Redis in step with
// every committed change (LISTEN/NOTIFY) until interrupted. Exit codes:
// 0 ok, 1 failure, 2 usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/tierset/tierset"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/internal/redisconf"
	"github.com/tierset/tierset/pg"
	"github.com/tierset/tierset/warm"
)

const usage = `tierset-pg: warm promotions from PostgreSQL into Redis.

Usage:
  tierset-pg migrate -source URL [-schema S]
  tierset-pg warm    -source URL [-schema S] [-redis URL] [-prefix P] [-prune [-max-prune N]] [-dry-run] [-watch [-full-every D]]
  tierset-pg import  -source URL [-schema S] -rules FILE [-prune [-max-prune N]] [-dry-run]

-redis takes host:port, a redis:// or rediss:// URL, or comma-separated
cluster seeds.

Run "tierset-pg <command> -h" for a command's flags.
Exit codes: 0 ok, 1 failure, 2 usage error.
`

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

func main() {
	// go-redis logs dial failures itself; the command says it once.
	redis.SetLogger(silentLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type silentLogger struct{}

func (silentLogger) Printf(context.Context, string, ...any) {}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	var err error
	switch args[0] {
	case "warm":
		err = cmdWarm(ctx, args[1:], stdout, stderr)
	case "migrate":
		err = cmdMigrate(ctx, args[1:], stdout, stderr)
	case "import":
		err = cmdImport(ctx, args[1:], stdout, stderr)
	default:
		err = usagef("unknown command %q", args[0])
	}
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "tierset-pg: %v\n%s", err, usage)
		return 2
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return 0 // interrupted -watch
	}
	fmt.Fprintf(stderr, "tierset-pg: %v\n", err)
	if hint := nextStep(err); hint != "" {
		fmt.Fprintf(stderr, "%s\n", hint)
	}
	return 1
}

// commonFlags are the flags every command takes.
type commonFlags struct {
	fs     *flag.FlagSet
	source *string
	schema *string
}

// commandHelp is each command's -h: its synopsis and what it does.
var commandHelp = map[string]string{
	"migrate": `tierset-pg migrate -source URL [-schema S]

Creates or upgrades the tables tierset reads (promotions, tiers, gifts, their
tombstones and the outbox) in -schema. Safe to run again: it applies only the
migrations the schema lacks, and prints the version it is at.`,
	"warm": `tierset-pg warm -source URL [-schema S] [-redis URL] [-prefix P] [-prune [-max-prune N]] [-dry-run] [-watch [-full-every D]]

Writes every promotion of -schema into Redis (-redis, else $TIERSET_REDIS_URL),
each at its revision, so a warm-up never puts back an older version. With
-watch it then follows the tables (LISTEN/NOTIFY and the outbox) and refreshes
each promotion whose rows change, with a full pass every -full-every.`,
	"import": `tierset-pg import -source URL [-schema S] -rules FILE [-prune [-max-prune N]] [-dry-run]

Loads a rules file (the JSON tierset warm -rules reads) into the tables, in
one transaction. A promotion whose content is already stored is not written,
so its revision stays and no watcher reloads it; re-importing an unchanged
file changes nothing and says so. A file with any problem is refused whole.`,
}

func newFlags(name string, stderr io.Writer) commonFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags:\n", commandHelp[name])
		fs.PrintDefaults()
	}
	return commonFlags{
		fs:     fs,
		source: fs.String("source", "", "PostgreSQL `URL` (postgres://user@host:5432/db); required"),
		schema: fs.String("schema", pg.DefaultSchema, "PostgreSQL `schema` holding the tables"),
	}
}

func (c commonFlags) parse(args []string) error {
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usagef("%v", err)
	}
	if c.fs.NArg() > 0 {
		return usagef("unexpected arguments: %s", strings.Join(c.fs.Args(), " "))
	}
	if *c.source == "" {
		return usagef("-source is required")
	}
	return nil
}

func (c commonFlags) connect(ctx context.Context, stdout io.Writer) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(*c.source)
	if err != nil {
		return nil, usagef("-source %s: %v", pg.RedactURL(*c.source), errors.Unwrap(err))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres %s: %w", pg.RedactURL(*c.source), err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres %s: %w", pg.RedactURL(*c.source), err)
	}
	fmt.Fprintf(stdout, "source: %s schema %s\n", pg.RedactURL(*c.source), *c.schema)
	return pool, nil
}

// rules connects and returns the pool, for the caller to close, and the
// rules in -schema.
func (c commonFlags) rules(ctx context.Context, stdout io.Writer) (*pgxpool.Pool, *pg.Rules, error) {
	pool, err := c.connect(ctx, stdout)
	if err != nil {
		return nil, nil, err
	}
	r, err := pg.NewRules(pool, *c.schema)
	if err != nil {
		pool.Close()
		return nil, nil, usagef("%v", err)
	}
	return pool, r, nil
}

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("migrate", stderr)
	if err := f.parse(args); err != nil {
		return err
	}
	pool, err := f.connect(ctx, stdout)
	if err != nil {
		return err
	}
	defer pool.Close()
	res, err := pg.Migrate(ctx, pool, *f.schema)
	for _, m := range res.Applied {
		fmt.Fprintf(stdout, "applied %s\n", m)
	}
	if err == nil {
		fmt.Fprintf(stdout, "schema %s at version %d\n", *f.schema, res.Current)
	}
	return err
}

func cmdWarm(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("warm", stderr)
	redisURL := f.fs.String("redis", "", "Redis: host:port, a redis:// or rediss:// `URL`, or comma-separated cluster seeds (default $TIERSET_REDIS_URL); required")
	prefix := f.fs.String("prefix", cache.DefaultPrefix, "key `prefix`")
	prune := f.fs.Bool("prune", false, "delete stored promotions that have no row (without it they are only listed)")
	maxPrune := f.fs.Int("max-prune", 0, "with -prune, refuse the whole run (write and delete nothing) when more than `N` promotions would be deleted;\n0: 10% of the stored promotions, at least 1")
	dryRun := f.fs.Bool("dry-run", false, "validate and print what would change; write nothing")
	watch := f.fs.Bool("watch", false, "after warming, keep refreshing each promotion whose rows change, until interrupted")
	fullEvery := f.fs.Duration("full-every", 5*time.Minute, "with -watch: `period` of the full pass that catches missed notifications")
	if err := f.parse(args); err != nil {
		return err
	}
	if *watch && *dryRun {
		return usagef("-watch and -dry-run do not go together")
	}
	if *fullEvery <= 0 {
		return usagef("-full-every %v: must be positive", *fullEvery)
	}
	if *maxPrune < 0 {
		return usagef("-max-prune %d: want ≥ 0", *maxPrune)
	}
	raw, from := redisconf.FromEnv(*redisURL, os.Getenv)
	if raw == "" {
		return usagef("-redis (or $%s) is required: which Redis to warm", redisconf.EnvURL)
	}
	*redisURL = raw
	tgt, err := redisconf.Parse(*redisURL)
	if err != nil {
		return usagef("-redis: %v", err)
	}
	if err := redisconf.Probe(ctx, tgt, 3*time.Second); err != nil {
		return fmt.Errorf("redis %s: %w", redisconf.Redact(*redisURL), err)
	}
	var rc redis.UniversalClient
	if tgt.Single != nil {
		rc = redis.NewClient(tgt.Single)
	} else {
		rc = redis.NewClusterClient(tgt.ClusterOptions(tierset.ClusterOptions()))
	}
	defer rc.Close()
	fmt.Fprintf(stdout, "target: %s prefix %s (from %s)\n", tgt, *prefix, from)
	c, err := cache.New(rc, cache.Options{Prefix: *prefix})
	if err != nil {
		return usagef("%v", err)
	}
	pool, r, err := f.rules(ctx, stdout)
	if err != nil {
		return err
	}
	defer pool.Close()
	opts := warm.Options{Prune: *prune, DryRun: *dryRun, MaxPrune: *maxPrune}
	start := time.Now()
	sum, err := warm.FromSource(ctx, c, r, opts)
	if nextStep(err) != "" {
		return err // nothing was read: a summary of zeros would mislead
	}
	printSummary(stdout, sum, time.Since(start))
	if errors.Is(err, warm.ErrPruneLimit) {
		return fmt.Errorf("%w\nif the rows are right, run again with -max-prune %d", err, len(sum.WouldPrune))
	}
	if !*watch || (err != nil && !errors.Is(err, warm.ErrRefused)) {
		return err
	}
	fmt.Fprintf(stdout, "watching %s for changes (full pass every %v); interrupt to stop\n", *f.schema, *fullEvery)
	return pg.Watch(ctx, pool, r, c, pg.WatchOptions{
		FullEvery: *fullEvery,
		Warm:      warm.Options{Prune: *prune, MaxPrune: *maxPrune},
		OnEvent:   func(e pg.WatchEvent) { printEvent(stdout, e) },
	})
}

func printEvent(w io.Writer, e pg.WatchEvent) {
	ts := e.At.UTC().Format("15:04:05.000")
	switch e.Kind {
	case pg.WatchListening:
		fmt.Fprintf(w, "%s listening (backend pid %d)\n", ts, e.PID)
	case pg.WatchRefreshed:
		fmt.Fprintf(w, "%s %s: %s (version %s, revision %d)\n", ts, e.ID, e.Outcome, e.Version, e.Revision)
	case pg.WatchDeleted:
		fmt.Fprintf(w, "%s %s: row gone: %s (revision %d)\n", ts, e.ID, e.Outcome, e.Revision)
	case pg.WatchSkipped:
		fmt.Fprintf(w, "%s %s: refused, Redis left as it was: %v\n", ts, e.ID, e.Err)
	case pg.WatchFullPass:
		s := e.Summary
		fmt.Fprintf(w, "%s full pass: added %d, updated %d, unchanged %d, deleted %d, pruned %d, stale %d, refused %d\n",
			ts, len(s.Added), len(s.Updated), len(s.Unchanged), len(s.Deleted), len(s.Pruned), len(s.Stale), len(s.Refused))
		if e.Err != nil && !errors.Is(e.Err, warm.ErrRefused) {
			fmt.Fprintf(w, "%s full pass failed: %v\n", ts, e.Err)
		}
	case pg.WatchError:
		fmt.Fprintf(w, "%s error: %v\n", ts, e.Err)
	}
}

// printSummary prints what a warm-up did, also when it failed part-way.
func printSummary(w io.Writer, sum warm.Summary, took time.Duration) {
	if sum.DryRun {
		fmt.Fprintln(w, "dry run: nothing was written; this is what a real run would do")
	}
	list := func(label string, ids []string) {
		if len(ids) == 0 {
			return
		}
		const show = 20
		s := strings.Join(ids[:min(show, len(ids))], ", ")
		if len(ids) > show {
			s += fmt.Sprintf(", … and %d more", len(ids)-show)
		}
		fmt.Fprintf(w, "%s: %s\n", label, s)
	}
	list("added", sum.Added)
	list("updated", sum.Updated)
	list("repaired (same content, keys were missing)", sum.Repaired)
	list("deleted (their rows are gone)", sum.Deleted)
	list("pruned", sum.Pruned)
	list("stale, left as Redis holds them (a newer revision is there)", sum.Stale)
	list("ended, skipped", sum.Ended)
	list("stored but without a row (kept; -prune deletes them)", sum.WouldPrune)
	list("refused (reasons below)", sum.Refused)
	for _, err := range sum.Errors {
		fmt.Fprintf(w, "  %v\n", err)
	}
	fmt.Fprintf(w, "summary: added %d, updated %d, unchanged %d, deleted %d, pruned %d, stale %d, refused %d",
		len(sum.Added), len(sum.Updated), len(sum.Unchanged), len(sum.Deleted), len(sum.Pruned), len(sum.Stale), len(sum.Refused))
	if len(sum.Repaired) > 0 {
		fmt.Fprintf(w, ", repaired %d", len(sum.Repaired))
	}
	if len(sum.Ended) > 0 {
		fmt.Fprintf(w, ", ended %d", len(sum.Ended))
	}
	fmt.Fprintf(w, " (%s)\n", took.Round(time.Millisecond))
}

// nextStep says what to run after err, when the database says what is
// missing: a schema or table that does not exist is one never migrated.
func nextStep(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") { // undefined_table, invalid_schema_name
		return "the schema has no tierset tables: run tierset-pg migrate -source URL -schema S first"
	}
	return ""
}
