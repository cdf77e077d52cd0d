package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/score"
)

// TestCartGroupEdges prices carts at the edges of the grouped read
// (cartgroup.go) and checks every line against the same query matched
// alone, against gradient.Matcher, and the round trips: duplicate lines,
// lines exactly maxGroupSpan apart (read alone) and one less (grouped),
// scores just under the 2^53 ceiling, dense and sparse ladders, Next at
// and above the top tier, bad lines between grouped ones, and
// promotions never stored or deleted.
func TestCartGroupEdges(t *testing.T) {
	t.Parallel()
	const top = score.MaxExact // the ceiling sentinel's score
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		obs := &countingObserver{}
		c := newCache(t, b, Options{Observer: obs})
		for k, tc := range []struct {
			name string
			// ladder nil: the promotion is never stored; deleted: stored,
			// then deleted.
			ladder  []int64
			deleted bool
			vals    []int64
			// bad lines, interleaved with the valid ones.
			bad []Query
		}{
			{name: "duplicate lines", ladder: []int64{1, 2, 5, 10}, vals: []int64{5, 5, 5, 7, 7, 0, 0, 10, 10}},
			{name: "exactly maxGroupSpan apart", ladder: []int64{1, 20, 40}, vals: []int64{0, maxGroupSpan}},
			{name: "maxGroupSpan-1 apart", ladder: []int64{1, 20, 40}, vals: []int64{0, maxGroupSpan - 1}},
			{name: "a chain split at the span", ladder: []int64{3, 30, 36, 70}, vals: []int64{5, 36, 37, 38, 69, 70, 100, 131, 132}},
			{name: "just under the ceiling", ladder: []int64{top - 40, top - 2}, vals: []int64{top - 1, top - 2, top - 3, top - 33, top - 41, top - 1}},
			{name: "dense ladder", ladder: seq(64), vals: []int64{0, 1, 17, 31, 32, 33, 63, 64, 70}},
			{name: "sparse ladder, lines above its only tier", ladder: []int64{1}, vals: []int64{40, 50, 70, 41}},
			{name: "sparse ladder, lines below its only tier", ladder: []int64{100}, vals: []int64{1, 20, 30, 99}},
			{name: "next at and above the top tier", ladder: []int64{1, 2, 5}, vals: []int64{5, 6, 20, 5, 4}},
			{name: "bad lines between grouped ones", ladder: []int64{1, 2, 5, 10}, vals: []int64{3, 6, 9, 12},
				bad: []Query{
					{Promotion: "same", Metric: gradient.Quantity, Value: decimal.NewFromInt(-1)},
					{Promotion: "has space", Metric: gradient.Quantity, Value: decimal.NewFromInt(4)},
					{Promotion: "same", Metric: gradient.Quantity, Value: decimal.RequireFromString("9007199254740992")},
					{Promotion: "same", Metric: 9, Value: decimal.NewFromInt(4)},
				}},
			{name: "never stored", vals: []int64{1, 2, 3, 3}},
			{name: "deleted", ladder: []int64{1, 2, 5}, deleted: true, vals: []int64{1, 2, 3, 3}},
		} {
			id := "edge-" + strconv.Itoa(k)
			var m *gradient.Matcher
			if tc.ladder != nil {
				p := simplePromotion(id, tc.ladder...)
				p.Revision = 1
				if _, err := c.Refresh(ctx, p); err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				var err error
				if m, err = gradient.NewMatcher(p); err != nil {
					t.Fatal(err)
				}
				if tc.deleted {
					if _, err := c.Delete(ctx, id, 2); err != nil {
						t.Fatal(err)
					}
				}
			}
			var qs []Query
			for i, v := range tc.vals {
				qs = append(qs, QuantityQuery(id, v))
				if i < len(tc.bad) {
					bq := tc.bad[i]
					if bq.Promotion != "has space" {
						bq.Promotion = id // the same promotion as its neighbours
					}
					qs = append(qs, bq)
				}
			}
			for _, opt := range matchOpts {
				before := obs.roundTrips.Load()
				rs, err := c.MatchCart(ctx, qs, opt)
				if err != nil {
					t.Fatalf("%s %+v: %v", tc.name, opt, err)
				}
				rts := obs.roundTrips.Load() - before
				want, gifted, absent := int64(1), false, false
				for i, r := range rs {
					alone, _ := c.Match(ctx, qs[i], opt)
					if d := sameResult(r, alone); d != "" {
						t.Fatalf("%s %+v line %d (%+v): %s", tc.name, opt, i, qs[i], d)
					}
					s, qerr := c.encodeQuery(&qs[i])
					switch {
					case qerr != nil:
						if !errors.Is(r.Err, ErrInvalid) {
							t.Fatalf("%s %+v line %d: %v, want ErrInvalid", tc.name, opt, i, r.Err)
						}
					case m == nil || tc.deleted:
						absent = true
						if !errors.Is(r.Err, ErrNotFound) {
							t.Fatalf("%s %+v line %d: %v, want ErrNotFound", tc.name, opt, i, r.Err)
						}
					default:
						if v, d := verdict(m, s, r, opt); v != vOK {
							t.Fatalf("%s %+v line %d (score %d): %s %s", tc.name, opt, i, s, v, d)
						}
						gifted = gifted || r.Tier != nil && r.Tier.HasGifts
					}
				}
				if absent {
					want++ // lines with nothing stored are re-read with their meta key
				}
				if opt.Gifts && gifted {
					want++
				}
				if rts != want {
					t.Fatalf("%s %+v: %d round trips, want %d", tc.name, opt, rts, want)
				}
			}
		}
	})
}

