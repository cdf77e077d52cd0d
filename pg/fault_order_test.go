package pg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/warm"
)

// gatedSource is Rules whose Load, once it has read its snapshot, waits
// for release: a one-shot warm-up that read the table before the changes
// Watch then applies.
type gatedSource struct {
	r       *Rules
	loaded  chan struct{}
	release chan struct{}
}

func (g gatedSource) Load(ctx context.Context) (warm.Loaded, error) {
	ld, err := g.r.Load(ctx)
	close(g.loaded)
	select {
	case <-g.release:
	case <-ctx.Done():
		return ld, ctx.Err()
	}
	return ld, err
}

// applied is the newest revision Watch has written for each promotion,
// whether that write was a deletion, and the newest revision of a
// deletion Watch has begun (it may be in Redis before Watch reports it).
type applied struct {
	mu       sync.Mutex
	rev      map[string]int64
	gone     map[string]bool
	deleting map[string]int64
	tick     chan struct{}
}

func (a *applied) get(id string) (int64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rev[id], a.gone[id]
}

func (a *applied) deletingSince(id string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.deleting[id]
}

// watchCache is the cache as Watch sees it: each Delete is noted before
// it is sent.
type watchCache struct {
	*cache.Cache
	ap *applied
}

func (w watchCache) Delete(ctx context.Context, id string, revision int64) (cache.RefreshResult, error) {
	w.ap.mu.Lock()
	w.ap.deleting[id] = max(w.ap.deleting[id], revision)
	w.ap.mu.Unlock()
	return w.Cache.Delete(ctx, id, revision)
}

