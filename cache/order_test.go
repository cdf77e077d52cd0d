package cache

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// revPromotion is promotion id at revision rev with content that depends
// on content: equal content values give equal versions.
func revPromotion(id string, rev int64, content int) gradient.Promotion {
	p := simplePromotion(id, 3, 5, int64(10+content))
	p.Tiers[0].Reward.Percent = decimal.NewFromInt(int64(1 + content%99))
	p.Revision = rev
	return p
}

// TestRefreshOrdered: each step's outcome and the revision Redis holds
// after it, for writes and deletes carrying revisions in every order
// (0 = unordered), on every backend.
func TestRefreshOrdered(t *testing.T) {
	t.Parallel()
	type step struct {
		del      bool  // Delete instead of Refresh
		rev      int64 // the write's revision
		content  int   // the write's content (Refresh)
		want     RefreshOutcome
		held     int64 // RefreshResult.Revision
		conflict bool  // the call's error is a *RevisionConflictError
	}
	tests := []struct {
		name  string
		steps []step
		// final: the content stored at the end, -1 when nothing is stored.
		final int
	}{
		{"newer replaces older", []step{{rev: 1, content: 1, want: Added, held: 1}, {rev: 2, content: 2, want: Updated, held: 2}}, 2},
		{"older is stale", []step{{rev: 2, content: 2, want: Added, held: 2}, {rev: 1, content: 1, want: Stale, held: 2}}, 2},
		{"same revision same content", []step{{rev: 2, content: 2, want: Added, held: 2}, {rev: 2, content: 2, want: Unchanged, held: 2}}, 2},
		{"same revision other content", []step{{rev: 2, content: 2, want: Added, held: 2}, {rev: 2, content: 3, want: Conflict, held: 2, conflict: true}}, 2},
		{"newer revision same content records it", []step{{rev: 2, content: 2, want: Added, held: 2}, {rev: 5, content: 2, want: Unchanged, held: 5},
			{rev: 4, content: 4, want: Stale, held: 5}}, 2},
		{"unordered replaces unordered", []step{{rev: 0, content: 5, want: Added, held: 0}, {rev: 0, content: 1, want: Updated, held: 0}, {rev: 1, content: 2, want: Updated, held: 1}}, 2},
		{"unordered never replaces ordered", []step{{rev: 5, content: 5, want: Added, held: 5}, {rev: 0, content: 1, want: Stale, held: 5}, {rev: 6, content: 2, want: Updated, held: 6}}, 2},
		{"unordered same content keeps revision", []step{{rev: 5, content: 5, want: Added, held: 5}, {rev: 0, content: 5, want: Unchanged, held: 5}}, 5},
		{"delete leaves a tombstone", []step{{rev: 1, content: 1, want: Added, held: 1}, {del: true, rev: 2, want: Deleted, held: 2},
			{rev: 1, content: 1, want: Stale, held: 2}, {rev: 2, content: 7, want: Stale, held: 2}, {rev: 3, content: 3, want: Added, held: 3}}, 3},
		{"older delete is stale", []step{{rev: 3, content: 3, want: Added, held: 3}, {del: true, rev: 2, want: Stale, held: 3}}, 3},
		{"delete at the stored revision", []step{{rev: 3, content: 3, want: Added, held: 3}, {del: true, rev: 3, want: Deleted, held: 3},
			{del: true, rev: 3, want: Absent, held: 3}, {del: true, rev: 2, want: Stale, held: 3}}, -1},
		{"delete of nothing still leaves a tombstone", []step{{del: true, rev: 4, want: Absent, held: 4}, {rev: 4, content: 4, want: Stale, held: 4},
			{rev: 5, content: 5, want: Added, held: 5}}, 5},
		{"unordered delete", []step{{rev: 3, content: 3, want: Added, held: 3}, {del: true, rev: 0, want: Deleted, held: 0},
			{rev: 1, content: 1, want: Added, held: 1}}, 1},
		{"unordered write never passes an ordered tombstone", []step{{rev: 3, content: 3, want: Added, held: 3}, {del: true, rev: 4, want: Deleted, held: 4},
			{rev: 0, content: 1, want: Stale, held: 4}, {rev: 5, content: 5, want: Added, held: 5}}, 5},
		{"unordered write passes an unordered tombstone", []step{{rev: 0, content: 3, want: Added, held: 0}, {del: true, rev: 0, want: Deleted, held: 0},
			{rev: 0, content: 1, want: Added, held: 0}}, 1},
	}
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		obs := &countingObserver{}
		c := newCache(t, b, Options{Observer: obs})
		for k, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				id := "ord" + strconv.Itoa(k)
				wantStale := obs.refreshes[Stale].Load()
				for i, s := range tt.steps {
					var res RefreshResult
					var err error
					if s.del {
						res, err = c.Delete(ctx, id, s.rev)
					} else {
						var rep RefreshReport
						rep, err = c.Refresh(ctx, revPromotion(id, s.rev, s.content))
						if len(rep.Promotions) != 1 {
							t.Fatalf("step %d: report %+v %v", i, rep, err)
						}
						res = rep.Promotions[0]
						if s.want == Stale && rep.Stale != 1 || s.want == Conflict && rep.Conflicts != 1 {
							t.Fatalf("step %d: report counts %+v", i, rep)
						}
					}
					var rc *RevisionConflictError
					switch {
					case s.conflict && (!errors.As(err, &rc) || !errors.Is(err, ErrRevisionConflict) || rc.ID != id || rc.Revision != s.rev):
						t.Fatalf("step %d: err %v, want a *RevisionConflictError for %s at %d", i, err, id, s.rev)
					case !s.conflict && err != nil:
						t.Fatalf("step %d: %v", i, err)
					case res.Outcome != s.want || res.Revision != s.held:
						t.Fatalf("step %d (%+v): got %v held %d, want %v held %d", i, s, res.Outcome, res.Revision, s.want, s.held)
					}
					if s.want == Stale {
						wantStale++
					}
				}
				if got := obs.refreshes[Stale].Load(); got != wantStale {
					t.Fatalf("Observer saw %d stale, want %d", got, wantStale)
				}
				in, err := c.Info(ctx, id)
				if tt.final < 0 {
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("Info after: %+v %v, want ErrNotFound", in, err)
					}
					return
				}
				want := revPromotion(id, 0, tt.final)
				v, _ := Version(&want, Options{})
				if err != nil || in.Version != v {
					t.Fatalf("Info after: %+v %v, want content %d (version %s)", in, err, tt.final, v)
				}
			})
		}
	})
}