// stepPromotion is revision rev of promotion id: its ladder (thresholds
// from first, step apart, up to 64) and its tier IDs ("r<rev>-<i>") differ
// from one revision to the next, so a line priced from two revisions, or
// from an older one than expected, shows in the IDs it returns.
func stepPromotion(id string, rev, first, step int64) gradient.Promotion {
	var ths []int64
	for th := first; th <= 64; th += step {
		ths = append(ths, th)
	}
	p := simplePromotion(id, ths...)
	p.Revision = rev
	for i := range p.Tiers {
		p.Tiers[i].ID = "r" + strconv.FormatInt(rev, 10) + "-" + strconv.Itoa(i)
	}
	return p
}

// stepRev is the revision in a tier ID of stepPromotion, 0 for nil.
func stepRev(t *testing.T, h *TierHit) int64 {
	t.Helper()
	if h == nil {
		return 0
	}
	r, _, _ := strings.Cut(strings.TrimPrefix(h.ID, "r"), "-")
	n, err := strconv.ParseInt(r, 10, 64)
	if err != nil {
		t.Fatalf("tier ID %q", h.ID)
	}
	return n
}

// interleave is a pipeline hook that runs a write between two parts of
// a pipeline: before the first group read (ZRANGE … LIMIT 0 n with n > 1)
// of the first pipeline it sees, and before each later one (the per-line
// re-read, the gift fetch).
type interleave struct {
	writes []func()
	calls  int
}

func (h *interleave) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *interleave) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *interleave) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if n := cmds[0].Name(); n != "zrange" && n != "eval" && n != "hmget" {
			return next(ctx, cmds) // a new connection's handshake, not a read
		}
		h.calls++
		k := 0
		if h.calls == 1 {
			for k < len(cmds) {
				a := cmds[k].Args()
				if len(a) == groupArgc && a[0] == "zrange" && a[8] != int64(1) {
					break
				}
				k++
			}
			if k > 0 {
				if err := next(ctx, cmds[:k]); err != nil {
					return err
				}
			}
		}
		if h.calls <= len(h.writes) {
			h.writes[h.calls-1]()
		}
		if k == len(cmds) {
			return nil
		}
		return next(ctx, cmds[k:])
	}
}

