package cache

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

// nearClient returns a client of its own (own pool) on b's server, so a
// near cache's round trips and connections are apart from the writer's.
func nearClient(t testing.TB, b *testredis.Backend) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	switch cl := b.Client.(type) {
	case *redis.ClusterClient:
		c = tierset.NewClusterClient(testredis.ClusterAddrs()...)
	case *redis.Client:
		o := *cl.Options()
		c = redis.NewClient(&o)
	default:
		t.Fatalf("unexpected client %T", b.Client)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newNearCache builds a near cache on client with prefix, closed at
// cleanup, and waits until its tracking is established.
func newNearCache(t testing.TB, client redis.UniversalClient, prefix string, opts Options) *Cache {
	t.Helper()
	opts.Prefix = prefix
	if opts.NearCache == nil {
		opts.NearCache = &NearCacheOptions{}
	}
	c, err := New(client, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	waitTracking(t, c)
	return c
}

// waitTracking starts tracking with a read and polls, up to 10 s, until it
// is established.
func waitTracking(t testing.TB, c *Cache) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !c.NearStats().Tracking {
		// matchInto, not Match: the probe must not reach a Loader.
		var rs [1]Result
		if err := c.matchInto(ctx, []Query{QuantityQuery("tracking-probe", 1)}, MatchOptions{}, rs[:]); err != nil && ctx.Err() != nil {
			t.Fatalf("tracking not established in 10 s: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
}

// sameResults reports how got differs from want ("" when equal): the near
// path must answer exactly what the Redis path does.
func sameResults(want, got []Result) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d results, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		switch {
		case w.Promotion != g.Promotion || w.Version != g.Version:
			return fmt.Sprintf("line %d: %s@%s, want %s@%s", i, g.Promotion, g.Version, w.Promotion, w.Version)
		case errString(w.Err) != errString(g.Err):
			return fmt.Sprintf("line %d: err %v, want %v", i, g.Err, w.Err)
		case !w.Shortfall.Equal(g.Shortfall):
			return fmt.Sprintf("line %d: shortfall %s, want %s", i, g.Shortfall, w.Shortfall)
		}
		for _, p := range [][2]*TierHit{{w.Tier, g.Tier}, {w.Next, g.Next}} {
			if (p[0] == nil) != (p[1] == nil) {
				return fmt.Sprintf("line %d: tier/next presence differs: %+v vs %+v", i, p[1], p[0])
			}
			if p[0] == nil {
				continue
			}
			a, b := *p[0], *p[1]
			if a.ID != b.ID || a.Score != b.Score || !a.Threshold.Equal(b.Threshold) || a.HasGifts != b.HasGifts ||
				a.Reward.Kind != b.Reward.Kind || !a.Reward.Percent.Equal(b.Reward.Percent) || !a.Reward.Amount.Equal(b.Reward.Amount) ||
				!a.Reward.Step.Equal(b.Reward.Step) || !a.Reward.Cap.Equal(b.Reward.Cap) || !reflect.DeepEqual(a.Gifts, b.Gifts) {
				return fmt.Sprintf("line %d: got %+v, want %+v", i, b, a)
			}
		}
	}
	return ""
}

// TestNearLadderAgreesWithOracle: a ladder built from the members Refresh
// writes answers every boundary value, with Next, as gradient.Matcher
// does. No Redis: it checks the in-memory answer itself.
func TestNearLadderAgreesWithOracle(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(14))
	c, err := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}), Options{NearCache: &NearCacheOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		metric gradient.Metric
		tiers  int
	}{{gradient.Quantity, 1}, {gradient.Quantity, 3}, {gradient.Amount, 30}, {gradient.Quantity, 3000}, {gradient.Amount, 300}} {
		p := randPromotion(rng, "p"+strconv.Itoa(tc.tiers), tc.metric, tc.tiers)
		e, err := encodePromotion(&p, c.maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		n := len(e.members)
		raws := append([]string{e.members[n-2]}, e.members[:n-2]...) // ZRANGE order: floor, tiers, ceiling
		raws = append(raws, e.members[n-1])
		l, err := c.buildLadder(p.ID, raws)
		if err != nil {
			t.Fatal(err)
		}
		m, err := gradient.NewMatcher(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range boundaryValues(m, rng, 50) {
			q := queryFor(&p, s)
			var r Result
			r.Promotion = p.ID
			c.answer(l, &q, s, time.Now().UnixMilli(), true, &r)
			checkAgainstOracle(t, m, s, r, true)
			if r.Version != e.version {
				t.Fatalf("version %q, want %q", r.Version, e.version)
			}
		}
	}
	// A ladder out of order, of two versions, or without its sentinels is
	// refused (its lines then take the Redis path).
	p1, p2 := simplePromotion("x", 1, 2, 3), simplePromotion("x", 1, 2, 4)
	e1, _ := encodePromotion(&p1, c.maxBytes)
	e2, _ := encodePromotion(&p2, c.maxBytes)
	for name, raws := range map[string][]string{
		"mixed versions": {e1.members[3], e1.members[0], e2.members[1], e1.members[4]},
		"out of order":   {e1.members[3], e1.members[1], e1.members[0], e1.members[4]},
		"no ceiling":     {e1.members[3], e1.members[0], e1.members[1]},
		"no floor":       {e1.members[0], e1.members[1], e1.members[4]},
		"garbage":        {e1.members[3], "\xc1", e1.members[4]},
	} {
		if _, err := c.buildLadder("x", raws); !errorsIs(err, ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", name, err)
		}
	}
}

// TestNearGenerationCheck: a read begun before an invalidation, a
// tracking drop or another read of its promotion settling installs
// nothing, whatever it read.
func TestNearGenerationCheck(t *testing.T) {
	t.Parallel()
	c, err := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}), Options{NearCache: &NearCacheOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	nc := c.near
	nc.up.Store(true)
	ladderOf := nearLadders(t, c, "g", 1)[0]
	for _, tc := range []struct {
		name    string
		between func()
		want    bool
	}{
		{"nothing in between", func() {}, true},
		{"invalidation of the promotion", func() { nc.invalidate("g") }, false},
		{"tracking dropped and back", func() { nc.setUp(false); nc.setUp(true) }, false},
		{"tracking down", func() { nc.setUp(false) }, false},
		{"invalidation of another promotion", func() { nc.invalidate("other") }, true},
		{"another read of the promotion settled", func() { nc.settle(nc.begin("g"), nil, false) }, false},
		{"another read of the promotion abandoned", func() { nc.abandon(nc.begin("g")) }, true},
		{"a read of another promotion settled", func() { nc.settle(nc.begin("other"), nil, false) }, true},
	} {
		nc.setUp(true)
		f := nc.begin("g")
		tc.between()
		if got := nc.settle(f, ladderOf(), false); got != tc.want {
			t.Errorf("%s: install %v, want %v", tc.name, got, tc.want)
		}
		held, _ := nc.get("g", time.Now().UnixNano())
		if (held != nil) != tc.want {
			t.Errorf("%s: held %v", tc.name, held != nil)
		}
	}
	for i := range nc.shards {
		if n := len(nc.shards[i].fills); n != 0 {
			t.Fatalf("%d read records left after every read settled", n)
		}
	}
	// An entry older than MaxStaleness is not served.
	nc.setUp(true)
	f := nc.begin("g")
	f.at -= int64(nc.opt.MaxStaleness)
	if !nc.settle(f, ladderOf(), false) {
		t.Fatal("install refused")
	}
	if l, _ := nc.get("g", time.Now().UnixNano()); l != nil {
		t.Fatal("an entry older than MaxStaleness was served")
	}
}

