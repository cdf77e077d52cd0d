package warm_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/warm"
)

// schedSource is a source of truth whose promotions change at random:
// every change (create, update, delete) takes the next value of one
// sequence as its revision, as a database sequence would.
type schedSource struct {
	mu  sync.Mutex
	seq int64
	st  map[string]*schedEntry
}

type schedEntry struct {
	rev   int64
	alive bool
}

func schedPromo(id string, rev int64) gradient.Promotion {
	return gradient.Promotion{ID: id, Metric: gradient.Quantity, MinorDigits: 2, Revision: rev, Tiers: []gradient.Tier{
		{ID: "c" + strconv.FormatInt(rev, 10), Threshold: decimal.NewFromInt(3),
			Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(1 + rev%99)}},
		{ID: "top", Threshold: decimal.NewFromInt(50), Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(5)},
			Gifts: []gradient.Gift{{SKU: "g" + strconv.FormatInt(rev, 10), Qty: 1}}},
	}}
}

// change creates, updates or deletes id and returns nothing: the watcher
// reads the row when it is told, as a LISTEN/NOTIFY watcher does.
func (s *schedSource) change(rng *rand.Rand, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	e := s.st[id]
	if e == nil {
		e = &schedEntry{}
		s.st[id] = e
	}
	e.rev = s.seq
	e.alive = !e.alive || rng.Intn(4) != 0 // alive: 3 in 4 an update, else a delete
}

func (s *schedSource) get(id string) schedEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.st[id]; e != nil {
		return *e
	}
	return schedEntry{}
}

// snapshot is what a one-shot warm reads: every live promotion of ids,
// and (withDeleted) every deletion with its revision.
func (s *schedSource) snapshot(ids []string, withDeleted bool) warm.Loaded {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ld warm.Loaded
	for _, id := range ids {
		e := s.st[id]
		switch {
		case e == nil:
		case e.alive:
			ld.Promotions = append(ld.Promotions, schedPromo(id, e.rev))
		case withDeleted:
			ld.Deleted = append(ld.Deleted, warm.Deletion{ID: id, Revision: e.rev})
		}
	}
	return ld
}

// delayedSource reads the snapshot, then waits: the window in which
// other writers publish newer changes before this warm writes.
type delayedSource struct {
	read func() warm.Loaded
	wait time.Duration
}

func (d delayedSource) Load(ctx context.Context) (warm.Loaded, error) {
	ld := d.read()
	time.Sleep(d.wait)
	return ld, ctx.Err()
}

// runScope shows Warm only this run's promotions, so a prune never
// reaches another run's.
type runScope struct {
	*cache.Cache
	run string
}

func (r runScope) List(ctx context.Context) ([]cache.Info, error) {
	all, err := r.Cache.List(ctx)
	out := all[:0:0]
	for _, in := range all {
		if strings.HasPrefix(in.ID, r.run) {
			out = append(out, in)
		}
	}
	return out, err
}

type staleCounter struct {
	cache.NopObserver
	stale, loadStale atomic.Int64
}

func (o *staleCounter) OnRefresh(_ string, out cache.RefreshOutcome) {
	if out == cache.Stale {
		o.stale.Add(1)
	}
}

func (o *staleCounter) OnLoad(_ string, how cache.LoadOutcome, _ time.Duration) {
	if how == cache.LoadStale {
		o.loadStale.Add(1)
	}
}

