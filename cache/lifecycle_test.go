package cache

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// clock is an injectable Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// TestWindow: a promotion warmed before its start answers ErrNotActive,
// hits inside [Start, End), and is ErrNotActive again from End on, by the
// caller's clock (not Redis's).
func TestWindow(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		start := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		end := start.Add(2 * time.Hour)
		clk := &clock{t: start.Add(-time.Minute)}
		c := newCache(t, b, Options{Now: clk.Now})
		p := simplePromotion("win", 3, 5)
		p.Start, p.End = start, end
		if _, err := c.Refresh(ctx, p); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			at   time.Time
			want error
		}{
			{start.Add(-time.Minute), ErrNotActive},
			{start.Add(-time.Millisecond), ErrNotActive},
			{start, nil},
			{end.Add(-time.Millisecond), nil},
			{end, ErrNotActive},
			{end.Add(time.Hour), ErrNotActive},
		}
		for _, tc := range cases {
			clk.Set(tc.at)
			for _, q := range []Query{QuantityQuery("win", 4), QuantityQuery("win", 1)} {
				r, err := c.Match(ctx, q, MatchOptions{Next: true})
				want := tc.want
				if want == nil && q.Value.IntPart() == 1 {
					want = ErrNoTier
				}
				if !errors.Is(err, want) || (want == nil && (r.Tier == nil || r.Tier.ID != "tier0")) {
					t.Fatalf("at %v value %s: got %+v, %v; want %v", tc.at.Sub(start), q.Value, r.Tier, err, want)
				}
				if want == ErrNotActive && (r.Tier != nil || r.Next != nil) {
					t.Fatalf("not active but returned tiers: %+v", r)
				}
				if oracle := p.Active(tc.at); oracle != (tc.want == nil) {
					t.Fatalf("oracle Active(%v) = %v", tc.at, oracle)
				}
			}
		}
		// Keys expire at End + Grace on Redis's clock.
		pttl, err := b.Client.PTTL(ctx, c.tiersKey("win")).Result()
		if err != nil {
			t.Fatal(err)
		}
		want := time.Until(end.Add(defaultGrace))
		if pttl < want-time.Minute || pttl > want+time.Second {
			t.Fatalf("tiers PTTL %v, want ≈ %v", pttl, want)
		}
	})
}

// TestNotFoundMismatchNext covers ErrNotFound, metric and digits
// mismatches, Next at the top and the upsell on ErrNoTier.
func TestNotFoundMismatchNext(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		jpy := newCache(t, b, Options{MinorDigits: gradient.NoMinorDigits})
		amt := gradient.Promotion{ID: "amt", Metric: gradient.Amount, MinorDigits: 2, Tiers: []gradient.Tier{
			{ID: "a", Threshold: decimal.RequireFromString("99.99"), Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(10)}},
			{ID: "b", Threshold: decimal.RequireFromString("199.99"), Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(30)}},
		}}
		yen := gradient.Promotion{ID: "yen", Metric: gradient.Amount, MinorDigits: gradient.NoMinorDigits, Tiers: []gradient.Tier{
			{ID: "y", Threshold: decimal.NewFromInt(1000), Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(100)}},
		}}
		if _, err := c.Refresh(ctx, amt, yen, simplePromotion("qty", 2, 4)); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name string
			c    *Cache
			q    Query
			want error
			tier string
			next string
			fall string
		}{
			{"unknown", c, QuantityQuery("nope", 3), ErrNotFound, "", "", ""},
			{"quantity query on amount promo", c, QuantityQuery("amt", 300), ErrMetricMismatch, "", "", ""},
			{"amount query on quantity promo", c, AmountQuery("qty", decimal.NewFromInt(3)), ErrMetricMismatch, "", "", ""},
			{"cents query on yen promo", c, AmountQuery("yen", decimal.NewFromInt(5000)), ErrDigitsMismatch, "", "", ""},
			{"yen query on cents promo", jpy, AmountQuery("amt", decimal.NewFromInt(500)), ErrDigitsMismatch, "", "", ""},
			{"yen hit", jpy, AmountQuery("yen", decimal.RequireFromString("1000.9")), nil, "y", "", ""},
			{"one cent below", c, AmountQuery("amt", decimal.RequireFromString("99.98")), ErrNoTier, "", "a", "0.01"},
			{"sub-cent below floors", c, AmountQuery("amt", decimal.RequireFromString("99.989")), ErrNoTier, "", "a", "0.01"},
			{"exactly at", c, AmountQuery("amt", decimal.RequireFromString("99.99")), nil, "a", "b", "100"},
			{"sub-cent above", c, AmountQuery("amt", decimal.RequireFromString("199.991")), nil, "b", "", ""},
			{"top", c, QuantityQuery("qty", 100), nil, "tier1", "", ""},
			{"zero", c, QuantityQuery("qty", 0), ErrNoTier, "", "tier0", "2"},
		}
		for _, tc := range tests {
			r, err := tc.c.Match(ctx, tc.q, MatchOptions{Next: true})
			if !errors.Is(err, tc.want) || err != r.Err {
				t.Fatalf("%s: err %v, want %v", tc.name, err, tc.want)
			}
			got := func(h *TierHit) string {
				if h == nil {
					return ""
				}
				return h.ID
			}
			if got(r.Tier) != tc.tier || got(r.Next) != tc.next {
				t.Fatalf("%s: tier %q next %q, want %q %q", tc.name, got(r.Tier), got(r.Next), tc.tier, tc.next)
			}
			if tc.fall != "" && !r.Shortfall.Equal(decimal.RequireFromString(tc.fall)) {
				t.Fatalf("%s: shortfall %s, want %s", tc.name, r.Shortfall, tc.fall)
			}
		}
	})
}

