package warm_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/rules"
	"github.com/tierset/tierset/warm"
)

var testNow = time.Date(2026, 12, 15, 0, 0, 0, 0, time.UTC)

// clock is the tests' Now: always testNow.
func clock() time.Time { return testNow }

// mustWarm warms promos into c as of testNow, failing the test on error.
func mustWarm(t *testing.T, ctx context.Context, c *cache.Cache, promos []gradient.Promotion) {
	t.Helper()
	if _, err := warm.Warm(ctx, c, promos, warm.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
}

func sample(t *testing.T) []gradient.Promotion {
	t.Helper()
	ps, err := rules.ParseFile(filepath.Join("..", "examples", "rules.json"), rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func ids(ps []gradient.Promotion) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

func newCache(t *testing.T, b *testredis.Backend) *cache.Cache {
	t.Helper()
	c, err := cache.New(b.Client, cache.Options{Prefix: b.Prefix, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// snapshot reads every key under prefix with its full content and TTL
// presence, so tests can prove a run wrote nothing.
func snapshot(t *testing.T, c redis.UniversalClient, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := testredis.Keys(ctx, c, prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		typ := c.Type(ctx, k).Val()
		var v any
		switch typ {
		case "zset":
			v = c.ZRangeWithScores(ctx, k, 0, -1).Val()
		case "hash":
			v = c.HGetAll(ctx, k).Val()
		default:
			v = "unexpected type " + typ
		}
		out[k] = fmt.Sprintf("%s %v ttl=%v", typ, v, c.PTTL(ctx, k).Val() > 0)
	}
	return out
}

func TestWarmIdempotent(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b)
		promos := sample(t)
		var calls [][2]int
		opts := warm.Options{Now: clock, Batch: 4,
			Progress: func(done, total int) { calls = append(calls, [2]int{done, total}) }}
		s1, err := warm.Warm(ctx, c, promos, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s1.Added, ids(promos)) || len(s1.Updated)+len(s1.Unchanged)+len(s1.Refused) != 0 {
			t.Errorf("first run: %+v", s1)
		}
		want := [][2]int{{0, 6}, {4, 6}, {6, 6}}
		if !reflect.DeepEqual(calls, want) {
			t.Errorf("progress calls %v, want %v", calls, want)
		}
		before := snapshot(t, b.Client, b.Prefix)
		if len(before) == 0 {
			t.Fatal("nothing stored")
		}
		s2, err := warm.Warm(ctx, c, promos, warm.Options{Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s2.Unchanged, ids(promos)) || len(s2.Added)+len(s2.Updated) != 0 {
			t.Errorf("second run: %+v", s2)
		}
		if after := snapshot(t, b.Client, b.Prefix); !reflect.DeepEqual(before, after) {
			t.Errorf("second run changed Redis:\nbefore %v\nafter  %v", before, after)
		}
	})
}

func TestWarmDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b)
		promos := sample(t)
		// Nothing stored yet: a dry run says "all added" and writes nothing.
		s, err := warm.Warm(ctx, c, promos, warm.Options{DryRun: true, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s.Added, ids(promos)) {
			t.Errorf("dry run on empty: %+v", s)
		}
		if n, _ := testredis.CountKeys(ctx, b.Client, b.Prefix); n != 0 {
			t.Fatalf("dry run wrote %d keys", n)
		}
		mustWarm(t, ctx, c, promos[:5])
		before := snapshot(t, b.Client, b.Prefix)
		// Change one, drop one, add one: the dry run names each and writes nothing.
		changed := append([]gradient.Promotion(nil), promos[1:]...)
		changed[0].Tiers = append([]gradient.Tier(nil), changed[0].Tiers...)
		changed[0].Tiers[0].Reward.Amount = decimal.NewFromInt(11)
		for _, prune := range []bool{false, true} {
			s, err := warm.Warm(ctx, c, changed, warm.Options{DryRun: true, Prune: prune, Now: clock})
			if err != nil {
				t.Fatal(err)
			}
			wantPrune := []string{promos[0].ID}
			gotPrune := s.WouldPrune
			if prune {
				gotPrune = s.Pruned
			}
			if !reflect.DeepEqual(s.Updated, []string{promos[1].ID}) || !reflect.DeepEqual(s.Added, []string{promos[5].ID}) ||
				!reflect.DeepEqual(s.Unchanged, ids(promos[2:5])) || !reflect.DeepEqual(gotPrune, wantPrune) || !s.DryRun {
				t.Errorf("prune=%v: %+v", prune, s)
			}
			if after := snapshot(t, b.Client, b.Prefix); !reflect.DeepEqual(before, after) {
				t.Errorf("prune=%v: dry run changed Redis", prune)
			}
		}
		// The real run then does exactly what the dry run said.
		s, err = warm.Warm(ctx, c, changed, warm.Options{Prune: true, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s.Updated, []string{promos[1].ID}) || !reflect.DeepEqual(s.Added, []string{promos[5].ID}) ||
			!reflect.DeepEqual(s.Pruned, []string{promos[0].ID}) {
			t.Errorf("real run: %+v", s)
		}
	})
}

func TestWarmPrune(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b)
		promos := sample(t)
		mustWarm(t, ctx, c, promos)
		kept := promos[2:]
		gone := ids(promos[:2])
		sort.Strings(gone)
		s, err := warm.Warm(ctx, c, kept, warm.Options{Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s.WouldPrune, gone) || len(s.Pruned) != 0 {
			t.Errorf("without prune: %+v", s)
		}
		for _, id := range gone {
			if _, err := c.Info(ctx, id); err != nil {
				t.Errorf("%s deleted without -prune: %v", id, err)
			}
		}
		s, err = warm.Warm(ctx, c, kept, warm.Options{Prune: true, Now: clock, MaxPrune: len(gone)})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s.Pruned, gone) || len(s.WouldPrune) != 0 || !reflect.DeepEqual(s.Unchanged, ids(kept)) {
			t.Errorf("with prune: %+v", s)
		}
		for _, id := range gone {
			if _, err := c.Info(ctx, id); !errors.Is(err, cache.ErrNotFound) {
				t.Errorf("%s after prune: %v, want ErrNotFound", id, err)
			}
		}
		list, err := c.List(ctx)
		if err != nil || len(list) != len(kept) {
			t.Errorf("List after prune: %d, %v", len(list), err)
		}
	})
}