// nearLadders returns, for k = 0..n-1, a builder of a fresh ladder of
// version k of promotion id (each version its own content).
func nearLadders(t *testing.T, c *Cache, id string, n int) []func() *ladder {
	t.Helper()
	out := make([]func() *ladder, n)
	for k := range out {
		p := simplePromotion(id, 1, 2, int64(3+k))
		e, err := encodePromotion(&p, c.maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		raws := []string{e.members[3], e.members[0], e.members[1], e.members[2], e.members[4]}
		out[k] = func() *ladder {
			l, err := c.buildLadder(id, raws)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
	}
	return out
}

// TestNearSettleOrder: reads of one promotion in flight together, their
// replies of an older (v2) and a newer (v3) version settling in either
// order, with or without an invalidation between them. Whatever each
// read answered, the ladder held afterwards is never older than an answer
// already given: it is the newer one or nothing (the next read then asks
// Redis).
func TestNearSettleOrder(t *testing.T) {
	t.Parallel()
	c, err := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}), Options{NearCache: &NearCacheOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	nc := c.near
	vs := nearLadders(t, c, "o", 2)
	v2, v3 := vs[0], vs[1]
	// Steps: "a+" begins read a, "a2"/"a3" settles it with v2/v3, "a-"
	// settles it absent, "i" is an invalidation, "h2" installs v2 first.
	for _, tc := range []struct {
		steps string
		want  string // the version held at the end: "v2", "v3" or ""
	}{
		{"a+ b+ b3 a2", ""},    // the order: the old reply lands after the new one was installed
		{"a+ b+ a2 b3", ""},    // the old reply installs first; the new answer drops it
		{"a+ b+ b3 a3", "v3"},  // the same version twice: kept
		{"a+ i b+ a3 b2", ""},  // a refused new answer; an older read begun after the invalidation stays out
		{"a+ i b+ b3 a2", ""},  // a read begun before the invalidation may be older or newer: it drops v3
		{"h2 a+ a-", ""},       // the promotion is gone: the held ladder goes with it
		{"h2 a+ b+ a3 b2", ""}, // the held v2 is replaced by v3, and v2 read beside it drops it again
	} {
		t.Run(tc.steps, func(t *testing.T) {
			nc.setUp(true)
			fills := map[byte]*nearFill{}
			for _, st := range strings.Fields(tc.steps) {
				switch {
				case st == "i":
					nc.invalidate("o")
				case st == "h2":
					if !nc.settle(nc.begin("o"), v2(), false) {
						t.Fatal("first install refused")
					}
				case st[1] == '+':
					fills[st[0]] = nc.begin("o")
				case st[1] == '-':
					nc.settle(fills[st[0]], nil, false)
				default:
					nc.settle(fills[st[0]], vs[st[1]-'2'](), false)
				}
			}
			got := ""
			if l, _ := nc.get("o", time.Now().UnixNano()); l != nil {
				got = map[string]string{v2().version: "v2", v3().version: "v3"}[l.version]
			}
			if got != tc.want {
				t.Fatalf("held %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNearAgreesWithRedisPath: on real Redis, a near cache answers random
// carts (every option, missing promotions, bad queries) exactly as the
// Redis path does, and the second time with no round trip at all.
func TestNearAgreesWithRedisPath(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		rng := rand.New(rand.NewSource(7))
		plain := newCache(t, b, Options{})
		var promos []gradient.Promotion
		oracle := map[string]*gradient.Matcher{}
		for i, n := range []int{1, 3, 30, 300, 3000} {
			metric := gradient.Quantity
			if i%2 == 1 {
				metric = gradient.Amount
			}
			p := randPromotion(rng, "p"+strconv.Itoa(n), metric, n)
			promos = append(promos, p)
			oracle[p.ID], _ = gradient.NewMatcher(p)
		}
		if _, err := plain.Refresh(ctx, promos...); err != nil {
			t.Fatal(err)
		}
		nc := newNearCache(t, nearClient(t, b), b.Prefix, Options{})
		rt, err := testredis.CountRoundTrips(ctx, nc.client)
		if err != nil {
			t.Fatal(err)
		}
		cart := func(k int, missing bool) ([]Query, []int64) {
			var qs []Query
			var ss []int64
			for i := 0; i < 20; i++ {
				p := &promos[(i+k)%len(promos)]
				sc := oracle[p.ID].Scores()
				s := max(0, sc[rng.Intn(len(sc))]+int64(rng.Intn(3))-1)
				qs, ss = append(qs, queryFor(p, s)), append(ss, s)
			}
			if missing {
				qs = append(qs, QuantityQuery("missing", 3), QuantityQuery("bad{id", 1), QuantityQuery(promos[0].ID, -1))
				ss = append(ss, 0, 0, 0)
			}
			return qs, ss
		}
		for _, opt := range []MatchOptions{{}, {Next: true}, {Gifts: true}, {Next: true, Gifts: true}} {
			for k := 0; k < 20; k++ {
				qs, ss := cart(k, k%2 == 0)
				want, err := plain.MatchCart(ctx, qs, opt)
				if err != nil {
					t.Fatal(err)
				}
				rt.Reset()
				got, err := nc.MatchCart(ctx, qs, opt)
				if err != nil {
					t.Fatal(err)
				}
				if msg := sameResults(want, got); msg != "" {
					t.Fatalf("opt %+v cart %d: %s", opt, k, msg)
				}
				for i := 0; i < 20; i++ {
					checkAgainstOracle(t, oracle[qs[i].Promotion], ss[i], got[i], opt.Next)
				}
				// Once every ladder (and gift list) is held, a cart without
				// missing promotions makes no round trip.
				if k >= 10 && k%2 == 1 && rt.Total() != 0 {
					t.Fatalf("opt %+v cart %d: %d round trips from memory", opt, k, rt.Total())
				}
				for i := 0; i < 20; i++ {
					one, err := nc.Match(ctx, qs[i], opt)
					if msg := sameResults(want[i:i+1], []Result{one}); msg != "" || errString(err) != errString(want[i].Err) {
						t.Fatalf("Match line %d: %s (err %v)", i, msg, err)
					}
				}
			}
		}
		st := nc.NearStats()
		t.Logf("near stats: %+v", st)
		if st.Promotions != len(promos) || st.Hits == 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// TestNearRefreshInvalidates: a Refresh from the same process is seen by
// the next read at once; one from another Cache (another connection, as
// another process would be) within the time its invalidation takes; a
// Delete likewise.
func TestNearRefreshInvalidates(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		other := newCache(t, b, Options{})
		nc := newNearCache(t, nearClient(t, b), b.Prefix, Options{NearCache: &NearCacheOptions{MaxStaleness: time.Minute}})
		v1, v2 := versioned("v1", 2, 4, 6), versioned("v2", 3, 5, 7)
		q := QuantityQuery("flip", 6)
		read := func() Result {
			t.Helper()
			r, err := nc.Match(ctx, q, MatchOptions{Next: true, Gifts: true})
			if err != nil && !errorsIs(err, ErrNotFound) {
				t.Fatal(err)
			}
			return r
		}
		for k, p := range []gradient.Promotion{v1, v2, v1} {
			rep, err := nc.Refresh(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if r := read(); r.Version != rep.Promotions[0].Version || r.Tier.Gifts[0].SKU != p.Tiers[0].ID[:2]+"-gift" {
				t.Fatalf("same-process refresh %d: read %s %+v", k, r.Version, r.Tier)
			}
		}
		for k, p := range []gradient.Promotion{v2, v1} {
			_ = read() // held
			rep, err := other.Refresh(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for read().Version != rep.Promotions[0].Version {
				if time.Since(start) > 5*time.Second {
					t.Fatalf("other-process refresh %d not seen in 5 s", k)
				}
			}
			t.Logf("other-process refresh %d seen after %v", k, time.Since(start))
		}
		_ = read()
		if _, err := other.Delete(ctx, "flip", 0); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for !errorsIs(read().Err, ErrNotFound) {
			if time.Since(start) > 5*time.Second {
				t.Fatal("delete not seen in 5 s")
			}
		}
	})
}

// TestNearMemoryBounded: 10,000 promotions (3,000 without the soak
// switch) cycling through a near cache
// bounded to 500 promotions and 2 MiB: the held count and accounted bytes
// never exceed the bounds, and the heap stays within a few MiB of where
// it started.
func TestNearMemoryBounded(t *testing.T) {
	testredis.EachReal(t, func(t *testing.T, b *testredis.Backend) {
		// 10,000 promotions written and read: more than testCtx's two
		// minutes under -race on a machine at load 40.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		plain := newCache(t, b, Options{})
		n := soak.Pick(10000, 3000)
		promos := make([]gradient.Promotion, n)
		for i := range promos {
			promos[i] = simplePromotion("m"+strconv.Itoa(i), 1, 2, 3, 5, 8)
		}
		// Ten writers at once: 30,000 round trips one after another can
		// outlast the test's deadline on a loaded machine.
		errs := make(chan error, n/1000)
		for i := 0; i < n; i += 1000 {
			go func() {
				_, err := plain.Refresh(ctx, promos[i:i+1000]...)
				errs <- err
			}()
		}
		for i := 0; i < n; i += 1000 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		const maxP, maxB = 500, 2 << 20
		nc := newNearCache(t, nearClient(t, b), b.Prefix, Options{NearCache: &NearCacheOptions{MaxPromotions: maxP, MaxBytes: maxB}})
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		peakP, peakB := 0, int64(0)
		for round := 0; round < 2; round++ {
			for i := 0; i < n; i += 20 {
				qs := make([]Query, 20)
				for k := range qs {
					qs[k] = QuantityQuery(promos[i+k].ID, 4)
				}
				rs, err := nc.MatchCart(ctx, qs, MatchOptions{Next: true, Gifts: true})
				if err != nil {
					t.Fatal(err)
				}
				for k, r := range rs {
					if r.Err != nil || r.Tier.ID != "tier2" || r.Next.ID != "tier3" || len(r.Tier.Gifts) != 1 {
						t.Fatalf("line %d: %+v", k, r)
					}
				}
				st := nc.NearStats()
				peakP, peakB = max(peakP, st.Promotions), max(peakB, st.Bytes)
				if st.Promotions > maxP || st.Bytes > maxB {
					t.Fatalf("bounds broken: %+v", st)
				}
			}
		}
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		st := nc.NearStats()
		t.Logf("%d promotions x2: peak %d promotions, %d bytes accounted; %d evictions; heap grew %d KiB", n, peakP, peakB, st.Evictions, grew/1024)
		if st.Evictions == 0 || peakP < maxP/4 {
			t.Fatalf("the bound was never reached: %+v", st)
		}
		if grew > 4*maxB {
			t.Fatalf("heap grew %d bytes, more than 4x MaxBytes", grew)
		}
	})
}

// TestNearOptions: bad bounds are invalid options; a client the tracker
// cannot follow is refused.
func TestNearOptions(t *testing.T) {
	t.Parallel()
	cl := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	for _, o := range []NearCacheOptions{{MaxPromotions: -1}, {MaxBytes: -1}, {MaxStaleness: time.Millisecond}, {MaxTiers: -1}} {
		if _, err := New(cl, Options{NearCache: &o}); !errorsIs(err, &ValidationError{Field: "options"}) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	if _, err := New(ring, Options{NearCache: &NearCacheOptions{}}); !errorsIs(err, &ValidationError{Field: "options"}) {
		t.Errorf("ring: %v", err)
	}
	for _, o := range []redis.ClusterOptions{{ReadOnly: true}, {RouteByLatency: true}, {RouteRandomly: true}} {
		o.Addrs, o.ContextTimeoutEnabled = []string{"127.0.0.1:1"}, true
		cc := redis.NewClusterClient(&o)
		if _, err := New(cc, Options{NearCache: &NearCacheOptions{}}); !errorsIs(err, &ValidationError{Field: "options"}) {
			t.Errorf("cluster reading replicas %+v: %v", o, err)
		}
		_ = cc.Close()
	}
	c, err := New(cl, Options{NearCache: &NearCacheOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil || c.NearStats().Tracking {
		t.Fatal("Close")
	}
}

// TestNearSharedHitsStayUnwritten: near answers share their TierHit with
// every reader of the ladder; filling gifts (MatchOptions.Gifts, or
// Cache.Gifts on a near answer) gives the caller a copy, so the held hit
// never gains a list and a caller's write to its list reaches nobody else.
func TestNearSharedHitsStayUnwritten(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		nc := newNearCache(t, nearClient(t, b), b.Prefix, Options{})
		p := versioned("v1", 2, 4, 6)
		if _, err := nc.Refresh(ctx, p); err != nil {
			t.Fatal(err)
		}
		q := QuantityQuery(p.ID, 5)
		held := func() *TierHit {
			t.Helper()
			r, err := nc.Match(ctx, q, MatchOptions{})
			if err != nil || r.Tier == nil {
				t.Fatalf("plain read: %+v %v", r, err)
			}
			return r.Tier
		}
		// The Refresh's own invalidation may land after the first read
		// and refuse its install: read until two reads share their hit.
		shared, deadline := held(), time.Now().Add(5*time.Second)
		for again := held(); again != shared; again = held() {
			if time.Now().After(deadline) {
				t.Fatal("no two reads shared a held hit within 5 s")
			}
			shared = again
		}
		for _, fill := range []struct {
			name string
			read func() (*TierHit, error)
		}{
			{"MatchOptions.Gifts", func() (*TierHit, error) {
				r, err := nc.Match(ctx, q, MatchOptions{Gifts: true})
				return r.Tier, err
			}},
			{"Cache.Gifts", func() (*TierHit, error) {
				r, err := nc.Match(ctx, q, MatchOptions{})
				if err != nil {
					return nil, err
				}
				rs := []Result{r}
				err = nc.Gifts(ctx, rs)
				return rs[0].Tier, err
			}},
		} {
			got, err := fill.read()
			if err != nil || got == nil || len(got.Gifts) == 0 {
				t.Fatalf("%s: %+v %v", fill.name, got, err)
			}
			if got == shared {
				t.Fatalf("%s filled the shared hit", fill.name)
			}
			got.Gifts[0].SKU = "written by the caller"
			if h := held(); h.Gifts != nil {
				t.Fatalf("%s: the held hit gained gifts %+v", fill.name, h.Gifts)
			}
			if again, _ := fill.read(); again.Gifts[0].SKU == "written by the caller" {
				t.Fatalf("%s: a caller's write reached the next reader", fill.name)
			}
		}
	})
}

// TestNearCloseIsPrompt: Close does not wait for an idle tracking
// connection's next PING (pingEvery, 1 s here) to see it is closing.
func TestNearCloseIsPrompt(t *testing.T) {
	testredis.EachReal(t, func(t *testing.T, b *testredis.Backend) {
		nc := newNearCache(t, nearClient(t, b), b.Prefix, Options{})
		start := time.Now()
		if err := nc.Close(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d >= nc.near.pingEvery()/2 {
			t.Fatalf("Close took %v; an idle receive wakes every %v", d, nc.near.pingEvery())
		}
	})
}

// TestNearStatsCountLines: every line of a cart is a Hit (answered from
// memory) or a Miss (sent to Redis while tracking is up), whether its
// promotion is held, not yet held, or never held (over MaxTiers, or over
// its shard's share of MaxBytes).
func TestNearStatsCountLines(t *testing.T) {
	t.Parallel()
	b := testredis.Redis(t)
	ctx := testCtx(t)
	w := newCache(t, b, Options{})
	small, big := simplePromotion("small", 1, 2), simplePromotion("big", 1, 2, 3, 4)
	if _, err := w.Refresh(ctx, small, big); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opt  NearCacheOptions
	}{
		{"over MaxTiers", NearCacheOptions{MaxTiers: 3}},
		{"over MaxBytes", NearCacheOptions{MaxBytes: nearShards * (2*(nearTierOverhead+200) + 2*nearTierOverhead)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := newNearCache(t, nearClient(t, b), b.Prefix, Options{NearCache: &tc.opt})
			base := nc.NearStats()
			const carts = 5
			for k := 0; k < carts; k++ {
				rs, err := nc.MatchCart(ctx, []Query{QuantityQuery("small", 1), QuantityQuery("big", 1), QuantityQuery("big", 4)}, MatchOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range rs {
					if r.Err != nil {
						t.Fatalf("cart %d line %d: %v", k, i, r.Err)
					}
				}
			}
			st := nc.NearStats()
			hits, misses := st.Hits-base.Hits, st.Misses-base.Misses
			// small: a miss, then held; big: never held, both lines every time.
			if hits != carts-1 || misses != 1+2*carts || st.Promotions != 1 {
				t.Fatalf("%d hits, %d misses, %d held; want %d hits, %d misses, 1 held", hits, misses, st.Promotions, carts-1, 1+2*carts)
			}
		})
	}
}
