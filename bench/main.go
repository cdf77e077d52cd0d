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
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/tierset/tierset"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
)

// config is the parsed command line.
type config struct {
	redisURL    string
	clusterSeed []string
	tiers       []int
	duration    time.Duration
	quick       bool
	conc        []int
	lines       int
	csvFile     string
	chartFile   string
	prefix      string
	strict      bool
	delay       bool
	scaling     bool
	seed        uint64
}

const usageText = `usage: go run ./bench [flags]

Compares the tierset range match with a full scan and with raw go-redis,
single lookups and %d-line carts, for each tier count. With no backend flag
it runs on an embedded miniredis (no setup; those are not Redis numbers).

flags:
`

func main() { os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr)) }

// realMain returns the exit code: 0 ok, 1 failure (or a FAIL under
// -strict), 2 usage. Returning instead of exiting lets the cleanup run.
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
	var tiers, conc, cluster string
	fs.StringVar(&cfg.redisURL, "redis", "", "run on the real Redis at this URL (redis://host:port/db) instead of the embedded miniredis")
	fs.StringVar(&cluster, "cluster", "", "run on the Redis Cluster with these comma-separated seed addresses")
	fs.StringVar(&tiers, "tiers", "3,30,300,3000", "comma-separated tier counts (-quick: 3,3000)")
	fs.DurationVar(&cfg.duration, "duration", 2*time.Second, "measured time per impl per case (-quick: 300ms)")
	fs.BoolVar(&cfg.quick, "quick", false, "CI smoke run: 300ms per case, tiers 3,3000, first concurrency only, unless set explicitly")
	fs.StringVar(&conc, "concurrency", "1", "comma-separated client goroutine counts, e.g. 1,4")
	fs.IntVar(&cfg.lines, "cart", 20, "lines per cart (each on its own promotion)")
	fs.StringVar(&cfg.csvFile, "csv", "", "also write the table rows as CSV to this file")
	fs.StringVar(&cfg.chartFile, "chart", "", "write an SVG chart of p50 vs tier count (range, fullscan, raw) to this file")
	fs.StringVar(&cfg.prefix, "prefix", "", "key prefix (default a unique tierset-bench-<random>); every key under it is deleted at the end")
	fs.BoolVar(&cfg.strict, "strict", false, "exit 1 when a floor FAILs (floors are informational otherwise)")
	fs.BoolVar(&cfg.delay, "delay", false, "also run the delay-queue benchmarks")
	fs.BoolVar(&cfg.scaling, "scaling", false, "with -cluster: sharded delay queue throughput, 1 shard vs 3 shards (1 vs 3 masters)")
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
	if cfg.quick {
		if !set["duration"] {
			cfg.duration = 300 * time.Millisecond
		}
		if !set["tiers"] {
			tiers = "3,3000"
		}
	}
	var err error
	if cfg.tiers, err = parseInts("-tiers", tiers, 1, gradient.MaxTiers); err != nil {
		return cfg, err
	}
	if cfg.conc, err = parseInts("-concurrency", conc, 1, 1024); err != nil {
		return cfg, err
	}
	if cfg.quick && !set["concurrency"] {
		cfg.conc = cfg.conc[:1]
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
	if cfg.redisURL != "" && len(cfg.clusterSeed) > 0 {
		return cfg, errors.New("-redis and -cluster are exclusive")
	}
	if cfg.scaling && len(cfg.clusterSeed) == 0 {
		return cfg, errors.New("-scaling needs -cluster")
	}
	if cfg.prefix == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return cfg, err
		}
		cfg.prefix = "tierset-bench-" + hex.EncodeToString(b[:])
	}
	if strings.ContainsAny(cfg.prefix, "{}*?[] \t\n") {
		return cfg, fmt.Errorf("-prefix %q: no braces, glob characters or spaces", cfg.prefix)
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

// backend is the connected server.
type backend struct {
	name   string
	note   string
	client redis.UniversalClient
	close  func()
}

func connect(ctx context.Context, cfg config) (*backend, error) {
	switch {
	case len(cfg.clusterSeed) > 0:
		// The options the library ships for clusters (1 s slot-map reload).
		c := tierset.NewClusterClient(cfg.clusterSeed...)
		if err := c.Ping(ctx).Err(); err != nil {
			c.Close()
			return nil, fmt.Errorf("cluster %s: %w", strings.Join(cfg.clusterSeed, ","), err)
		}
		var masters atomic.Int32
		if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			masters.Add(1)
			return m.Ping(ctx).Err()
		}); err != nil {
			c.Close()
			return nil, fmt.Errorf("cluster: %w", err)
		}
		version := serverVersion(ctx, c)
		return &backend{name: "cluster", client: c, close: func() { c.Close() },
			note: fmt.Sprintf("Redis Cluster %s, %d masters, seeds %s", version, masters.Load(), strings.Join(cfg.clusterSeed, ","))}, nil
	case cfg.redisURL != "":
		opt, err := redis.ParseURL(cfg.redisURL)
		if err != nil {
			return nil, fmt.Errorf("-redis %q: %w", cfg.redisURL, err)
		}
		opt.ContextTimeoutEnabled = true
		c := redis.NewClient(opt)
		if err := c.Ping(ctx).Err(); err != nil {
			c.Close()
			return nil, fmt.Errorf("redis %s: %w", opt.Addr, err)
		}
		return &backend{name: "redis", client: c, close: func() { c.Close() },
			note: fmt.Sprintf("Redis %s at %s db %d", serverVersion(ctx, c), opt.Addr, opt.DB)}, nil
	default:
		m, err := miniredis.Run()
		if err != nil {
			return nil, fmt.Errorf("embedded miniredis: %w", err)
		}
		c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
		return &backend{name: "miniredis", client: c, close: func() { c.Close(); m.Close() },
			note: "(embedded; numbers are not Redis numbers) miniredis in this process at " + m.Addr()}, nil
	}
}