// TestRefreshVersions: a refresh to a new version replaces the tiers
// whole, the old version's gifts stay readable for Grace and then
// expire, an identical refresh is Unchanged and writes nothing.
func TestRefreshVersions(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		grace := time.Hour
		if b.Real() {
			grace = 700 * time.Millisecond // real TTLs run on wall time
		}
		clk := &clock{t: time.UnixMilli(1_700_000_000_000)}
		c := newCache(t, b, Options{Grace: grace, Now: clk.Now})
		v1 := simplePromotion("ver", 3, 5, 10)
		rep, err := c.Refresh(ctx, v1)
		if err != nil || rep.Added != 1 || rep.Promotions[0].Outcome != Added {
			t.Fatalf("first refresh: %+v %v", rep, err)
		}
		old, err := c.Match(ctx, QuantityQuery("ver", 6), MatchOptions{})
		if err != nil || old.Tier.ID != "tier1" {
			t.Fatalf("v1 match: %+v %v", old, err)
		}

		// Unchanged: same content in another order and decimal spelling.
		same := simplePromotion("ver", 3, 5, 10)
		same.Tiers[0], same.Tiers[2] = same.Tiers[2], same.Tiers[0]
		same.Tiers[1].Reward.Percent = decimal.RequireFromString(same.Tiers[1].Reward.Percent.StringFixed(3))
		writes := recordWrites(t, b)
		clk.Set(clk.Now().Add(time.Minute))
		rep, err = c.Refresh(ctx, same)
		if err != nil || rep.Unchanged != 1 || rep.Promotions[0].Version != old.Version {
			t.Fatalf("unchanged refresh: %+v %v", rep, err)
		}
		if w := writes(); len(w) != 0 {
			t.Fatalf("unchanged refresh wrote: %v", w)
		}
		if in, err := c.Info(ctx, "ver"); err != nil || !in.Updated.Equal(time.UnixMilli(1_700_000_000_000)) {
			t.Fatalf("info after unchanged: %+v %v", in, err)
		}

		// v2: different tiers, different gifts.
		v2 := simplePromotion("ver", 2, 7)
		v2.Tiers[0].ID, v2.Tiers[1].ID = "new0", "new1"
		rep, err = c.Refresh(ctx, v2)
		if err != nil || rep.Updated != 1 || rep.Promotions[0].Previous != old.Version {
			t.Fatalf("v2 refresh: %+v %v", rep, err)
		}
		if w := writes(); !containsAll(w, "multi", "zadd", "hset", "exec") {
			t.Fatalf("v2 refresh writes %v", w)
		}
		members, err := b.Client.ZRange(ctx, c.tiersKey("ver"), 0, -1).Result()
		if err != nil || len(members) != 4 { // 2 tiers + floor + ceiling
			t.Fatalf("v2 members: %d %v", len(members), err)
		}
		for _, raw := range members {
			m, err := decodeMember(raw, defaultMaxRecordBytes)
			if err != nil || m.version != rep.Promotions[0].Version || strings.HasPrefix(m.tierID, "tier") {
				t.Fatalf("leftover v1 member %+v %v", m, err)
			}
		}
		r, err := c.Match(ctx, QuantityQuery("ver", 6), MatchOptions{Gifts: true})
		if err != nil || r.Tier.ID != "new0" || r.Tier.Gifts[0].SKU != "gift-0" || r.Version == old.Version {
			t.Fatalf("v2 match: %+v %v", r, err)
		}
		// The reader holding a v1 hit still gets v1's gifts for Grace.
		pttl, err := b.Client.PTTL(ctx, c.giftsKey("ver", old.Version)).Result()
		if err != nil || pttl <= 0 || pttl > grace {
			t.Fatalf("old gifts PTTL %v %v, want (0, %v]", pttl, err, grace)
		}
		if pttl, _ := b.Client.PTTL(ctx, c.giftsKey("ver", r.Version)).Result(); pttl != -1 {
			t.Fatalf("new gifts PTTL %v, want none (open End)", pttl)
		}
		held := []Result{old}
		if err := c.Gifts(ctx, held); err != nil || held[0].Err != nil || held[0].Tier.Gifts[0].SKU != "gift-1" {
			t.Fatalf("old gifts within grace: %+v %v", held[0], err)
		}
		if b.Mini != nil {
			b.Mini.FastForward(grace + time.Second)
		} else {
			// real Redis expires the old gifts key on its own clock (PTTL ≤ grace, checked above)
			deadline := time.Now().Add(grace + 10*time.Second)
			for {
				n, err := b.Client.Exists(ctx, c.giftsKey("ver", old.Version)).Result()
				if err == nil && n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("old gifts key still there %v after its grace: %d %v", grace+10*time.Second, n, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		old.Tier.Gifts = nil
		held = []Result{old}
		if err := c.Gifts(ctx, held); err != nil || !errors.Is(held[0].Err, ErrGiftsGone) || held[0].Tier == nil {
			t.Fatalf("old gifts after grace: %+v %v", held[0], err)
		}
		if n, _ := b.Client.Exists(ctx, c.tiersKey("ver"), c.metaKey("ver"), c.giftsKey("ver", r.Version)).Result(); n != 3 {
			t.Fatalf("current keys expired: %d of 3 left", n)
		}
	})
}

func containsAll(have []string, want ...string) bool {
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}

// recordWrites hooks every node client of b and returns a function that
// reports (and resets) the write commands seen since the last call.
func recordWrites(t *testing.T, b *testredis.Backend) func() []string {
	t.Helper()
	rec := &writeRecorder{}
	switch cc := b.Client.(type) {
	case *redis.ClusterClient:
		cc.OnNewNode(func(n *redis.Client) { n.AddHook(rec) })
		if err := cc.ForEachShard(testCtx(t), func(ctx context.Context, n *redis.Client) error { n.AddHook(rec); return nil }); err != nil {
			t.Fatal(err)
		}
	default:
		b.Client.AddHook(rec)
	}
	rec.take()
	return rec.take
}

type writeRecorder struct {
	mu   sync.Mutex
	seen []string
}

var readOnly = map[string]bool{"watch": true, "unwatch": true, "hget": true, "hmget": true, "get": true, "mget": true, "hgetall": true, "zrange": true, "ping": true, "pttl": true, "exists": true, "zcard": true, "hlen": true, "scan": true, "hello": true, "client": true, "cluster": true, "command": true, "select": true}

func (w *writeRecorder) add(cmds ...redis.Cmder) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range cmds {
		if n := c.Name(); !readOnly[n] {
			w.seen = append(w.seen, n)
		}
	}
}