// TestFaultWarmRacesWatch runs a one-shot warm-up (warm.FromSource over
// Rules) against Watch 10 times: each warm-up reads the table, then is
// held while 20 changes (updates, deletes, re-creates) are committed and
// Watch has applied every one of them, then writes what it read. Its
// writes must all be refused as stale or unchanged, Redis must end equal
// to the table, and a reader running throughout must never see a
// revision older than one Watch had applied when the read began.
func TestFaultWarmRacesWatch(t *testing.T) {
	t.Parallel()
	pool, r := testRules(t)
	c := testCache(t)
	const promos, rounds = 20, 10
	base := examplePromotions(t)[0]
	ids := make([]string, promos)
	current := map[string]gradient.Promotion{} // live rows; absent = deleted
	for i := range ids {
		p := base
		p.ID = fmt.Sprintf("race-%02d", i)
		p.Tiers = slices.Clone(base.Tiers)
		ids[i] = p.ID
		current[p.ID] = p
		saveAll(t, pool, r, p)
	}
	ap := &applied{rev: map[string]int64{}, gone: map[string]bool{}, deleting: map[string]int64{}, tick: make(chan struct{}, 1)}
	var watchStale, watchErrs int
	events := make(chan WatchEvent, 16)
	ctx, stop := context.WithCancel(testCtx(t, 3*time.Minute))
	defer stop()
	var bg sync.WaitGroup
	defer bg.Wait()
	defer stop()
	bg.Go(func() {
		_ = Watch(ctx, pool, r, watchCache{c, ap}, WatchOptions{OnEvent: func(e WatchEvent) {
			ap.mu.Lock()
			switch {
			case e.Kind == WatchError:
				watchErrs++
				t.Logf("watch: %v", e.Err)
			case (e.Kind == WatchRefreshed || e.Kind == WatchDeleted) && e.Outcome == cache.Stale:
				watchStale++
			case e.Kind == WatchRefreshed || e.Kind == WatchDeleted:
				if e.Revision > ap.rev[e.ID] {
					ap.rev[e.ID], ap.gone[e.ID] = e.Revision, e.Kind == WatchDeleted
				}
			}
			ap.mu.Unlock()
			select {
			case ap.tick <- struct{}{}:
			default:
			}
			if e.Kind == WatchFullPass || e.Kind == WatchListening {
				select {
				case events <- e:
				default:
				}
			}
		}})
	})
	for e := range events {
		if e.Kind == WatchFullPass {
			if e.Err != nil {
				t.Fatal(e.Err)
			}
			break
		}
	}

	// The reader: for each promotion, the revision Watch had applied
	// before the read, then what Redis holds.
	var reads, older int
	var readerErr error
	var seen []string // the first older reads, described
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for ctx.Err() == nil {
			for _, id := range ids {
				before, goneBefore := ap.get(id)
				in, err := c.Info(ctx, id)
				switch {
				case ctx.Err() != nil:
					return
				case errors.Is(err, cache.ErrNotFound):
					// Absent is older than an applied write, unless Watch
					// had begun a newer deletion by the time of the read.
					if before > 0 && !goneBefore && ap.deletingSince(id) <= before {
						older++
						seen = append(seen, fmt.Sprintf("%s absent after revision %d was applied", id, before))
					}
				case err != nil:
					readerErr = err
					return
				case in.Revision < before:
					older++
					seen = append(seen, fmt.Sprintf("%s at revision %d after %d was applied (deleted %v)", id, in.Revision, before, goneBefore))
				}
				reads++
			}
		}
	}()

	// Rounds: a warm-up held after its read while 20 changes commit and
	// Watch applies them.
	var total warm.Summary
	changes := 0
	for round := range rounds {
		g := gatedSource{r: r, loaded: make(chan struct{}), release: make(chan struct{})}
		opts := warm.Options{Prune: round%2 == 1, MaxPrune: promos}
		type result struct {
			sum warm.Summary
			err error
		}
		warmed := make(chan result, 1)
		go func() {
			sum, err := warm.FromSource(ctx, c, g, opts)
			warmed <- result{sum, err}
		}()
		select {
		case <-g.loaded:
		case <-ctx.Done():
			t.Fatal("the warm-up never read the table")
		}
		want := map[string]int64{} // revision Watch must have applied
		for i, id := range ids {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			p, live := current[id]
			switch {
			case live && (i+round)%4 == 0:
				if _, err := r.Delete(ctx, tx, id); err != nil {
					t.Fatal(err)
				}
				delete(current, id)
			default:
				if !live {
					p = base
					p.ID = id
				}
				p.Tiers = slices.Clone(p.Tiers)
				p.Tiers[0].Reward.Percent = decimal.NewFromInt(int64(1 + (round*promos+i)%90))
				if err := r.Save(ctx, tx, p); err != nil {
					t.Fatal(err)
				}
				current[id] = p
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			changes++
			q, found, err := r.LoadOne(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if _, live := current[id]; found != live || q.Revision == 0 {
				t.Fatalf("%s: LoadOne found %v, revision %d after the change", id, found, q.Revision)
			}
			want[id] = q.Revision
		}
		waitApplied(ctx, t, ap, want)
		close(g.release)
		res := <-warmed
		if res.err != nil {
			t.Fatalf("round %d: warm-up: %v", round, res.err)
		}
		s := res.sum
		t.Logf("round %2d (prune %-5v): warm-up held after its read while %d changes were applied by Watch: stale %d, unchanged %d, added %d, updated %d, deleted %d, pruned %d",
			round, opts.Prune, len(want), len(s.Stale), len(s.Unchanged), len(s.Added), len(s.Updated), len(s.Deleted), len(s.Pruned))
		if len(s.Added)+len(s.Updated)+len(s.Pruned) > 0 {
			t.Fatalf("round %d: the held warm-up wrote over Watch: %+v", round, s)
		}
		total.Stale = append(total.Stale, s.Stale...)
	}
	stop()
	<-readerDone
	if readerErr != nil {
		t.Fatal(readerErr)
	}

	// Redis equals the table.
	cctx := testCtx(t, 30*time.Second)
	mismatch := 0
	for _, id := range ids {
		p, found, err := r.LoadOne(cctx, id)
		if err != nil {
			t.Fatal(err)
		}
		in, err := c.Info(cctx, id)
		switch {
		case !found && errors.Is(err, cache.ErrNotFound):
		case !found || err != nil:
			t.Errorf("%s: row found %v, Redis: %v", id, found, err)
			mismatch++
		case in.Revision != p.Revision || in.Version != version(t, p):
			t.Errorf("%s: Redis holds revision %d version %s, the row is revision %d version %s", id, in.Revision, in.Version, p.Revision, version(t, p))
			mismatch++
		}
	}
	t.Logf("%d committed changes and deletes over %d promotions in %d rounds; the held one-shot warm-ups had %d writes refused as stale; Watch: %d stale, %d errors; reader: %d reads, %d older than applied; Redis differs from the table for %d",
		changes, promos, rounds, len(total.Stale), watchStale, watchErrs, reads, older, mismatch)
	for _, s := range seen[:min(len(seen), 10)] {
		t.Log("older read:", s)
	}
	if older > 0 || mismatch > 0 || len(total.Stale) == 0 || changes != promos*rounds {
		t.Fatalf("older reads %d, mismatches %d, stale refusals %d, changes %d; want 0, 0, > 0, %d", older, mismatch, len(total.Stale), changes, promos*rounds)
	}
}

// waitApplied returns once Watch has applied at least want's revision of
// each promotion.
func waitApplied(ctx context.Context, t *testing.T, ap *applied, want map[string]int64) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		missing := 0
		for id, rev := range want {
			if got, _ := ap.get(id); got < rev {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		select {
		case <-ap.tick:
		case <-deadline:
			t.Fatalf("Watch applied %d of %d changes within 30 s", len(want)-missing, len(want))
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
}
