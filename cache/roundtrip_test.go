package cache

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

// TestCartRoundTrips proves with a counting hook that a cart costs one
// round trip whatever its size (1..200 lines) and tier count (3..3000),
// with or without Next, and exactly one more when some hit has gifts.
// Without the soak switch miniredis stops at 300 tiers: it sorts a whole
// set on every range query, and the 3000-tier carts run on real Redis.
func TestCartRoundTrips(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		obs := &countingObserver{}
		c := newCache(t, b, Options{Observer: obs})
		sizes := []int{3, 300, 3000}
		if !b.Real() {
			sizes = soak.Pick(sizes, []int{3, 300})
		}
		var promos []gradient.Promotion
		for _, n := range sizes {
			withGifts := simplePromotion("g"+strconv.Itoa(n), seq(n)...)
			plain := simplePromotion("n"+strconv.Itoa(n), seq(n)...)
			for i := range plain.Tiers {
				plain.Tiers[i].Gifts = nil
			}
			promos = append(promos, withGifts, plain)
		}
		if _, err := c.Refresh(ctx, promos...); err != nil {
			t.Fatal(err)
		}
		rt, err := testredis.CountRoundTrips(ctx, b.Client)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Client.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		for _, tiers := range sizes {
			for _, lines := range []int{1, 20, 200} {
				for _, tc := range []struct {
					name   string
					prefix string
					opt    MatchOptions
					want   int
				}{
					{"plain", "g", MatchOptions{}, 1},
					{"next", "g", MatchOptions{Next: true}, 1},
					{"gifts", "g", MatchOptions{Gifts: true}, 2},
					{"next+gifts", "g", MatchOptions{Next: true, Gifts: true}, 2},
					{"gifts requested, none stored", "n", MatchOptions{Gifts: true}, 1},
				} {
					qs := make([]Query, lines)
					for i := range qs {
						qs[i] = QuantityQuery(tc.prefix+strconv.Itoa(tiers), int64(1+i%tiers))
					}
					// Warm up: a pipeline may open fresh connections, and
					// their handshake (HELLO, CLIENT SETINFO) is counted.
					if _, err := c.MatchCart(ctx, qs, tc.opt); err != nil {
						t.Fatal(err)
					}
					rt.Reset()
					before := obs.roundTrips.Load()
					rs, err := c.MatchCart(ctx, qs, tc.opt)
					if err != nil {
						t.Fatal(err)
					}
					for i, r := range rs {
						if r.Err != nil || r.Tier == nil || (tc.opt.Gifts && r.Tier.HasGifts && len(r.Tier.Gifts) == 0) {
							t.Fatalf("line %d: %+v", i, r)
						}
					}
					got := rt.Total()
					if b.IsCluster() {
						got = maxNode(rt.PerNode()) // one promotion: one master
					}
					if got != tc.want {
						t.Fatalf("tiers=%d lines=%d %s: %d round trips (%v), want %d", tiers, lines, tc.name, got, rt.PerNode(), tc.want)
					}
					if rep := obs.roundTrips.Load() - before; rep != int64(tc.want) {
						t.Fatalf("observer reported %d round trips, want %d", rep, tc.want)
					}
				}
			}
		}
	})
}

