package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// TestLadderEqualsOracle: Ladder returns the tiers the in-memory matcher
// orders, with their rewards and gift lists.
func TestLadderEqualsOracle(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		rng := rand.New(rand.NewSource(7))
		for i, metric := range []gradient.Metric{gradient.Quantity, gradient.Amount} {
			p := randPromotion(rng, fmt.Sprintf("p%d", i), metric, 12)
			if _, err := c.Refresh(ctx, p); err != nil {
				t.Fatal(err)
			}
			m, err := gradient.NewMatcher(p)
			if err != nil {
				t.Fatal(err)
			}
			l, err := c.Ladder(ctx, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := Version(&p, Options{})
			if l.Version != want || len(l.Tiers) != m.Len() {
				t.Fatalf("ladder version %s with %d tiers, want %s with %d", l.Version, len(l.Tiers), want, m.Len())
			}
			for k, s := range m.Scores() {
				h, _ := m.MatchScore(s)
				got := l.Tiers[k]
				if got.ID != h.Tier.ID || got.Score != s || !got.Threshold.Equal(h.Tier.Threshold) ||
					!got.Reward.Percent.Equal(h.Tier.Reward.Percent) || got.Reward.Kind != h.Tier.Reward.Kind ||
					got.HasGifts != (len(h.Tier.Gifts) > 0) || (len(h.Tier.Gifts) > 0 && !reflect.DeepEqual(got.Gifts, h.Tier.Gifts)) {
					t.Errorf("%s tier %d: got %+v, want %+v at score %d", p.ID, k, got, h.Tier, s)
				}
			}
		}
		if _, err := c.Ladder(ctx, "absent"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Ladder(absent) err %v, want ErrNotFound", err)
		}
		if _, err := c.Ladder(ctx, "bad id"); !errors.Is(err, &ValidationError{Field: "id"}) {
			t.Errorf("Ladder(bad id) err %v, want invalid id", err)
		}
		if err := b.Client.ZAdd(ctx, c.tiersKey("p0"), redis.Z{Score: 3, Member: "\x93junk"}).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Ladder(ctx, "p0"); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Ladder(corrupt member) err %v, want ErrCorrupt", err)
		}
	})
}

// TestIDsAndInfos: IDs lists every stored promotion sorted; Infos reads
// a page of them in order with per-promotion errors, damage included.
func TestIDsAndInfos(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		for _, id := range []string{"zz", "aa", "<script>alert(1)</script>", "mm", "dd"} {
			if _, err := c.Refresh(ctx, simplePromotion(id, 2, 5)); err != nil {
				t.Fatal(err)
			}
		}
		ids, err := c.IDs(ctx)
		if err != nil || fmt.Sprint(ids) != "[<script>alert(1)</script> aa dd mm zz]" {
			t.Fatalf("IDs = %v, %v", ids, err)
		}
		if err := b.Client.HSet(ctx, c.metaKey("mm"), metaTiers, "x").Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.Del(ctx, c.tiersKey("dd")).Err(); err != nil {
			t.Fatal(err)
		}
		rs, err := c.Infos(ctx, "aa", "gone", "mm", "bad id", "zz", "dd")
		if err != nil {
			t.Fatal(err)
		}
		wantErr := []error{nil, ErrNotFound, ErrCorrupt, &ValidationError{Field: "id"}, nil, ErrDamaged}
		for i, r := range rs {
			if wantErr[i] == nil && (r.Err != nil || r.Tiers != 2 || r.Version == "") || wantErr[i] != nil && !errors.Is(r.Err, wantErr[i]) {
				t.Errorf("Infos[%d] = %+v, want err %v", i, r, wantErr[i])
			}
		}
		if rs[2].ID != "mm" {
			t.Errorf("corrupt entry lost its ID: %+v", rs[2])
		}
		if d := rs[5]; d.ID != "dd" || d.Version == "" || d.Tiers != 2 || d.Damage != "tiers key missing" {
			t.Errorf("damaged entry: %+v, want what its meta says and the damage", d)
		}
	})
}