// TestRefreshOrderedBadInput: a negative revision is a typed validation
// error naming the field, for Refresh and Delete, and writes nothing; a
// TombstoneTTL a load could outlive is refused.
func TestRefreshOrderedBadInput(t *testing.T) {
	t.Parallel()
	b := testredis.Mini(t)
	ctx := testCtx(t)
	c := newCache(t, b, Options{})
	var ve *gradient.ValidationError
	if _, err := c.Refresh(ctx, revPromotion("neg", -1, 1)); !errors.As(err, &ve) || ve.Field != "revision" || !errors.Is(err, gradient.ErrInvalid) {
		t.Fatalf("Refresh at -1: %v", err)
	}
	if _, err := c.Delete(ctx, "neg", -1); !errors.As(err, &ve) || ve.Field != "revision" {
		t.Fatalf("Delete at -1: %v", err)
	}
	if n, _ := testredis.CountKeys(ctx, b.Client, b.Prefix); n != 0 {
		t.Fatalf("%d keys written", n)
	}
	_, err := New(b.Client, Options{Prefix: b.Prefix, TombstoneTTL: 5 * time.Second, Loader: &countingLoader{}})
	if !errors.Is(err, &ValidationError{Field: "options"}) {
		t.Fatalf("TombstoneTTL under LeaseTTL: %v", err)
	}
}

// TestRefreshOrderedTombstoneExpires: the tombstone lives TombstoneTTL,
// then an old revision is written again (the documented bound).
func TestRefreshOrderedTombstoneExpires(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{TombstoneTTL: 300 * time.Millisecond})
		if res, err := c.Delete(ctx, "tomb", 5); err != nil || res.Outcome != Absent {
			t.Fatalf("Delete: %+v %v", res, err)
		}
		ttl, err := b.Client.PTTL(ctx, c.tombKey("tomb")).Result()
		if err != nil || ttl <= 0 || ttl > 300*time.Millisecond {
			t.Fatalf("tombstone PTTL %v %v", ttl, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			rep, err := c.Refresh(ctx, revPromotion("tomb", 3, 3))
			if err != nil {
				t.Fatal(err)
			}
			if rep.Added == 1 {
				break
			}
			if rep.Stale != 1 || time.Now().After(deadline) {
				t.Fatalf("refresh after the tombstone: %+v", rep)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// TestRefreshOrderedUpgrade: a promotion stored before revisions (no rev
// field in its meta hash) is whole: an unordered refresh of the same
// content is Unchanged and writes nothing, an ordered one records its
// revision alone; Info reads it at revision 0.
func TestRefreshOrderedUpgrade(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		if _, err := c.Refresh(ctx, revPromotion("old", 0, 1)); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.HDel(ctx, c.metaKey("old"), metaRev).Err(); err != nil {
			t.Fatal(err)
		}
		if in, err := c.Info(ctx, "old"); err != nil || in.Revision != 0 || in.Damage != "" {
			t.Fatalf("Info of the old format: %+v %v", in, err)
		}
		writes := recordWrites(t, b)
		if rep, err := c.Refresh(ctx, revPromotion("old", 0, 1)); err != nil || rep.Unchanged != 1 {
			t.Fatalf("unordered refresh: %+v %v", rep, err)
		}
		if w := writes(); len(w) != 0 {
			t.Fatalf("an unchanged refresh of the old format wrote %v", w)
		}
		if rep, err := c.Refresh(ctx, revPromotion("old", 3, 1)); err != nil || rep.Unchanged != 1 || rep.Promotions[0].Revision != 3 {
			t.Fatalf("ordered refresh: %+v %v", rep, err)
		}
		if in, err := c.Info(ctx, "old"); err != nil || in.Revision != 3 {
			t.Fatalf("Info after: %+v %v", in, err)
		}
		if rep, err := c.Refresh(ctx, revPromotion("old", 3, 1)); err != nil || rep.Unchanged != 1 || rep.Repaired != 0 {
			t.Fatalf("again: %+v %v", rep, err)
		}
	})
}
