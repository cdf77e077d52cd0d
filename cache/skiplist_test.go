package cache

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// TestCeilingPadding: the ceiling of a ladder of more than skiplistAbove
// tiers is one byte longer than Redis's default zset-max-listpack-value
// (padding in its tier ID), every other member is as before, and the
// padded and unpadded ceilings decode to the same record but for the
// ignored tier ID.
func TestCeilingPadding(t *testing.T) {
	t.Parallel()
	rows := []struct {
		tiers  int
		padded bool
	}{{1, false}, {skiplistAbove, false}, {skiplistAbove + 1, true}, {112, true}, {300, true}}
	for _, row := range rows {
		t.Run(fmt.Sprint(row.tiers), func(t *testing.T) {
			t.Parallel()
			p := ladderOf("pad", row.tiers)
			e, err := encodePromotion(&p, defaultMaxRecordBytes)
			if err != nil {
				t.Fatal(err)
			}
			raw := e.members[len(e.members)-1]
			m, err := decodeMember(raw, defaultMaxRecordBytes)
			if err != nil || m.kind != kindCeiling {
				t.Fatalf("ceiling %+v %v", m, err)
			}
			if got := m.tierID != ""; got != row.padded {
				t.Fatalf("ceiling tier ID %q, padded %v, want %v", m.tierID, got, row.padded)
			}
			if row.padded && len(raw) != listpackMaxValue+1 {
				t.Fatalf("padded ceiling of %d bytes, want %d", len(raw), listpackMaxValue+1)
			}
			for _, other := range e.members[:len(e.members)-1] {
				if len(other) > listpackMaxValue {
					t.Fatalf("member of %d bytes besides the ceiling: a listpack ladder would convert anyway", len(other))
				}
			}
			plain := m
			plain.tierID = ""
			var buf bytes.Buffer
			if err := encodeMember(&buf, &plain); err != nil {
				t.Fatal(err)
			}
			back, err := decodeMember(buf.String(), defaultMaxRecordBytes)
			if m.tierID = ""; err != nil || !reflect.DeepEqual(back, m) {
				t.Fatalf("unpadded ceiling %+v %v, want %+v", back, err, m)
			}
		})
	}
	// A MaxRecordBytes too small for the padding keeps the ceiling
	// unpadded (the reader could not read it back), at the same version.
	p := ladderOf("small", skiplistAbove+1)
	e, err := encodePromotion(&p, listpackMaxValue)
	if err != nil {
		t.Fatal(err)
	}
	full, err := encodePromotion(&p, defaultMaxRecordBytes)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.members[len(e.members)-1]); n > listpackMaxValue || e.version != full.version {
		t.Fatalf("ceiling of %d bytes at MaxRecordBytes %d, version %s vs %s", n, listpackMaxValue, e.version, full.version)
	}
}

// ladderOf is a promotion of n tiers whose members are all at most
// listpackMaxValue bytes, as real ladders' are (52-57 B), so the padded
// ceiling alone decides the encoding.
func ladderOf(id string, n int) gradient.Promotion {
	th := make([]int64, n)
	for i := range th {
		th[i] = int64(3 * (i + 1))
	}
	return simplePromotion(id, th...)
}

// TestLadderEncoding: on a real Redis with the default ZSET settings, a
// ladder of at most skiplistAbove tiers is a listpack and a longer one a
// skiplist.
func TestLadderEncoding(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		if b.IsCluster() {
			t.Skip("CONFIG GET and OBJECT ENCODING are per node; the single server answers for both")
		}
		cfg, err := b.Client.ConfigGet(ctx, "zset-max-listpack-*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if cfg["zset-max-listpack-value"] != "64" || cfg["zset-max-listpack-entries"] != "128" {
			t.Skipf("server ZSET settings %v are not the defaults this test is about", cfg)
		}
		c := newCache(t, b, Options{})
		rows := []struct {
			tiers int
			want  string
		}{{3, "listpack"}, {skiplistAbove, "listpack"}, {skiplistAbove + 1, "skiplist"}, {112, "skiplist"}}
		for _, row := range rows {
			p := ladderOf(fmt.Sprintf("enc%d", row.tiers), row.tiers)
			if _, err := c.Refresh(ctx, p); err != nil {
				t.Fatal(err)
			}
			got, err := b.Client.ObjectEncoding(ctx, c.tiersKey(p.ID)).Result()
			if err != nil || got != row.want {
				t.Fatalf("%d tiers: encoding %q %v, want %s", row.tiers, got, err, row.want)
			}
		}
	})
}

