package cache

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// The benchmarks compare designs and measure overhead; they only run with
// -bench. Real backends join when TIERSET_REDIS_URL / TIERSET_REDIS_CLUSTER
// are set.

//go:embed testdata/match_gifts.lua
var matchGiftsLua string

var matchGiftsScript = redis.NewScript(matchGiftsLua)

// errScriptNotFound is the script's "promotion does not exist" code.
var errScriptNotFound = ErrNotFound

// benchLoop runs run once untimed (its first call may warm up what the
// loop measures), then times it over the benchmark loop; any error
// fails b.
func benchLoop(b *testing.B, run func() error) {
	b.Helper()
	if err := run(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := run(); err != nil {
			b.Fatal(err)
		}
	}
}

// scriptReply maps the script's reply to (member, gifts, error): the one
// place its return codes are interpreted.
func scriptReply(v any) (member string, gifts string, hasGifts bool, err error) {
	switch x := v.(type) {
	case int64:
		if x == 0 {
			return "", "", false, errScriptNotFound
		}
	case []any:
		if len(x) >= 1 {
			m, ok := x[0].(string)
			if !ok {
				break
			}
			if len(x) == 2 {
				g, ok := x[1].(string)
				return m, g, ok, nil
			}
			return m, "", false, nil
		}
	}
	return "", "", false, fmt.Errorf("%w: unexpected script reply %T", ErrCorrupt, v)
}

func benchBackends(b *testing.B) []func(testing.TB) *testredis.Backend {
	out := []func(testing.TB) *testredis.Backend{testredis.Mini}
	if testredis.URL() != "" {
		out = append(out, testredis.Redis)
	}
	if len(testredis.ClusterAddrs()) > 0 {
		out = append(out, testredis.Cluster)
	}
	return out
}

func giftPromos(n, tiers int) []gradient.Promotion {
	var ps []gradient.Promotion
	for i := 0; i < n; i++ {
		ps = append(ps, simplePromotion("cart"+strconv.Itoa(i), seq(tiers)...))
	}
	return ps
}

// scriptGiftsKey is the benchmark-only gift layout the script reads:
// member record -> gift list, so the script needs no msgpack decoding.
func (c *Cache) scriptGiftsKey(id string) string { return c.prefix + tagOpen + id + "}:bench-gifts" }

func setupScriptGifts(ctx context.Context, b *testing.B, be *testredis.Backend, c *Cache, ps []gradient.Promotion) {
	b.Helper()
	for i := range ps {
		e, err := encodePromotion(&ps[i], c.maxBytes)
		if err != nil {
			b.Fatal(err)
		}
		gifts := map[string]string{}
		for k := 0; k < len(e.gifts); k += 2 {
			gifts[e.gifts[k]] = e.gifts[k+1]
		}
		var vals []any
		for _, raw := range e.members {
			m, _ := decodeMember(raw, c.maxBytes)
			if g, ok := gifts[m.tierID]; ok && m.kind == kindTier {
				vals = append(vals, raw, g)
			}
		}
		if err := be.Client.HSet(ctx, c.scriptGiftsKey(ps[i].ID), vals...).Err(); err != nil {
			b.Fatal(err)
		}
	}
	if err := matchGiftsScript.Load(ctx, be.Client).Err(); err != nil {
		b.Fatal(err)
	}
}

// matchCartScript is the single-round-trip alternative: one EVALSHA per
// line (each line touches its own slot), decoded like MatchCart does.
func (c *Cache) matchCartScript(ctx context.Context, qs []Query) ([]Result, error) {
	pipe := c.client.Pipeline()
	cmds := make([]*redis.Cmd, len(qs))
	scores := make([]int64, len(qs))
	rs := make([]Result, len(qs))
	for i := range qs {
		rs[i].Promotion = qs[i].Promotion
		s, err := c.encodeQuery(&qs[i])
		if err != nil {
			rs[i].Err = err
			continue
		}
		scores[i] = s
		id := qs[i].Promotion
		cmds[i] = matchGiftsScript.EvalSha(ctx, pipe, []string{c.tiersKey(id), c.scriptGiftsKey(id)}, strconv.FormatInt(s, 10))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	hits := make([]TierHit, 0, len(qs))
	nowMs := c.now().UnixMilli()
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		raw, giftRaw, hasGiftList, err := scriptReply(cmd.Val())
		if err != nil {
			rs[i].Err = err
			continue
		}
		d, err := c.decode(qs[i].Promotion, raw)
		var m *member
		if d != nil {
			m = &d.m
		}
		switch {
		case err != nil:
			rs[i].Err = err
			continue
		case !m.active(nowMs):
			rs[i].Err = ErrNotActive
			continue
		case m.kind != kindTier:
			rs[i].Err = ErrNoTier
			continue
		}
		hits = append(hits, TierHit{ID: m.tierID, Score: m.score, Threshold: d.threshold, Reward: m.reward, HasGifts: m.hasGifts})
		rs[i].Tier, rs[i].Version = &hits[len(hits)-1], m.version
		if hasGiftList {
			if rs[i].Tier.Gifts, err = decodeGifts(giftRaw, c.maxBytes); err != nil {
				rs[i].Err = err
			}
		}
	}
	return rs, nil
}