// TestWarmRefusedAndEnded: a promotion the cache refuses (a threshold
// scoring 2^53, which the cache reserves for its ceiling sentinel and
// gradient's validation also refuses) is refused alone and writes
// nothing; the rest is written. An ended promotion is skipped.
func TestWarmRefusedAndEnded(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b)
		promos := sample(t)
		huge := gradient.Promotion{ID: "huge", Metric: gradient.Amount, MinorDigits: 2, Tiers: []gradient.Tier{{
			ID: "t", Threshold: decimal.RequireFromString("90071992547409.92"),
			Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(1)}}}}
		ended := promos[0]
		ended.ID = "ended"
		ended.End = testNow.Add(-time.Hour)
		ended.Start = time.Time{}
		in := append([]gradient.Promotion{huge, ended}, promos...)
		s, err := warm.Warm(ctx, c, in, warm.Options{Now: clock})
		if !errors.Is(err, warm.ErrRefused) || !errors.Is(err, gradient.ErrThreshold) {
			t.Fatalf("err = %v, want ErrRefused wrapping gradient.ErrThreshold", err)
		}
		if !reflect.DeepEqual(s.Refused, []string{"huge"}) || len(s.Errors) != 1 ||
			!reflect.DeepEqual(s.Ended, []string{"ended"}) || !reflect.DeepEqual(s.Added, ids(promos)) {
			t.Errorf("summary: %+v", s)
		}
		for _, id := range []string{"huge", "ended"} {
			if _, err := c.Info(ctx, id); !errors.Is(err, cache.ErrNotFound) {
				t.Errorf("%s: %v, want ErrNotFound", id, err)
			}
		}
	})
}