// serverVersion reads redis_version from INFO server, "?" if unknown.
func serverVersion(ctx context.Context, c redis.Cmdable) string {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}

func runBench(ctx context.Context, cfg config, stdout, stderr io.Writer) (int, error) {
	be, err := connect(ctx, cfg)
	if err != nil {
		return 1, err
	}
	defer be.close()
	fmt.Fprintf(stdout, "backend=%s %s\n", be.name, be.note)

	lib, err := cache.New(be.client, cache.Options{Prefix: cfg.prefix, MinorDigits: minorDigits})
	if err != nil {
		return 1, fmt.Errorf("cache.New: %w", err)
	}
	// Cleanup runs on success, failure and interrupt, with a fresh context.
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		n, err := cleanupPrefix(cctx, be.client, cfg.prefix)
		if err != nil {
			fmt.Fprintf(stderr, "bench: cleanup of %s:*: %v\n", cfg.prefix, err)
			return
		}
		fmt.Fprintf(stderr, "cleanup: deleted %d leftover keys under %s:*\n", n, cfg.prefix)
	}()

	r := &run{Backend: be.name, BackendNote: be.note, GoVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(), Date: time.Now(), Duration: cfg.duration, Lines: cfg.lines}
	t := target{lib: lib, rc: be.client}
	var workloads []*workload
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for _, w := range workloads {
			if err := w.remove(cctx, lib); err != nil {
				fmt.Fprintln(stderr, "bench:", err)
			}
		}
	}()
	for _, n := range cfg.tiers {
		w, err := prepare(ctx, t, cfg, n, stderr)
		if w != nil {
			workloads = append(workloads, w)
		}
		if err != nil {
			return 1, err
		}
	}
	var cases []impl
	for _, w := range workloads {
		cases = append(cases, t.impls(w)...)
	}
	for _, conc := range cfg.conc {
		start := time.Now()
		rows, err := measure(ctx, cases, conc, cfg.duration)
		if err != nil {
			return 1, err
		}
		r.Rows = append(r.Rows, rows...)
		fmt.Fprintf(stderr, "conc=%d: measured %d cases interleaved in %s\n", conc, len(cases), time.Since(start).Round(time.Millisecond))
	}

	r.printHeader(stdout)
	r.printTable(stdout)
	fs := r.floors()
	r.printFloors(stdout, fs)

	if cfg.csvFile != "" {
		if err := writeFile(cfg.csvFile, r.writeCSV); err != nil {
			return 1, err
		}
		fmt.Fprintf(stderr, "wrote %s\n", cfg.csvFile)
	}
	if cfg.chartFile != "" {
		conc := r.concurrencies()[0]
		if err := writeFile(cfg.chartFile, func(w io.Writer) error { return r.writeChart(w, conc) }); err != nil {
			return 1, err
		}
		fmt.Fprintf(stderr, "wrote %s\n", cfg.chartFile)
	}
	if cfg.delay {
		dcfg := delayConfig{Client: be.client, Backend: be.name, Quick: cfg.quick, Duration: cfg.duration, Out: stdout}
		if cfg.csvFile != "" {
			dcfg.CSVDir = filepath.Dir(cfg.csvFile)
		}
		if err := runDelay(ctx, dcfg); err != nil {
			return 1, err
		}
	}
	if cfg.scaling {
		if err := runScaling(ctx, cfg.clusterSeed, cfg.quick, stdout); err != nil {
			return 1, err
		}
	}
	if cfg.strict {
		for _, f := range fs {
			if f.Status == "FAIL" {
				return 1, nil
			}
		}
	}
	return 0, nil
}

// prepare warms one tier count through the library and checks every impl
// against the oracle. The workload is returned whenever something may
// have been written, so the caller deletes it.
func prepare(ctx context.Context, t target, cfg config, tiers int, stderr io.Writer) (*workload, error) {
	w, err := newWorkload(cfg.prefix, tiers, cfg.lines, cfg.seed)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := w.warm(ctx, t.lib); err != nil {
		return w, err
	}
	warmed := time.Since(start)
	if err := t.verify(ctx, w, verifySample); err != nil {
		return w, err
	}
	fmt.Fprintf(stderr, "tiers=%d: warmed %d promotions in %s; every impl agrees with the oracle\n",
		tiers, len(w.promos), warmed.Round(time.Millisecond))
	return w, nil
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
