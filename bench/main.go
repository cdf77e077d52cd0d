package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tierset/tierset/bench/internal/budgetbench"
	"github.com/tierset/tierset/bench/internal/delaybench"
	"github.com/tierset/tierset/bench/internal/storm"
	"github.com/tierset/tierset/bench/internal/tiers"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/internal/measure"
)

// config is the parsed command line.
type config struct {
	redisURL    string
	clusterSeed []string
	mini        bool
	tiers       []int
	duration    time.Duration
	quick       bool
	full        bool
	conc        []int
	lines       int
	csvFile     string
	chartFile   string
	prefix      string
	strict      bool
	delay       bool
	budget      bool
	peers       bool
	service     bool
	scaling     bool
	storm       bool
	bigcart     bool
	seed        uint64
}

const usageText = `usage: go run ./bench [flags]

The tier match against a full scan and raw go-redis (single lookups and
%d-line carts, per tier count), the delay queue's memory, rates and round
trips, and one table of floors. With no backend flag it starts a private
redis-server on a free loopback port when one is on PATH (no persistence,
stopped at exit), else it runs on an embedded miniredis, where only the
backend-independent floors (round trips, bytes per lookup) are judged.

flags:
`

func main() {
	if storm.IsChild() {
		os.Exit(storm.ChildMain())
	}
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// realMain returns the exit code: 0 ok, 1 failure (or a robust floor that
// failed under -strict), 2 usage. Returning instead of exiting lets the
// cleanup run.
func realMain(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := runBench(ctx, cfg, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	return code
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	var tierList, conc, cluster string
	fs.StringVar(&cfg.redisURL, "redis", "", "run on the Redis at this URL (redis://host:port/db) instead of a private redis-server")
	fs.StringVar(&cluster, "cluster", "", "run on the Redis Cluster with these comma-separated seed addresses")
	fs.BoolVar(&cfg.mini, "miniredis", false, "run on the embedded miniredis even when redis-server is on PATH")
	fs.StringVar(&tierList, "tiers", "3,300,3000", "comma-separated tier counts (-quick: 3,3000; -full: 3,30,300,3000)")
	fs.DurationVar(&cfg.duration, "duration", 150*time.Millisecond, "measured time per impl per case (-full: 2s)")
	fs.BoolVar(&cfg.quick, "quick", false, "smoke run: tiers 3,3000 and smaller delay counts, unless set explicitly")
	fs.BoolVar(&cfg.full, "full", false, "the full matrix: tiers 3,30,300,3000, 2s per case, concurrency 1,4, every delay phase (-delay)")
	fs.StringVar(&conc, "concurrency", "1,4", "comma-separated client goroutine counts; the Redis-path floors are judged at the highest")
	fs.IntVar(&cfg.lines, "cart", 20, "lines per cart (each on its own promotion)")
	fs.StringVar(&cfg.csvFile, "csv", "", "also write the tier rows as CSV to this file (the delay rows go to bench-delay.csv beside it)")
	fs.StringVar(&cfg.chartFile, "chart", "", "write an SVG chart of p50 vs tier count (range, fullscan, raw, near) to this file")
	fs.StringVar(&cfg.prefix, "prefix", "", "key prefix (default a unique tierset-bench-<random>); every key under it is deleted at the end")
	fs.BoolVar(&cfg.strict, "strict", false, "exit 1 when a robust floor fails or cannot be judged (tight floors never fail a run)")
	fs.BoolVar(&cfg.budget, "budget", false, "the budget phase: memory per hold and per counter, reservations/s at 1, 16, 64 clients, the cost of WAIT (Options.Replicas)")
	fs.BoolVar(&cfg.delay, "delay", false, "every delay phase: also one-by-one and concurrent enqueue, take+ack at concurrency 100, lateness at 1k and 10k tasks/s")
	fs.BoolVar(&cfg.peers, "peers", false, "also run bench/peers (tierset vs asynq, BullMQ and River, a nested module; needs the go command and a real Redis) and judge its floors")
	fs.BoolVar(&cfg.service, "service", false, "also run bench/peers/cart (carts priced by PostgreSQL and by tierset) and bench/peers/budgetpg (a promotion cap in one PostgreSQL row and in package budget); needs the go command, a real Redis and PostgreSQL; judge their floors")
	fs.BoolVar(&cfg.scaling, "scaling", false, "with -cluster: sharded delay queue throughput, 1 shard vs 3 shards (1 vs 3 masters)")
	fs.BoolVar(&cfg.storm, "storm", false, "run only the sale storm (8 client processes, the bench re-executed, over 10,000 promotions: hot edits, then a republish of all) and the big carts; needs a single real Redis")
	fs.BoolVar(&cfg.bigcart, "bigcart", false, "run only the big carts of -storm (150- and 20-line carts over 100 promotions: 16 clients in a closed loop, Redis path and near cache; then one client alone and 16 clients in an open loop at 10, 25 and 50% of that throughput, on the Redis path beside plain go-redis sending the same commands, and one client through the near cache); needs a single real Redis")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the generated promotions and query values")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), usageText, 20)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.quick && cfg.full {
		return cfg, errors.New("-quick and -full are exclusive")
	}
	if cfg.quick {
		if !set["tiers"] {
			tierList = "3,3000"
		}
	}
	if cfg.full {
		cfg.delay = true
		if !set["duration"] {
			cfg.duration = 2 * time.Second
		}
		if !set["tiers"] {
			tierList = "3,30,300,3000"
		}
	}
	var err error
	if cfg.tiers, err = parseInts("-tiers", tierList, 1, gradient.MaxTiers); err != nil {
		return cfg, err
	}
	if cfg.conc, err = parseInts("-concurrency", conc, 1, 1024); err != nil {
		return cfg, err
	}
	if cfg.duration <= 0 {
		return cfg, fmt.Errorf("-duration %s must be > 0", cfg.duration)
	}
	if cfg.lines < 1 || cfg.lines > 1000 {
		return cfg, fmt.Errorf("-cart %d must be in 1..1000", cfg.lines)
	}
	if cluster != "" {
		for _, a := range strings.Split(cluster, ",") {
			if a = strings.TrimSpace(a); a != "" {
				cfg.clusterSeed = append(cfg.clusterSeed, a)
			}
		}
	}
	backends := 0
	for _, on := range []bool{cfg.redisURL != "", len(cfg.clusterSeed) > 0, cfg.mini} {
		if on {
			backends++
		}
	}
	if backends > 1 {
		return cfg, errors.New("-redis, -cluster and -miniredis are exclusive")
	}
	if cfg.scaling && len(cfg.clusterSeed) == 0 {
		return cfg, errors.New("-scaling needs -cluster")
	}
	if cfg.bigcart && (cfg.mini || len(cfg.clusterSeed) > 0) {
		return cfg, errors.New("-bigcart needs a single real Redis: not with -miniredis or -cluster")
	}
	if cfg.storm && (cfg.mini || len(cfg.clusterSeed) > 0) {
		return cfg, errors.New("-storm needs a single real Redis (-redis or the private redis-server)")
	}
	if (cfg.peers || cfg.service) && (cfg.mini || len(cfg.clusterSeed) > 0) {
		return cfg, errors.New("-peers and -service need a single real Redis (-redis or the private redis-server)")
	}
	if cfg.prefix == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return cfg, err
		}
		cfg.prefix = "tierset-bench-" + hex.EncodeToString(b[:])
	}
	if err := keyname.Check(cfg.prefix); err != nil {
		return cfg, fmt.Errorf("-prefix: %w", err)
	}
	return cfg, nil
}