// TestWarmPruneLimit: a Prune that would delete more than MaxPrune (by
// default 10% of what is stored, at least 1) writes and deletes nothing,
// in a dry run too, and lists what would have gone.
func TestWarmPruneLimit(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b)
		promos := sample(t)
		mustWarm(t, ctx, c, promos)
		before := snapshot(t, b.Client, b.Prefix)
		changed := append([]gradient.Promotion(nil), promos[2:]...)
		changed[0].Tiers = changed[0].Tiers[:1] // an update that must not be written either
		gone := ids(promos[:2])
		sort.Strings(gone)
		cases := []struct {
			name string
			opts warm.Options
		}{
			{"default limit", warm.Options{Prune: true}},
			{"default limit, dry run", warm.Options{Prune: true, DryRun: true}},
			{"explicit limit below", warm.Options{Prune: true, MaxPrune: len(gone) - 1}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				tc.opts.Now = clock
				s, err := warm.Warm(ctx, c, changed, tc.opts)
				if !errors.Is(err, warm.ErrPruneLimit) {
					t.Fatalf("err = %v, want ErrPruneLimit", err)
				}
				if !reflect.DeepEqual(s.WouldPrune, gone) || len(s.Pruned)+len(s.Added)+len(s.Updated) != 0 {
					t.Errorf("summary %+v, want only WouldPrune %v", s, gone)
				}
				if after := snapshot(t, b.Client, b.Prefix); !reflect.DeepEqual(after, before) {
					t.Error("a refused prune changed Redis")
				}
			})
		}
		s, err := warm.Warm(ctx, c, changed, warm.Options{Prune: true, MaxPrune: len(gone), Now: clock})
		if err != nil || !reflect.DeepEqual(s.Pruned, gone) {
			t.Errorf("at the limit: %+v, %v", s, err)
		}
	})
}

// TestWarmRepairsDamage: a promotion whose tiers key is gone is reported
// Repaired (also by a dry run, which writes nothing) and healed by a run.
func TestWarmRepairsDamage(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b)
		promos := sample(t)
		opts := warm.Options{Now: clock}
		mustWarm(t, ctx, c, promos)
		victim := promos[0].ID
		if err := b.Client.Del(ctx, b.Prefix+":{p:"+victim+"}:tiers").Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Match(ctx, cache.QuantityQuery(victim, 5), cache.MatchOptions{}); !errors.Is(err, cache.ErrDamaged) {
			t.Fatalf("match of the damaged promotion: %v, want ErrDamaged", err)
		}
		before := snapshot(t, b.Client, b.Prefix)
		dry, err := warm.Warm(ctx, c, promos, warm.Options{Now: clock, DryRun: true})
		if err != nil || !reflect.DeepEqual(dry.Repaired, []string{victim}) || len(dry.Unchanged) != len(promos)-1 {
			t.Fatalf("dry run: %+v %v, want %s repaired", dry, err, victim)
		}
		if after := snapshot(t, b.Client, b.Prefix); !reflect.DeepEqual(before, after) {
			t.Fatal("the dry run changed Redis")
		}
		s, err := warm.Warm(ctx, c, promos, opts)
		if err != nil || !reflect.DeepEqual(s.Repaired, []string{victim}) || len(s.Unchanged) != len(promos)-1 {
			t.Fatalf("run: %+v %v, want %s repaired", s, err, victim)
		}
		if _, err := c.Match(ctx, cache.QuantityQuery(victim, 5), cache.MatchOptions{}); err != nil {
			t.Fatalf("match after the repair: %v", err)
		}
		s3, err := warm.Warm(ctx, c, promos, opts)
		if err != nil || len(s3.Unchanged) != len(promos) {
			t.Fatalf("third run: %+v %v, want all unchanged", s3, err)
		}
	})
}
