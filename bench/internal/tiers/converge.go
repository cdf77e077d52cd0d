package tiers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/measure"
)

// The convergence run: a writer refreshes one promotion between two
// versions while readers on two near caches (each with its own
// connections and tracking, as two cart services would be) read it. One
// sample per reader and refresh: how long after the Refresh returned a
// read could still start and be served the old version (0 when none
// did), the window in which the near cache is stale. The time until each
// reader first serves the new version is printed beside it: it adds the
// reader's own pause between reads, which no cache can shorten.
const (
	convergeCaches    = 2
	convergeReaders   = 4 // per cache
	convergeRefreshes = 200
	convergeTimeout   = 5 * time.Second // per refresh: a reader that never converges fails the run
	floorConvergeP99  = 5 * time.Millisecond
	// convergePause stands for a cart handler waiting for its next
	// request: readers that never block keep every P busy, and the runtime
	// then polls the network (where the invalidation waits) only every
	// 10 ms, which measures the scheduler, not the near cache.
	convergePause = 100 * time.Microsecond
)

// Convergence is the result of the convergence run.
type Convergence struct {
	Readers, Refreshes int
	// P50, P99 and Max are of the stale windows, the judged figure.
	P50, P99, Max time.Duration
	// FirstP50, FirstP99 and FirstMax are of the time until each reader
	// first served the new version.
	FirstP50, FirstP99, FirstMax time.Duration
	Reads                        int64
}

// convergeVersions are the two contents the writer alternates: every
// threshold differs, so a read tells them apart by its hit.
func convergeVersions(id string) [2]gradient.Promotion {
	mk := func(first int64) gradient.Promotion {
		p := gradient.Promotion{ID: id, Metric: gradient.Quantity}
		for k := int64(0); k < 5; k++ {
			p.Tiers = append(p.Tiers, gradient.Tier{ID: fmt.Sprintf("t%d", k), Threshold: decimal.NewFromInt(first + 2*k),
				Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(5 + k)}})
		}
		return p
	}
	return [2]gradient.Promotion{mk(2), mk(3)}
}

// measureConvergence runs the convergence run against cfg's server and
// deletes its promotion afterwards.
func measureConvergence(ctx context.Context, cfg Config, lib *cache.Cache) (res *Convergence, err error) {
	id := "converge"
	ps := convergeVersions(id)
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, derr := lib.Delete(cctx, id, 0); derr != nil && err == nil {
			err = fmt.Errorf("bench: converge: delete: %w", derr)
		}
	}()
	rep, err := lib.Refresh(ctx, ps[0])
	if err != nil {
		return nil, fmt.Errorf("bench: converge: refresh: %w", err)
	}
	var caches []*cache.Cache
	for k := 0; k < convergeCaches; k++ {
		c, closeC, err := newNear(cfg.Client, cfg.Prefix)
		if err != nil {
			return nil, err
		}
		defer closeC()
		caches = append(caches, c)
	}

	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	n := convergeCaches * convergeReaders
	serving := make([]string, n)
	at := make([]time.Time, n)
	logs := make([][]measure.Read, n) // each reader's reads, in order
	var reads int64
	var readErr error
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, last := caches[r/convergeReaders], ""
			var log []measure.Read
			defer func() { mu.Lock(); logs[r] = log; mu.Unlock() }()
			for k := 0; rctx.Err() == nil; k++ {
				began := time.Now()
				res, err := c.Match(rctx, cache.QuantityQuery(id, int64(k%12)), cache.MatchOptions{})
				now := time.Now()
				if err != nil && !errors.Is(err, cache.ErrNoTier) {
					if rctx.Err() == nil {
						mu.Lock()
						readErr = errors.Join(readErr, err)
						cond.Broadcast()
						mu.Unlock()
					}
					return
				}
				log = append(log, measure.Read{Began: began, Version: res.Version})
				mu.Lock()
				reads++
				if res.Version != last {
					last, serving[r], at[r] = res.Version, res.Version, now
					cond.Broadcast()
				}
				mu.Unlock()
				time.Sleep(convergePause)
			}
		}()
	}
	defer func() { stop(); wg.Wait() }() // also on an early return

	// waitAll waits until every reader serves v, a read fails or the
	// timeout passes.
	waitAll := func(v string) error {
		timer := time.AfterFunc(convergeTimeout, func() { mu.Lock(); cond.Broadcast(); mu.Unlock() })
		defer timer.Stop()
		start := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for {
			all := true
			for _, s := range serving {
				all = all && s == v
			}
			switch {
			case readErr != nil:
				return fmt.Errorf("bench: converge: read: %w", readErr)
			case all:
				return nil
			case time.Since(start) >= convergeTimeout:
				return fmt.Errorf("bench: converge: not every reader served version %s within %s: %v", v, convergeTimeout, serving)
			}
			cond.Wait()
		}
	}
	if err := waitAll(rep.Promotions[0].Version); err != nil {
		return nil, err
	}
	first := make([]time.Duration, 0, n*convergeRefreshes)
	writes := make([]measure.Write, 0, convergeRefreshes)
	for i := 1; i <= convergeRefreshes; i++ {
		sent := time.Now()
		rep, err := lib.Refresh(ctx, ps[i%2])
		if err != nil {
			return nil, fmt.Errorf("bench: converge: refresh %d: %w", i, err)
		}
		returned := time.Now()
		writes = append(writes, measure.Write{Sent: sent, Returned: returned, Version: rep.Promotions[0].Version})
		if err := waitAll(rep.Promotions[0].Version); err != nil {
			return nil, err
		}
		mu.Lock()
		for _, t := range at {
			first = append(first, max(0, t.Sub(returned)))
		}
		mu.Unlock()
	}
	stop()
	wg.Wait()
	stale := measure.StaleWindows(writes, logs)
	slices.Sort(first)
	slices.Sort(stale)
	q := measure.Quantile
	return &Convergence{Readers: n, Refreshes: convergeRefreshes, Reads: reads,
		P50: q(stale, 0.5), P99: q(stale, 0.99), Max: stale[len(stale)-1],
		FirstP50: q(first, 0.5), FirstP99: q(first, 0.99), FirstMax: first[len(first)-1]}, nil
}