func seq(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

func maxNode(m map[string]int) int {
	best := 0
	for _, v := range m {
		best = max(best, v)
	}
	return best
}

// TestClusterCartPerMaster: a cart over promotions on
// all three masters costs exactly one round trip on each master (go-redis
// splits the pipeline per master and sends the parts in parallel), and one
// more per master holding a hit with gifts.
func TestClusterCartPerMaster(t *testing.T) {
	t.Parallel()
	testredis.EachReal(t, func(t *testing.T, b *testredis.Backend) {
		cc, ok := b.Client.(*redis.ClusterClient)
		if !ok {
			t.Skip("needs a cluster")
		}
		ctx := testCtx(t)
		c := newCache(t, b, Options{})
		masters := map[string][]string{} // master addr -> promotion IDs
		var promos []gradient.Promotion
		for i := 0; len(promos) < 30; i++ {
			id := "spread" + strconv.Itoa(i)
			m, err := cc.MasterForKey(ctx, c.tiersKey(id))
			if err != nil {
				t.Fatal(err)
			}
			addr := m.Options().Addr
			masters[addr] = append(masters[addr], id)
			promos = append(promos, simplePromotion(id, 2, 4, 8))
		}
		if len(masters) != 3 {
			t.Fatalf("promotions on %d masters, want 3: %v", len(masters), masters)
		}
		if _, err := c.Refresh(ctx, promos...); err != nil {
			t.Fatal(err)
		}
		rt, err := testredis.CountRoundTrips(ctx, b.Client)
		if err != nil {
			t.Fatal(err)
		}
		if err := cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
			t.Fatal(err)
		}
		qs := make([]Query, 0, 60)
		for _, p := range promos {
			qs = append(qs, QuantityQuery(p.ID, 5), QuantityQuery(p.ID, 1))
		}
		for _, tc := range []struct {
			opt  MatchOptions
			want int
		}{{MatchOptions{}, 1}, {MatchOptions{Next: true}, 1}, {MatchOptions{Gifts: true}, 2}} {
			if _, err := c.MatchCart(ctx, qs, tc.opt); err != nil { // warm up connections
				t.Fatal(err)
			}
			rt.Reset()
			rs, err := c.MatchCart(ctx, qs, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < len(rs); i += 2 {
				if rs[i].Err != nil || rs[i].Tier.ID != "tier1" || rs[i+1].Err != ErrNoTier {
					t.Fatalf("line %d: %+v / %+v", i, rs[i], rs[i+1])
				}
			}
			per := rt.PerNode()
			for addr := range masters {
				if per[addr] != tc.want {
					t.Fatalf("%+v: master %s had %d round trips, want %d (all: %v)", tc.opt, addr, per[addr], tc.want, per)
				}
			}
			if len(per) != 3 {
				t.Fatalf("round trips reached %v, want exactly the 3 masters", per)
			}
			t.Logf("%+v: %d lines over 3 masters, round trips per master %v", tc.opt, len(qs), per)
		}
	})
}

// TestRecheckRoundTrips: a cart with lines that find nothing stored
// (unknown or damaged promotions) costs exactly one more round trip, for
// all such lines together, and tells the two apart; a cart whose lines
// all find something never pays it.
func TestRecheckRoundTrips(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		var promos []gradient.Promotion
		for i := 0; i < 10; i++ {
			promos = append(promos, simplePromotion("rc"+strconv.Itoa(i), 2, 4, 8))
		}
		if _, err := c.Refresh(ctx, promos...); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"rc0", "rc1"} { // two slots on a cluster
			if err := b.Client.Del(ctx, c.tiersKey(id)).Err(); err != nil {
				t.Fatal(err)
			}
		}
		rt, err := testredis.CountRoundTrips(ctx, b.Client)
		if err != nil {
			t.Fatal(err)
		}
		var whole, mixed []Query
		for i := 2; i < 10; i++ {
			whole = append(whole, QuantityQuery("rc"+strconv.Itoa(i), 5))
		}
		mixed = append(append(mixed, whole...), QuantityQuery("rc0", 5), QuantityQuery("rc1", 1), QuantityQuery("nosuch", 5), QuantityQuery("nosuch2", 1))
		for _, tc := range []struct {
			name string
			qs   []Query
			want int
		}{{"all stored", whole, 1}, {"2 damaged, 2 unknown", mixed, 2}} {
			for _, opt := range []MatchOptions{{}, {Next: true}} {
				if _, err := c.MatchCart(ctx, tc.qs, opt); err != nil { // warm up connections
					t.Fatal(err)
				}
				rt.Reset()
				rs, err := c.MatchCart(ctx, tc.qs, opt)
				if err != nil {
					t.Fatal(err)
				}
				got := rt.Total()
				if b.IsCluster() {
					got = maxNode(rt.PerNode())
				}
				if got != tc.want {
					t.Fatalf("%s %+v: %d round trips, want %d", tc.name, opt, got, tc.want)
				}
				for _, r := range rs {
					var want error
					switch r.Promotion {
					case "rc0", "rc1":
						want = ErrDamaged
					case "nosuch", "nosuch2":
						want = ErrNotFound
					}
					if want != nil && !errors.Is(r.Err, want) || want == nil && (r.Err != nil || r.Tier.ID != "tier1") {
						t.Fatalf("%s %+v: %s: %+v", tc.name, opt, r.Promotion, r)
					}
				}
			}
		}
	})
}
