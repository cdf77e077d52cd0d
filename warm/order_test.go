package warm_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/warm"
)

// funcSource runs fn when loaded: fn plays the writers that act between
// the source read and the warm's writes.
type funcSource struct {
	ld warm.Loaded
	fn func()
}

func (f funcSource) Load(context.Context) (warm.Loaded, error) {
	if f.fn != nil {
		f.fn()
	}
	return f.ld, nil
}

// TestFromSourceOrdered: a one-shot warm never moves a promotion back.
// An older snapshot of a promotion Redis holds newer is Stale; the
// source's deletions are ordered deletes (an older one is Stale, a newer
// one leaves a tombstone that refuses the older copy); prune keeps what
// was written after the listing, whether created (not listed) or
// rewritten at a newer revision (Stale); the same revision with other
// content is refused as a conflict while the rest is written; a dry run
// reports deletions and writes nothing.
func TestFromSourceOrdered(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b)
		other := newCache(t, b) // a watcher in another process
		put := func(id string, rev int64) {
			t.Helper()
			if _, err := other.Refresh(ctx, schedPromo(id, rev)); err != nil {
				t.Fatal(err)
			}
		}
		held := func(id string) int64 {
			t.Helper()
			in, err := c.Info(ctx, id)
			if errors.Is(err, cache.ErrNotFound) {
				return -1
			}
			if err != nil {
				t.Fatal(err)
			}
			return in.Revision
		}
		put("newer", 5)
		put("gone", 2)
		put("kept", 9)
		put("extra", 1)
		put("moved", 1)
		src := funcSource{
			ld: warm.Loaded{
				Promotions: ordered{{"newer", 3}, {"fresh", 4}}.promos(),
				Deleted:    []warm.Deletion{{ID: "gone", Revision: 4}, {ID: "kept", Revision: 6}, {ID: "never", Revision: 3}},
			},
			fn: func() { // after the read, before the writes
				put("created", 7) // a promotion the snapshot does not know yet
				put("moved", 8)   // rewritten at a newer revision
			},
		}
		sum, err := warm.FromSource(ctx, c, src, warm.Options{Prune: true, MaxPrune: 10})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{"Added": {"fresh"}, "Stale": {"kept", "moved", "newer"}, "Deleted": {"gone", "never"}, "Pruned": {"extra"}}
		got := map[string][]string{"Added": sum.Added, "Stale": sum.Stale, "Deleted": sum.Deleted, "Pruned": sum.Pruned}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("summary %v, want %v", got, want)
		}
		for id, rev := range map[string]int64{"newer": 5, "fresh": 4, "gone": -1, "kept": 9, "never": -1, "extra": -1, "created": 7, "moved": 8} {
			if h := held(id); h != rev {
				t.Errorf("%s: Redis holds revision %d, want %d", id, h, rev)
			}
		}
		// The deletion's tombstone refuses the copy it deleted.
		if rep, err := c.Refresh(ctx, schedPromo("gone", 2)); err != nil || rep.Stale != 1 {
			t.Fatalf("refresh of a deleted revision: %+v %v", rep, err)
		}

		// Same revision, other content: refused and named, the rest written.
		conflict := schedPromo("fresh", 4)
		conflict.Tiers[0].Reward.Percent = conflict.Tiers[0].Reward.Percent.Add(conflict.Tiers[0].Reward.Percent)
		sum, err = warm.FromSource(ctx, c, funcSource{ld: warm.Loaded{Promotions: append(ordered{{"later", 2}}.promos(), conflict)}}, warm.Options{})
		var rc *cache.RevisionConflictError
		if !errors.Is(err, warm.ErrRefused) || !errors.As(err, &rc) || rc.ID != "fresh" || rc.Revision != 4 ||
			!reflect.DeepEqual(sum.Refused, []string{"fresh"}) || !reflect.DeepEqual(sum.Added, []string{"later"}) {
			t.Fatalf("conflict: %+v %v", sum, err)
		}

		// A dry run lists the deletions and writes nothing.
		before := snapshot(t, b.Client, b.Prefix)
		sum, err = warm.FromSource(ctx, c, funcSource{ld: warm.Loaded{Deleted: []warm.Deletion{{ID: "later", Revision: 3}}}}, warm.Options{DryRun: true})
		if err != nil || !reflect.DeepEqual(sum.Deleted, []string{"later"}) {
			t.Fatalf("dry run: %+v %v", sum, err)
		}
		if after := snapshot(t, b.Client, b.Prefix); !reflect.DeepEqual(before, after) {
			t.Fatal("a dry run wrote")
		}
	})
}

type ordered []idRev

type idRev struct {
	id  string
	rev int64
}

func (o ordered) promos() []gradient.Promotion {
	out := make([]gradient.Promotion, len(o))
	for i, p := range o {
		out[i] = schedPromo(p.id, p.rev)
	}
	return out
}