// RunConvergence is the convergence run of the main job, on a backend
// with client tracking (nil, nil where the near cache cannot run).
func RunConvergence(ctx context.Context, cfg Config) (*Convergence, error) {
	if nearSkipped(cfg.Backend) != "" {
		return nil, nil
	}
	lib, err := cache.New(cfg.Client, cache.Options{Prefix: cfg.Prefix, MinorDigits: minorDigits})
	if err != nil {
		return nil, fmt.Errorf("cache.New: %w", err)
	}
	start := time.Now()
	c, err := measureConvergence(ctx, cfg, lib)
	if err == nil {
		fmt.Fprintf(cfg.Log, "converge: %d refreshes × %d readers in %s\n", c.Refreshes, c.Readers, time.Since(start).Round(time.Millisecond))
	}
	return c, err
}

// Print writes the convergence line.
func (c *Convergence) Print(w io.Writer) {
	fmt.Fprintf(w, "\nnear convergence after Refresh returns, %d readers on %d near caches, %d refreshes (%d reads):\n"+
		"  a read started this long after Refresh returned could be served the old version: p50 %s p99 %s max %s\n"+
		"  each reader first served the new version after (its %s pause between reads included): p50 %s p99 %s max %s\n",
		c.Readers, convergeCaches, c.Refreshes, c.Reads, fmtDur(c.P50), fmtDur(c.P99), fmtDur(c.Max),
		convergePause, fmtDur(c.FirstP50), fmtDur(c.FirstP99), fmtDur(c.FirstMax))
}

// ConvergeFloor adds the convergence floor to t: judged where timing is
// (judged, else why), skipped where the near cache cannot run.
func ConvergeFloor(t *measure.Floors, c *Convergence, backend string, judged bool, why string) {
	f := measure.Floor{Subject: "tiers", Kind: measure.Robust,
		Name: fmt.Sprintf("near stale window after Refresh returns, p99 over %d readers on %d caches", convergeCaches*convergeReaders, convergeCaches),
		Want: "≤ " + fmtDur(floorConvergeP99)}
	if why := nearSkipped(backend); why != "" {
		t.JudgeIf(false, why, f, false)
		return
	}
	if c == nil {
		t.Skip(f, "not run")
		return
	}
	f.Value, f.Note = fmtDur(c.P99), fmt.Sprintf("p50 %s, max %s; each reader's first new read (its pause included): p99 %s", fmtDur(c.P50),
		fmtDur(c.Max), fmtDur(c.FirstP99))
	t.JudgeIf(judged, why, f, c.P99 <= floorConvergeP99)
}
