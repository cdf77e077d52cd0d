package warm_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/warm"
)

// fakeSource returns fixed promotions and skips.
type fakeSource struct {
	ld  warm.Loaded
	err error
}

func (f fakeSource) Load(context.Context) (warm.Loaded, error) { return f.ld, f.err }

func TestFromSourceFile(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		c := newCache(t, b)
		src := warm.File{Path: filepath.Join("..", "examples", "rules.json")}
		want := sample(t)
		sum, err := warm.FromSource(t.Context(), c, src, warm.Options{Now: clock})
		if err != nil || len(sum.Added) != len(want) {
			t.Fatalf("FromSource(File) = added %v, %v; want the %d promotions of the file", sum.Added, err, len(want))
		}
		if _, err := warm.FromSource(t.Context(), c, warm.File{Path: "does-not-exist.json"}, warm.Options{}); err == nil {
			t.Fatal("a missing file warmed without error")
		}
	})
}

// TestFromSourceKeepsSkipped: a promotion the source refuses is reported
// as refused and, even with Prune, its stored version stays.
func TestFromSourceKeepsSkipped(t *testing.T) {
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		c := newCache(t, b)
		ctx := t.Context()
		ps := sample(t)
		mustWarm(t, ctx, c, ps)
		opts := warm.Options{Now: clock}
		bad, gone := ps[0].ID, ps[1].ID
		skipErr := errors.New("row refused")
		src := fakeSource{ld: warm.Loaded{Promotions: ps[2:], Skipped: []warm.Skipped{{ID: bad, Err: skipErr}}}}
		opts.Prune = true
		sum, err := warm.FromSource(ctx, c, src, opts)
		if !errors.Is(err, warm.ErrRefused) || !errors.Is(err, skipErr) {
			t.Fatalf("FromSource = %v, want ErrRefused wrapping the skip reason", err)
		}
		if !slices.Equal(sum.Refused, []string{bad}) || !slices.Equal(sum.Pruned, []string{gone}) {
			t.Fatalf("refused %v, pruned %v; want [%s] and [%s]", sum.Refused, sum.Pruned, bad, gone)
		}
		if _, err := c.Info(ctx, bad); err != nil {
			t.Fatalf("the skipped promotion was removed: %v", err)
		}
		if _, err := c.Info(ctx, gone); !errors.Is(err, cache.ErrNotFound) {
			t.Fatalf("the promotion without a row is still stored: %v", err)
		}
		if _, err := warm.FromSource(ctx, c, fakeSource{err: errors.New("db down")}, opts); err == nil {
			t.Fatal("a failing source warmed without error")
		}
	})
}