// BenchmarkCartGifts compares the two ways of getting a cart's hits with
// their gifts: the library's pipeline + second pipelined HMGET round trip,
// and one Lua script per line returning tier and gifts together.
// Every line hits a tier with gifts (the worst case for two round trips).
func BenchmarkCartGifts(b *testing.B) {
	for _, mk := range benchBackends(b) {
		for _, lines := range []int{1, 20} {
			for _, impl := range []string{"pipeline2rt", "script"} {
				be := mk(b)
				b.Run(fmt.Sprintf("lines=%d/impl=%s/backend=%s", lines, impl, be.Name), func(b *testing.B) {
					ctx := context.Background()
					c := newCache(b, be, Options{})
					ps := giftPromos(lines, 30)
					if _, err := c.Refresh(ctx, ps...); err != nil {
						b.Fatal(err)
					}
					qs := make([]Query, lines)
					for i := range qs {
						qs[i] = QuantityQuery(ps[i].ID, int64(1+i%30))
					}
					run := func() ([]Result, error) { return c.MatchCart(ctx, qs, MatchOptions{Gifts: true}) }
					if impl == "script" {
						setupScriptGifts(ctx, b, be, c, ps)
						run = func() ([]Result, error) { return c.matchCartScript(ctx, qs) }
					}
					rs, err := run()
					if err != nil {
						b.Fatal(err)
					}
					for i, r := range rs {
						if r.Err != nil || len(r.Tier.Gifts) != 1 {
							b.Fatalf("line %d: %+v", i, r)
						}
					}
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						if _, err := run(); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(lines), "ns/line")
				})
			}
		}
	}
}

// rawRun is the raw go-redis baseline for qs: the same ZRANGE per line (a
// pipeline for a cart), keys and bounds prepared outside the timed loop so
// raw pays only the commands, the baseline it stands for.
func rawRun(ctx context.Context, be *testredis.Backend, c *Cache, qs []Query) func() error {
	if len(qs) == 1 {
		key, bound := c.tiersKey(qs[0].Promotion), qs[0].Value.String()
		return func() error {
			return be.Client.ZRangeArgs(ctx, redis.ZRangeArgs{Key: key, Start: bound, Stop: "-inf", ByScore: true, Rev: true, Count: 1}).Err()
		}
	}
	keys, bounds := make([]string, len(qs)), make([]string, len(qs))
	for i := range keys {
		keys[i], bounds[i] = c.tiersKey(qs[i].Promotion), qs[i].Value.String()
	}
	return func() error {
		pipe := be.Client.Pipeline()
		for i := range keys {
			pipe.ZRangeArgs(ctx, redis.ZRangeArgs{Key: keys[i], Start: bounds[i], Stop: "-inf", ByScore: true, Rev: true, Count: 1})
		}
		_, err := pipe.Exec(ctx)
		return err
	}
}

// BenchmarkMatchOverhead compares the library with raw go-redis issuing
// the same ZRANGE (single line and 20-line pipelined cart).
func BenchmarkMatchOverhead(b *testing.B) {
	for _, mk := range benchBackends(b) {
		for _, lines := range []int{1, 20} {
			for _, impl := range []string{"library", "raw"} {
				be := mk(b)
				b.Run(fmt.Sprintf("lines=%d/impl=%s/backend=%s", lines, impl, be.Name), func(b *testing.B) {
					ctx := context.Background()
					c := newCache(b, be, Options{})
					ps := giftPromos(lines, 300)
					if _, err := c.Refresh(ctx, ps...); err != nil {
						b.Fatal(err)
					}
					qs := make([]Query, lines)
					for i := range qs {
						qs[i] = QuantityQuery(ps[i].ID, int64(1+(i*37)%300))
					}
					var run func() error
					switch {
					case impl == "library" && lines == 1:
						run = func() error { _, err := c.Match(ctx, qs[0], MatchOptions{}); return err }
					case impl == "library":
						run = func() error { _, err := c.MatchCart(ctx, qs, MatchOptions{}); return err }
					default:
						run = rawRun(ctx, be, c, qs)
					}
					benchLoop(b, run)
				})
			}
		}
	}
}