// TestUnpaddedLadderMatches: a ladder written before ceilings were padded
// (an empty tier ID on every sentinel, a listpack on a real Redis) answers
// every query exactly as the padded one does, from Redis, from the near
// cache and through Ladder, and a Refresh of the same content calls it
// Unchanged and leaves it as it is.
func TestUnpaddedLadderMatches(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		rng := rand.New(rand.NewSource(7))
		p := ladderOf("unpadded", 40)
		ms := matchers(t, p)
		vals := boundaryValues(ms[p.ID], rng, 40)
		rep, err := c.Refresh(ctx, p)
		if err != nil || rep.Added != 1 {
			t.Fatalf("refresh %+v %v", rep, err)
		}
		key := c.tiersKey(p.ID)
		padded := readEverything(t, ctx, c, b, p, ms, vals)

		zs, err := b.Client.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		ceiling := zs[len(zs)-1].Member.(string)
		m, err := decodeMember(ceiling, defaultMaxRecordBytes)
		if err != nil || m.kind != kindCeiling || m.tierID == "" {
			t.Fatalf("stored ceiling %+v %v, want a padded one", m, err)
		}
		m.tierID = ""
		var buf bytes.Buffer
		if err := encodeMember(&buf, &m); err != nil {
			t.Fatal(err)
		}
		pipe := b.Client.TxPipeline()
		pipe.Del(ctx, key)
		for _, z := range zs[:len(zs)-1] {
			pipe.ZAdd(ctx, key, z)
		}
		pipe.ZAdd(ctx, key, redis.Z{Score: zs[len(zs)-1].Score, Member: buf.String()})
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		checkEncoding(t, ctx, b, key, "listpack")

		if got := readEverything(t, ctx, c, b, p, ms, vals); !reflect.DeepEqual(got, padded) {
			t.Fatalf("unpadded ladder answers\n%+v\nwant, as padded,\n%+v", got, padded)
		}
		rep, err = c.Refresh(ctx, p)
		if err != nil || rep.Unchanged != 1 || rep.Promotions[0].Version != padded.ladder.Version {
			t.Fatalf("refresh of the same content over the unpadded ladder: %+v %v", rep, err)
		}
		if last, err := b.Client.ZRange(ctx, key, -1, -1).Result(); err != nil || len(last) != 1 || last[0] != buf.String() {
			t.Fatalf("ceiling after the Unchanged refresh %q %v, want the unpadded one kept", last, err)
		}
	})
}

// everything is what readEverything saw: per MatchOptions the cart's
// results, from Redis and from a near cache (real Redis only), and the
// Ladder.
type everything struct {
	redis, near [][]Result
	ladder      Ladder
}

// readEverything reads p at every value of vals with each MatchOptions,
// checks each answer against the oracle, and returns the answers.
func readEverything(t *testing.T, ctx context.Context, c *Cache, b *testredis.Backend, p gradient.Promotion, ms map[string]*gradient.Matcher, vals []int64) everything {
	t.Helper()
	qs := make([]Query, len(vals))
	for i, v := range vals {
		qs[i] = queryFor(&p, v)
	}
	cart := func(c *Cache) [][]Result {
		t.Helper()
		var out [][]Result
		for _, opt := range matchOpts {
			rs, err := c.MatchCart(ctx, qs, opt)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range rs {
				if v, why := verdict(ms[p.ID], vals[i], r, opt); v != vOK {
					t.Fatalf("%+v: %s %s", opt, v, why)
				}
			}
			out = append(out, rs)
		}
		return out
	}
	var e everything
	e.redis = cart(c)
	if b.Real() && !b.IsCluster() {
		e.near = cart(newNearCache(t, nearClient(t, b), b.Prefix, Options{}))
	}
	var err error
	if e.ladder, err = c.Ladder(ctx, p.ID); err != nil || len(e.ladder.Tiers) != len(p.Tiers) {
		t.Fatalf("Ladder: %d tiers %v", len(e.ladder.Tiers), err)
	}
	return e
}

// checkEncoding checks key's encoding where the server has one to say
// (real Redis with the default ZSET settings).
func checkEncoding(t *testing.T, ctx context.Context, b *testredis.Backend, key, want string) {
	t.Helper()
	if !b.Real() || b.IsCluster() {
		return
	}
	if v, err := b.Client.ConfigGet(ctx, "zset-max-listpack-value").Result(); err != nil || v["zset-max-listpack-value"] != "64" {
		return
	}
	if got, err := b.Client.ObjectEncoding(ctx, key).Result(); err != nil || got != want {
		t.Fatalf("encoding of %s: %q %v, want %s", key, got, err, want)
	}
}