// TestCartGroupRepublishedMidCart republishes (or deletes) a promotion in
// the middle of a cart's reads: after the lines' own next-tier reads and
// before their group's read, again before the re-read of the lines whose
// two reads then disagree, and then evicts the gift list of the version
// the group read before the gift fetch. Every line must be priced from
// one revision (its tier and next tier alike, as that revision's ladder
// says), never from the revision replaced before its group's read; a hit
// whose gift list is gone keeps its tier with ErrGiftsGone.
func TestCartGroupRepublishedMidCart(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		if _, ok := b.Client.(*redis.Client); !ok {
			t.Skip("the hook splits one pipeline; a Cluster client sends one per master")
		}
		w := newCache(t, b, Options{})
		ladders := map[int64]gradient.Promotion{}
		for _, tc := range []struct {
			name string
			opt  MatchOptions
			vals []int64
			// writes: 2 and 3 publish those revisions, -1 deletes the
			// promotion, -2 evicts revision 2's gift list.
			writes []int64
		}{
			{"next", MatchOptions{Next: true}, []int64{3, 5, 9, 9, 17, 20, 30}, []int64{2, 3}},
			{"next and gifts", MatchOptions{Next: true, Gifts: true}, []int64{1, 2, 12, 13, 25, 31}, []int64{2, 3}},
			{"no next", MatchOptions{}, []int64{4, 6, 8, 10, 33}, []int64{2}},
			{"gifts of the group's version evicted", MatchOptions{Next: true, Gifts: true}, []int64{4, 6, 8, 10, 16, 33}, []int64{2, 3, -2}},
			{"deleted before the group's read", MatchOptions{Next: true, Gifts: true}, []int64{4, 6, 8, 10, 33}, []int64{-1}},
		} {
			id := "mid-" + strings.ReplaceAll(tc.name, " ", "-")
			for rev, shape := range [][2]int64{1: {1, 3}, 2: {2, 2}, 3: {1, 1}} {
				if rev > 0 {
					ladders[int64(rev)] = stepPromotion(id, int64(rev), shape[0], shape[1])
				}
			}
			versions := map[int64]string{}
			publish := func(rev int64) func() {
				return func() {
					var err error
					switch rev {
					case -1:
						_, err = w.Delete(ctx, id, 9)
					case -2:
						err = b.Client.Del(ctx, w.giftsKey(id, versions[2])).Err()
					default:
						var rep RefreshReport
						rep, err = w.Refresh(ctx, ladders[rev])
						if err == nil {
							versions[rev] = rep.Promotions[0].Version
						}
					}
					if err != nil {
						t.Errorf("%s: write %d: %v", tc.name, rev, err)
					}
				}
			}
			publish(1)()
			client := nearClient(t, b)
			c := newCacheOn(t, client, b.Prefix)
			if _, err := c.Match(ctx, QuantityQuery(id, 1), MatchOptions{}); err != nil {
				t.Fatal(err) // the client's first pipeline (its handshake) before the hook
			}
			hook := &interleave{}
			for _, rev := range tc.writes {
				hook.writes = append(hook.writes, publish(rev))
			}
			client.AddHook(hook)
			qs := make([]Query, len(tc.vals))
			for i, v := range tc.vals {
				qs[i] = QuantityQuery(id, v)
			}
			rs, err := c.MatchCart(ctx, qs, tc.opt)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if hook.calls < len(tc.writes) {
				t.Fatalf("%s: the hook saw %d pipelines, want %d", tc.name, hook.calls, len(tc.writes))
			}
			gone := 0
			for i, r := range rs {
				if tc.writes[0] == -1 {
					if !errors.Is(r.Err, ErrNotFound) {
						t.Fatalf("%s line %d: %+v, want ErrNotFound", tc.name, i, r)
					}
					continue
				}
				rev, nr := stepRev(t, r.Tier), stepRev(t, r.Next)
				if rev == 0 {
					rev = nr // no tier reached: the next tier names the revision
				}
				if rev == 0 || nr != 0 && nr != rev {
					t.Fatalf("%s line %d (%d): tier %+v next %+v: no revision, or two", tc.name, i, tc.vals[i], r.Tier, r.Next)
				}
				if rev < 2 {
					t.Fatalf("%s line %d (%d): revision %d, replaced before its group's read", tc.name, i, tc.vals[i], rev)
				}
				m, err := gradient.NewMatcher(ladders[rev])
				if err != nil {
					t.Fatal(err)
				}
				opt := tc.opt
				if errors.Is(r.Err, ErrGiftsGone) {
					if rev != 2 || r.Tier == nil || r.Tier.Gifts != nil {
						t.Fatalf("%s line %d: %+v: gifts gone, but of revision %d", tc.name, i, r, rev)
					}
					gone++
					r.Err, opt.Gifts = nil, false // the hit itself must still be right
				}
				if v, d := verdict(m, tc.vals[i], r, opt); v != vOK {
					t.Fatalf("%s line %d: %s %s (revision %d)", tc.name, i, v, d, rev)
				}
			}
			if slices.Contains(tc.writes, -2) && gone == 0 {
				t.Fatalf("%s: no line of revision 2 lost its gifts", tc.name)
			}
		}
	})
}

