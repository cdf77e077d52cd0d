// Package tiers is the tier benchmark of `go run ./bench`: the library's
// range match against the full scan anti-pattern and raw go-redis, single
// lookups and carts, per tier count, timed in interleaved rounds, plus the
// backend-independent wire figures (round trips, bytes read per lookup).
// Every impl's answers are checked against the in-memory oracle
// ([gradient.Matcher]) before anything is measured.
package tiers

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/cache"
)

// Config is what the main job hands the tier benchmark.
type Config struct {
	Client      redis.UniversalClient
	Backend     string // miniredis, redis, cluster
	BackendNote string
	Prefix      string // every key lives under it
	Tiers       []int
	Conc        []int
	Duration    time.Duration // per impl per case
	Lines       int           // per cart
	Seed        uint64
	Log         io.Writer // progress lines
}

// Run warms one workload per tier count through the library, checks every
// impl against the oracle, measures the wire figures and then the timings,
// and deletes the workloads (also on error or cancel).
func Run(ctx context.Context, cfg Config) (res *Result, err error) {
	lib, err := cache.New(cfg.Client, cache.Options{Prefix: cfg.Prefix, MinorDigits: minorDigits})
	if err != nil {
		return nil, fmt.Errorf("cache.New: %w", err)
	}
	r := &Result{Backend: cfg.Backend, BackendNote: cfg.BackendNote, GoVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(), Date: time.Now(), Duration: cfg.Duration, Lines: cfg.Lines}
	t := target{lib: lib, rc: cfg.Client}
	if why := nearSkipped(cfg.Backend); why != "" {
		fmt.Fprintf(cfg.Log, "%s, %s: skipped on %s: %s\n", implNear, implNearCart, cfg.Backend, why)
	} else {
		near, closeNear, err := newNear(cfg.Client, cfg.Prefix)
		if err != nil {
			return nil, err
		}
		defer closeNear()
		t.near = near
	}
	r.NearSkipped = nearSkipped(cfg.Backend)
	var workloads []*workload
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		defer cancel()
		for _, w := range workloads {
			if rerr := w.remove(cctx, lib); rerr != nil && err == nil {
				err = rerr
			}
		}
	}()
	for _, n := range cfg.Tiers {
		w, err := prepare(ctx, t, cfg, n)
		if w != nil {
			workloads = append(workloads, w)
		}
		if err != nil {
			return nil, err
		}
	}
	start := time.Now()
	for _, w := range workloads {
		row, err := measureWire(ctx, cfg, w)
		if err != nil {
			return nil, fmt.Errorf("tiers=%d wire: %w", w.tiers, err)
		}
		r.Wire = append(r.Wire, row)
	}
	fmt.Fprintf(cfg.Log, "wire: round trips and bytes per lookup measured in %s\n", time.Since(start).Round(time.Millisecond))
	var cases []impl
	for _, w := range workloads {
		cases = append(cases, t.impls(w)...)
	}
	for _, conc := range cfg.Conc {
		start := time.Now()
		rows, err := measureRounds(ctx, cases, conc, cfg.Duration)
		if err != nil {
			return nil, err
		}
		r.Rows = append(r.Rows, rows...)
		fmt.Fprintf(cfg.Log, "conc=%d: measured %d cases interleaved in %s\n", conc, len(cases), time.Since(start).Round(time.Millisecond))
	}
	var lo, hi *impl
	for i := range cases {
		switch c := &cases[i]; {
		case c.name == implRange && c.tiers == 3:
			lo = c
		case c.name == implRange && c.tiers == 3000:
			hi = c
		}
	}
	if lo != nil && hi != nil {
		conc := slices.Max(cfg.Conc)
		if r.Flat, err = measurePaired(ctx, *lo, *hi, conc, 2*cfg.Duration); err != nil {
			return nil, err
		}
		fmt.Fprintf(cfg.Log, "flatness: range at 3 and 3000 tiers, paired op by op, %d clients: p50 %s vs %s over %d ops\n",
			conc, fmtDur(r.Flat.LoP50), fmtDur(r.Flat.HiP50), r.Flat.Ops)
	}
	return r, nil
}

// prepare warms one tier count through the library and checks every impl
// against the oracle. The workload is returned whenever something may
// have been written, so the caller deletes it.
func prepare(ctx context.Context, t target, cfg Config, tiers int) (*workload, error) {
	w, err := newWorkload(cfg.Prefix, tiers, cfg.Lines, cfg.Seed)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := w.warm(ctx, t.lib); err != nil {
		return w, err
	}
	warmed := time.Since(start)
	if t.near != nil {
		// Before the oracle check, so it checks answers from memory.
		if err := t.nearReady(ctx, w); err != nil {
			return w, err
		}
	}
	if err := t.verify(ctx, w, verifySample); err != nil {
		return w, err
	}
	fmt.Fprintf(cfg.Log, "tiers=%d: warmed %d promotions in %s; every impl agrees with the oracle\n",
		tiers, len(w.promos), warmed.Round(time.Millisecond))
	return w, nil
}