func parseInts(name, s string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("%s %q: want comma-separated integers in %d..%d", name, s, lo, hi)
		}
		out = append(out, n)
	}
	return out, nil
}

func runBench(ctx context.Context, cfg config, stdout, stderr io.Writer) (code int, err error) {
	be, err := connect(ctx, cfg)
	if err != nil {
		return 1, err
	}
	defer be.close()
	fmt.Fprintf(stdout, "backend: %s\n", be.note)
	if be.private != nil {
		fmt.Fprintf(stderr, "started %s for this run (dir %s); it is killed at exit\n", be.private.Addr(), be.private.Dir())
	}
	// Cleanup runs on success, failure and interrupt, with a fresh context.
	defer func() {
		if be.private != nil {
			return // the whole server goes
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		defer cancel()
		n, err := measure.DeleteKeys(cctx, be.client, cfg.prefix+":*")
		if err != nil {
			fmt.Fprintf(stderr, "bench: cleanup of %s:*: %v\n", cfg.prefix, err)
			return
		}
		fmt.Fprintf(stderr, "cleanup: deleted %d leftover keys under %s:*\n", n, cfg.prefix)
	}()

	if cfg.bigcart && !cfg.storm {
		if be.url == "" {
			return 1, errors.New("-bigcart needs a real Redis: none on PATH and no -redis")
		}
		if err := storm.BigCarts(ctx, be.url, cfg.prefix, cfg.quick, stdout); err != nil {
			return 1, err
		}
		return 0, nil
	}
	if cfg.storm {
		if be.url == "" {
			return 1, errors.New("-storm needs a real Redis: none on PATH and no -redis")
		}
		scfg := storm.Config{URL: be.url, Prefix: cfg.prefix, Quick: cfg.quick, Seed: cfg.seed, Out: stdout, Log: stderr}
		if err := storm.Run(ctx, scfg); err != nil {
			return 1, err
		}
		if err := storm.BigCarts(ctx, be.url, cfg.prefix, cfg.quick, stdout); err != nil {
			return 1, err
		}
		return 0, nil
	}

	// Timing floors are defined on one Redis: miniredis is not Redis, and a
	// cluster's masters and replicas share this machine's cores with the bench.
	timed, why := be.name == "redis", measure.NotRedis
	if be.name == "cluster" {
		why = "defined on a single Redis"
	}
	var floors measure.Floors
	tcfg := tiers.Config{Client: be.client, Backend: be.name, BackendNote: be.note, Prefix: cfg.prefix,
		Tiers: cfg.tiers, Conc: cfg.conc, Duration: cfg.duration, Lines: cfg.lines, Seed: cfg.seed, Log: stderr}
	res, err := tiers.Run(ctx, tcfg)
	if err != nil {
		return 1, err
	}
	conv, err := tiers.RunConvergence(ctx, tcfg)
	if err != nil {
		return 1, err
	}
	fmt.Fprintln(stdout)
	res.PrintHeader(stdout)
	res.PrintTable(stdout)
	if conv != nil {
		conv.Print(stdout)
	}
	res.AllFloors(&floors, timed, why)
	tiers.ConvergeFloor(&floors, conv, be.name, timed, why)
	if cfg.csvFile != "" {
		if err := writeFile(cfg.csvFile, res.WriteCSV); err != nil {
			return 1, err
		}
		fmt.Fprintf(stderr, "wrote %s\n", cfg.csvFile)
	}
	if cfg.chartFile != "" {
		if err := writeFile(cfg.chartFile, func(w io.Writer) error { return res.WriteChart(w, cfg.conc[0]) }); err != nil {
			return 1, err
		}
		fmt.Fprintf(stderr, "wrote %s\n", cfg.chartFile)
	}

	dcfg := delaybench.Config{Client: be.client, Backend: be.name, Quick: cfg.quick, Full: cfg.delay, Out: stdout}
	if cfg.csvFile != "" {
		dcfg.CSVPath = filepath.Join(filepath.Dir(cfg.csvFile), "bench-delay.csv")
	}
	if err := delaybench.Run(ctx, dcfg, &floors); err != nil {
		return 1, err
	}
	if cfg.budget {
		if err := budgetbench.Run(ctx, budgetbench.Config{Client: be.client, Backend: be.name, Quick: cfg.quick, Out: stdout}); err != nil {
			return 1, err
		}
	}
	if cfg.peers {
		rows, err := runPeers(ctx, be.url, cfg.quick, cfg.full, stdout, stderr)
		if err != nil {
			return 1, err
		}
		floors.Add(rows...)
	}
	if cfg.service {
		rows, err := runService(ctx, be.url, cfg.quick, stdout, stderr)
		if err != nil {
			return 1, err
		}
		floors.Add(rows...)
	}
	if cfg.scaling {
		if err := delaybench.RunScaling(ctx, cfg.clusterSeed, cfg.quick, stdout); err != nil {
			return 1, err
		}
	}

	fmt.Fprintf(stdout, "\nfloors on %s (robust: -strict fails on them; tight: within this machine's noise, printed only):\n", be.name)
	floors.Print(stdout)
	failed := floors.Failures(cfg.strict)
	label := "FAILED"
	if !cfg.strict {
		label = "failed (without -strict the exit code stays 0)"
	}
	for _, f := range failed {
		fmt.Fprintf(stdout, "%s: %s %s: want %s, measured %s %s\n", label, f.Subject, f.Name, f.Want, f.Value, f.Why)
	}
	if cfg.strict && len(failed) > 0 {
		return 1, nil
	}
	return 0, nil
}

func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	return f.Close()
}