// countCmds is a hook counting the commands named name that a client's
// pipelines send.
type countCmds struct {
	name string
	n    atomic.Int64
}

func (h *countCmds) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *countCmds) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *countCmds) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == h.name {
				h.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// TestCartGroupConcurrentRepublish prices carts from several goroutines
// while a writer republishes the promotion (a new ladder each revision),
// with and without a near cache. Every line is priced from one revision
// as that revision's ladder says, and no line answers from a revision
// older than one the same cache returned before the call began.
func TestCartGroupConcurrentRepublish(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		const revs, readers, carts = 25, 3, 30
		type cacheCase struct {
			name string
			c    *Cache
		}
		caches := []cacheCase{{"redis", newCache(t, b, Options{})}}
		if b.Mini == nil {
			caches = append(caches, cacheCase{"near", newNearCache(t, nearClient(t, b), b.Prefix, Options{})})
		}
		for _, cc := range caches {
			id := "conc-" + cc.name
			promos, ladders := stepRevisions(t, id, revs)
			if _, err := cc.c.Refresh(ctx, promos[1]); err != nil {
				t.Fatal(err)
			}
			var seen atomic.Int64 // the highest revision this cache returned
			seen.Store(1)
			errs := make(chan error, readers+1)
			var wg sync.WaitGroup
			wg.Add(readers + 1)
			go func() {
				defer wg.Done()
				for rev := 2; rev <= revs; rev++ {
					if _, err := cc.c.Refresh(ctx, promos[rev]); err != nil {
						errs <- err
						return
					}
				}
			}()
			for g := 0; g < readers; g++ {
				go func(g int) {
					defer wg.Done()
					opt := matchOpts[g%len(matchOpts)]
					opt.Next = true // the next tier names the revision when no tier is reached
					for k := 0; k < carts; k++ {
						qs := make([]Query, 12)
						for i := range qs {
							qs[i] = QuantityQuery(id, int64((k*7+i*5+g)%70))
						}
						floor := seen.Load()
						rs, err := cc.c.MatchCart(ctx, qs, opt)
						if err != nil {
							errs <- err
							return
						}
						for i, r := range rs {
							rev, ok := lineRev(r, revs)
							if !ok {
								errs <- fmt.Errorf("line %d: tier %+v next %+v: no revision, or two", i, r.Tier, r.Next)
								return
							}
							if rev < floor {
								errs <- fmt.Errorf("line %d: revision %d after %d was returned", i, rev, floor)
								return
							}
							if v, d := verdict(ladders[rev], qs[i].Value.IntPart(), r, opt); v != vOK {
								errs <- fmt.Errorf("line %d: %s %s (revision %d)", i, v, d, rev)
								return
							}
							for old := seen.Load(); rev > old && !seen.CompareAndSwap(old, rev); old = seen.Load() {
							}
						}
					}
				}(g)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("%s: %v", cc.name, err)
			}
		}
	})
}

