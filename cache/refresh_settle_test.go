package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// TestRefreshBatchDecidesAsOne: a Refresh of many promotions, whose
// unchanged ones are settled by one read without WATCH, gives every
// promotion the outcome, held revision and stored state that a Refresh
// of that promotion alone (WATCH, probe, decide) gives, for every row of
// the ordering rule; and it WATCHes exactly the promotions not settled
// Unchanged.
func TestRefreshBatchDecidesAsOne(t *testing.T) {
	t.Parallel()
	type prior struct {
		rev     int64
		content int
	}
	tests := []struct {
		name    string
		before  []prior // refreshed one by one; content < 0 deletes at rev
		damage  func(ctx context.Context, rdb redis.UniversalClient, c *Cache, id string) error
		rev     int64
		content int
		want    RefreshOutcome
		held    int64
		settled bool // decided without WATCH
	}{
		{name: "same revision same content", before: []prior{{2, 2}}, rev: 2, content: 2, want: Unchanged, held: 2, settled: true},
		{name: "unordered same content", before: []prior{{0, 1}}, rev: 0, content: 1, want: Unchanged, held: 0, settled: true},
		{name: "unordered same content keeps revision", before: []prior{{5, 5}}, rev: 0, content: 5, want: Unchanged, held: 5, settled: true},
		{name: "newer revision same content records it", before: []prior{{2, 2}}, rev: 5, content: 2, want: Unchanged, held: 5},
		{name: "older revision", before: []prior{{2, 2}}, rev: 1, content: 1, want: Stale, held: 2},
		{name: "older revision same content", before: []prior{{3, 3}}, rev: 1, content: 3, want: Stale, held: 3},
		{name: "same revision other content", before: []prior{{2, 2}}, rev: 2, content: 3, want: Conflict, held: 2},
		{name: "newer revision other content", before: []prior{{1, 1}}, rev: 2, content: 2, want: Updated, held: 2},
		{name: "nothing stored", rev: 1, content: 1, want: Added, held: 1},
		{name: "tombstone", before: []prior{{1, 1}, {2, -1}}, rev: 2, content: 1, want: Stale, held: 2},
		{name: "unordered over a tombstone", before: []prior{{1, 1}, {2, -1}}, rev: 0, content: 1, want: Stale, held: 2},
		{name: "tiers key evicted", before: []prior{{1, 1}}, rev: 1, content: 1, want: Repaired, held: 1,
			damage: func(ctx context.Context, rdb redis.UniversalClient, c *Cache, id string) error {
				return rdb.Del(ctx, c.tiersKey(id)).Err()
			}},
		{name: "meta field removed", before: []prior{{1, 1}}, rev: 1, content: 1, want: Repaired, held: 1,
			damage: func(ctx context.Context, rdb redis.UniversalClient, c *Cache, id string) error {
				return rdb.HDel(ctx, c.metaKey(id), metaUpdated).Err()
			}},
		{name: "written before revisions", before: []prior{{0, 4}}, rev: 0, content: 4, want: Unchanged, held: 0, settled: true,
			damage: func(ctx context.Context, rdb redis.UniversalClient, c *Cache, id string) error {
				return rdb.HDel(ctx, c.metaKey(id), metaRev).Err()
			}},
	}
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		one, err := New(b.Client, Options{Prefix: b.Prefix + ":one"})
		if err != nil {
			t.Fatal(err)
		}
		batch, err := New(b.Client, Options{Prefix: b.Prefix + ":batch"})
		if err != nil {
			t.Fatal(err)
		}
		id := func(k int) string { return fmt.Sprintf("s%02d", k) }
		for _, c := range []*Cache{one, batch} {
			for k, tt := range tests {
				for _, p := range tt.before {
					if p.content < 0 {
						_, err = c.Delete(ctx, id(k), p.rev)
					} else {
						_, err = c.Refresh(ctx, revPromotion(id(k), p.rev, p.content))
					}
					if err != nil {
						t.Fatalf("%s: before: %v", tt.name, err)
					}
				}
				if tt.damage != nil {
					if err := tt.damage(ctx, b.Client, c, id(k)); err != nil {
						t.Fatalf("%s: damage: %v", tt.name, err)
					}
				}
			}
		}
		singles := make([]RefreshResult, len(tests))
		for k, tt := range tests {
			rep, err := one.Refresh(ctx, revPromotion(id(k), tt.rev, tt.content))
			if len(rep.Promotions) != 1 || (err != nil) != (tt.want == Conflict) {
				t.Fatalf("%s alone: %+v %v", tt.name, rep, err)
			}
			singles[k] = rep.Promotions[0]
		}
		ps := make([]gradient.Promotion, len(tests))
		for k, tt := range tests {
			ps[k] = revPromotion(id(k), tt.rev, tt.content)
		}
		watches := countCommands(t, b, "watch")
		rep, err := batch.Refresh(ctx, ps...)
		if !errors.Is(err, ErrRevisionConflict) || len(rep.Promotions) != len(tests) {
			t.Fatalf("batch: %+v %v, want every promotion and a revision conflict", rep, err)
		}
		wantWatches := 0
		for k, tt := range tests {
			got, alone := rep.Promotions[k], singles[k]
			if got.Outcome != tt.want || got.Revision != tt.held {
				t.Errorf("%s: batch %v held %d, want %v held %d", tt.name, got.Outcome, got.Revision, tt.want, tt.held)
			}
			if got != alone {
				t.Errorf("%s: batch %+v, alone %+v", tt.name, got, alone)
			}
			a, aerr := one.Info(ctx, id(k))
			g, gerr := batch.Info(ctx, id(k))
			if a.Version != g.Version || a.Revision != g.Revision || !errors.Is(gerr, aerr) && (aerr != nil || gerr != nil) {
				t.Errorf("%s: stored after batch %+v %v, after alone %+v %v", tt.name, g, gerr, a, aerr)
			}
			if !tt.settled {
				wantWatches++
			}
		}
		if got := watches(); got != wantWatches {
			t.Errorf("batch sent %d WATCH, want %d (one per promotion not settled Unchanged)", got, wantWatches)
		}
	})
}

// countCommands hooks b's client (every node of a cluster) and returns a
// function that reports how many commands named name it has sent since.
func countCommands(t *testing.T, b *testredis.Backend, name string) func() int {
	t.Helper()
	h := &commandCounter{name: name}
	switch cc := b.Client.(type) {
	case *redis.ClusterClient:
		cc.OnNewNode(func(n *redis.Client) { n.AddHook(h) })
		if err := cc.ForEachShard(testCtx(t), func(ctx context.Context, n *redis.Client) error { n.AddHook(h); return nil }); err != nil {
			t.Fatal(err)
		}
	default:
		b.Client.AddHook(h)
	}
	return func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.n
	}
}

type commandCounter struct {
	name string
	mu   sync.Mutex
	n    int
}

func (h *commandCounter) count(cmds ...redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cmds {
		if c.Name() == h.name {
			h.n++
		}
	}
}

func (h *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(cmds...)
		return next(ctx, cmds)
	}
}