// TestFaultOrderedSchedule: in each run, 20 promotions change at random
// (creates, updates, deletes) while five writers race: a watcher that
// applies every change after a random delay (reading the row then, as
// pg.Watch does), two one-shot warm-ups that read a snapshot and write it
// after a random delay (one applies the source's deletions, the other
// prunes by absence), and read-through loads whose Loader reads the
// source and returns after a random delay, from a reader on a near cache.
// When all have returned, every promotion in Redis equals the source's
// latest revision (or is absent where the source deleted it), and two
// near caches (two Caches in this process, each with its own tracking
// connection, standing for two processes) agree with it within
// MaxStaleness. 1,000 runs on one Redis, 100 on a cluster (a tenth of
// each under -race).
func TestFaultOrderedSchedule(t *testing.T) {
	t.Parallel()
	testredis.EachReal(t, func(t *testing.T, b *testredis.Backend) {
		// 1,000 schedules (100 on a cluster) under the soak switch; 50 (10)
		// by default, the same assertions.
		runs := soak.Pick(1000, 50)
		if b.IsCluster() {
			runs = soak.Pick(100, 10)
		}
		if raceEnabled {
			runs /= 10
		}
		schedule(t, b, runs)
	})
}

func schedule(t *testing.T, b *testredis.Backend, runs int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	const nPromos, nChanges, maxStale = 20, 10, 500 * time.Millisecond
	src := &schedSource{st: map[string]*schedEntry{}}
	var loadRng sync.Mutex
	lrng := rand.New(rand.NewSource(1))
	loader := cache.LoaderFunc(func(ctx context.Context, id string) (*gradient.Promotion, error) {
		e := src.get(id)
		loadRng.Lock()
		d := time.Duration(lrng.Intn(1000)) * time.Microsecond
		loadRng.Unlock()
		time.Sleep(d)
		if !e.alive {
			return nil, fmt.Errorf("%q: %w", id, cache.ErrUnknownPromotion)
		}
		p := schedPromo(id, e.rev)
		return &p, nil
	})
	obs := &staleCounter{}
	mk := func(o cache.Options) *cache.Cache {
		// The tombstone must outlive the slowest writer's run (design.md,
		// "Ordering of writers"): a one-shot warm of 20 promotions took
		// more than 5 s on this machine under load 40, wrote the copy it
		// had read after a delete's 5 s tombstone expired, and brought the
		// promotion back. A minute covers any run here.
		o.Prefix, o.Grace, o.TombstoneTTL, o.Observer = b.Prefix, 2*time.Second, time.Minute, obs
		o.Load = cache.LoadOptions{Timeout: time.Second, LeaseTTL: 2 * time.Second, MissTTL: time.Second}
		c, err := cache.New(b.Client, o)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	near := &cache.NearCacheOptions{MaxStaleness: maxStale}
	nearA := mk(cache.Options{NearCache: near, Loader: loader}) // reads through the loader
	nearB := mk(cache.Options{NearCache: near})
	t.Cleanup(func() { _ = nearA.Close(); _ = nearB.Close() })
	watcher, warmA, warmB, plain := mk(cache.Options{}), mk(cache.Options{}), mk(cache.Options{}), mk(cache.Options{})

	var refused atomic.Int64
	start := time.Now()
	for run := 0; run < runs; run++ {
		rng := rand.New(rand.NewSource(int64(run)))
		prefix := "r" + strconv.Itoa(run) + "-"
		ids := make([]string, nPromos)
		for i := range ids {
			ids[i] = prefix + strconv.Itoa(i)
			if rng.Intn(4) != 0 {
				src.change(rng, ids[i]) // most exist before the run starts
			}
		}
		seeds := make([]int64, 5)
		for i := range seeds {
			seeds[i] = rng.Int63()
		}
		errs := make(chan error, 8)
		var wg sync.WaitGroup
		events := make(chan string, nChanges)
		wg.Add(5)
		go func() { // the source changes
			defer wg.Done()
			defer close(events)
			r := rand.New(rand.NewSource(seeds[0]))
			for k := 0; k < nChanges; k++ {
				time.Sleep(time.Duration(r.Intn(400)) * time.Microsecond)
				id := ids[r.Intn(nPromos)]
				src.change(r, id)
				events <- id
			}
		}()
		go func() { // the watcher: every change, after a delay, as the row is then
			defer wg.Done()
			r := rand.New(rand.NewSource(seeds[1]))
			for id := range events {
				time.Sleep(time.Duration(r.Intn(300)) * time.Microsecond)
				e := src.get(id)
				var err error
				if e.alive {
					_, err = watcher.Refresh(ctx, schedPromo(id, e.rev))
				} else {
					_, err = watcher.Delete(ctx, id, e.rev)
				}
				if err != nil {
					errs <- fmt.Errorf("watcher %s: %w", id, err)
				}
			}
		}()
		for k, c := range []*cache.Cache{warmA, warmB} {
			go func() { // two one-shot warm-ups
				defer wg.Done()
				r := rand.New(rand.NewSource(seeds[2+k]))
				time.Sleep(time.Duration(r.Intn(3000)) * time.Microsecond)
				s := delayedSource{read: func() warm.Loaded { return src.snapshot(ids, k == 0) }, wait: time.Duration(r.Intn(2000)) * time.Microsecond}
				sum, err := warm.FromSource(ctx, runScope{c, prefix}, s, warm.Options{Prune: k == 1, MaxPrune: nPromos})
				if err != nil {
					errs <- fmt.Errorf("warm %d: %w", k, err)
				}
				refused.Add(int64(len(sum.Refused)))
			}()
		}
		go func() { // reads, through the loader on a near cache, and on another
			defer wg.Done()
			r := rand.New(rand.NewSource(seeds[4]))
			for k := 0; k < 12; k++ {
				time.Sleep(time.Duration(r.Intn(400)) * time.Microsecond)
				c := nearA
				if k%3 == 2 {
					c = nearB
				}
				// A line's own error (not found, a load lost) is an answer;
				// only a failed call is not.
				if res, err := c.Match(ctx, cache.QuantityQuery(ids[r.Intn(nPromos)], 4), cache.MatchOptions{}); err != nil && err != res.Err {
					errs <- fmt.Errorf("read: %w", err)
				}
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("run %d: %v", run, err)
		}
		returned := time.Now()
		// Redis equals the source's latest.
		for _, id := range ids {
			e := src.get(id)
			in, err := plain.Info(ctx, id)
			switch {
			case !e.alive && !errors.Is(err, cache.ErrNotFound):
				t.Fatalf("run %d: %s deleted (or never created) at revision %d, Redis holds %+v %v", run, id, e.rev, in, err)
			case e.alive && (err != nil || in.Revision != e.rev):
				t.Fatalf("run %d: %s at revision %d, Redis holds revision %d (%v)", run, id, e.rev, in.Revision, err)
			case e.alive:
				p := schedPromo(id, e.rev)
				if v, _ := cache.Version(&p, cache.Options{}); v != in.Version {
					t.Fatalf("run %d: %s revision %d stored with version %s, want %s", run, id, e.rev, in.Version, v)
				}
			}
		}
		// Both near caches agree within MaxStaleness of the writers' return.
		for _, c := range []*cache.Cache{nearA, nearB} {
			for _, id := range ids {
				e := src.get(id)
				var want string
				if e.alive {
					p := schedPromo(id, e.rev)
					want, _ = cache.Version(&p, cache.Options{})
				}
				for {
					r, err := c.Match(ctx, cache.QuantityQuery(id, 4), cache.MatchOptions{})
					got := r.Version
					if errors.Is(err, cache.ErrNotFound) {
						got = ""
					} else if err != nil {
						t.Fatalf("run %d: read %s: %v", run, id, err)
					}
					if got == want {
						break
					}
					if time.Since(returned) > maxStale {
						t.Fatalf("run %d: %s: a near cache answers version %q %v %v after the writers returned, want %q",
							run, id, got, err, time.Since(returned), want)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		}
		for _, id := range ids { // keep List short for the next runs
			if _, err := plain.Delete(ctx, id, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if refused.Load() != 0 {
		t.Fatalf("%d promotions refused", refused.Load())
	}
	t.Logf("%s: %d runs of %d promotions, %d changes each, in %v: %d stale writes or deletes refused, %d read-through fills refused",
		b.Name, runs, nPromos, nChanges, time.Since(start).Round(time.Millisecond), obs.stale.Load(), obs.loadStale.Load())
}