// stepRevisions is revisions 1 to revs of id (stepPromotion; index 0
// unused) and each one's matcher, the oracle of a line priced from it.
func stepRevisions(t *testing.T, id string, revs int64) ([]gradient.Promotion, []*gradient.Matcher) {
	t.Helper()
	promos := make([]gradient.Promotion, revs+1)
	ladders := make([]*gradient.Matcher, revs+1)
	for rev := int64(1); rev <= revs; rev++ {
		promos[rev] = stepPromotion(id, rev, 1+rev%3, 1+rev%4)
		m, err := gradient.NewMatcher(promos[rev])
		if err != nil {
			t.Fatal(err)
		}
		ladders[rev] = m
	}
	return promos, ladders
}

// lineRev is the revision a line priced from stepRevisions names: its
// tier's, else its next tier's; ok is false when it names none in 1 to
// revs, or two.
func lineRev(r Result, revs int64) (rev int64, ok bool) {
	rev = stepRevOf(r.Tier)
	if rev == 0 {
		rev = stepRevOf(r.Next)
	}
	nr := stepRevOf(r.Next)
	return rev, rev > 0 && rev <= revs && (nr == 0 || nr == rev)
}

// stepRevOf is stepRev without a *testing.T, for goroutines: -1 for an
// ID that names no revision.
func stepRevOf(h *TierHit) int64 {
	if h == nil {
		return 0
	}
	r, _, _ := strings.Cut(strings.TrimPrefix(h.ID, "r"), "-")
	n, err := strconv.ParseInt(r, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// TestFaultMemberMovedScore moves tier members to scores their records
// do not say (ZADD behind the cache's back), under lines read alone and
// as one group. No read can see this without WITHSCORES, so a line may
// get a lower tier than its record ladder says, or ErrCorrupt; but never
// a tier its score did not reach, nor a next tier at or below its score
// (a shortfall of zero or less): before evaluate checked the records'
// scores against the query's, a line read alone got both.
func TestFaultMemberMovedScore(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		vals := []int64{0, 4, 6, 9, 11, 14, 19, 21, 25}
		for k, tc := range []struct {
			name     string
			from, to int64
		}{
			{"moved below its threshold", 10, 8},
			{"moved above its threshold", 10, 12},
			{"moved above the group's highest line", 10, 30},
			{"the lowest tier moved to zero", 1, 0},
			{"the top tier moved down two tiers", 20, 7},
		} {
			id := "moved-" + strconv.Itoa(k)
			if _, err := c.Refresh(ctx, simplePromotion(id, 1, 5, 10, 20)); err != nil {
				t.Fatal(err)
			}
			key := c.tiersKey(id)
			at := strconv.FormatInt(tc.from, 10)
			zs, err := b.Client.ZRangeByScore(ctx, key, &redis.ZRangeBy{Min: at, Max: at}).Result()
			if err != nil || len(zs) != 1 {
				t.Fatalf("%s: member at %d: %v %v", tc.name, tc.from, zs, err)
			}
			if err := b.Client.ZAddXX(ctx, key, redis.Z{Score: float64(tc.to), Member: zs[0]}).Err(); err != nil {
				t.Fatal(err)
			}
			qs := make([]Query, len(vals))
			for i, v := range vals {
				qs[i] = QuantityQuery(id, v)
			}
			for _, opt := range matchOpts {
				cart, err := c.MatchCart(ctx, qs, opt)
				if err != nil {
					t.Fatal(err)
				}
				for i, s := range vals {
					alone, _ := c.Match(ctx, qs[i], opt)
					for how, r := range map[string]Result{"cart": cart[i], "alone": alone} {
						switch {
						case r.Err != nil && !errors.Is(r.Err, ErrNoTier) && !errors.Is(r.Err, ErrCorrupt):
							t.Fatalf("%s %+v %s line %d: %v", tc.name, opt, how, s, r.Err)
						case r.Tier != nil && r.Tier.Score > s:
							t.Fatalf("%s %+v %s line %d: tier %s of score %d, not reached", tc.name, opt, how, s, r.Tier.ID, r.Tier.Score)
						case r.Next != nil && (r.Next.Score <= s || r.Shortfall.Sign() <= 0):
							t.Fatalf("%s %+v %s line %d: next %s of score %d, shortfall %s", tc.name, opt, how, s, r.Next.ID, r.Next.Score, r.Shortfall)
						}
					}
				}
			}
		}
	})
}