func (w *writeRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.seen
	w.seen = nil
	return s
}

func (w *writeRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (w *writeRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { w.add(cmd); return next(ctx, cmd) }
}
func (w *writeRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { w.add(cmds...); return next(ctx, cmds) }
}

// TestDeleteInfoList: Info and List describe what Refresh stored, on
// every master of a cluster; Delete removes tiers and meta at once and
// leaves the gift lists to expire within Grace.
func TestDeleteInfoList(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		var ids []string
		var promos []gradient.Promotion
		for i := 0; i < 30; i++ { // 30 tags land on all 3 masters
			id := "list-" + string(rune('a'+i%26)) + string(rune('0'+i/26))
			ids = append(ids, id)
			promos = append(promos, simplePromotion(id, 1, 2, 3))
		}
		end := time.Now().Add(48 * time.Hour).Truncate(time.Millisecond)
		promos[0].End = end
		if _, err := c.Refresh(ctx, promos...); err != nil {
			t.Fatal(err)
		}
		in, err := c.Info(ctx, ids[0])
		if err != nil || in.Tiers != 3 || in.GiftTiers != 3 || in.Metric != gradient.Quantity || !in.End.Equal(end) || !in.Start.IsZero() || len(in.Version) != 16 {
			t.Fatalf("Info: %+v %v", in, err)
		}
		list, err := c.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, in := range list {
			got = append(got, in.ID)
		}
		sort.Strings(got)
		sort.Strings(ids)
		if strings.Join(got, ",") != strings.Join(ids, ",") {
			t.Fatalf("List = %v, want %v", got, ids)
		}
		for _, id := range ids {
			res, err := c.Delete(ctx, id, 0)
			if err != nil || res.Outcome != Deleted {
				t.Fatalf("Delete %s: %+v %v", id, res, err)
			}
		}
		if res, err := c.Delete(ctx, ids[0], 0); err != nil || res.Outcome != Absent {
			t.Fatalf("second Delete: %+v %v", res, err)
		}
		// Only the gift lists stay, one per promotion, each for at most
		// Grace (readers that fetched a tier just before keep its gifts).
		left, err := testredis.Keys(ctx, b.Client, b.Prefix)
		if err != nil || len(left) != len(ids) {
			t.Fatalf("%d keys left after Delete, want %d gift lists (%v): %v", len(left), len(ids), err, left)
		}
		for _, k := range left {
			ttl, err := b.Client.PTTL(ctx, k).Result()
			if err != nil || !strings.Contains(k, suffixGifts) || ttl <= 0 || ttl > defaultGrace {
				t.Fatalf("after Delete: key %s ttl %v (%v)", k, ttl, err)
			}
		}
		if _, err := c.Info(ctx, ids[0]); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Info after delete: %v", err)
		}
		if _, err := c.Match(ctx, QuantityQuery(ids[0], 5), MatchOptions{}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Match after delete: %v", err)
		}
		if list, err := c.List(ctx); err != nil || len(list) != 0 {
			t.Fatalf("List after delete: %v %v", list, err)
		}
	})
}
