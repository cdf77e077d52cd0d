package cache

import (
	"errors"
	"testing"

	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

func TestDecodeTierReadsWhatRefreshWrote(t *testing.T) {
	t.Parallel()
	b := testredis.Mini(t)
	ctx := t.Context()
	c, err := New(b.Client, Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	p := gradient.Promotion{ID: "dt", Metric: gradient.Amount, MinorDigits: 2, Tiers: []gradient.Tier{
		{ID: "a", Threshold: decimal.RequireFromString("99.99"), Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(10)},
			Gifts: []gradient.Gift{{SKU: "mug", Qty: 1}}},
		{ID: "b", Threshold: decimal.RequireFromString("199.99"), Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(15)}},
	}}
	if _, err := c.Refresh(ctx, p); err != nil {
		t.Fatal(err)
	}
	raws, err := b.Client.ZRange(ctx, c.tiersKey("dt"), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var tiers []TierHit
	sentinels := 0
	for _, raw := range raws {
		h, ok, err := decodeTier(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			sentinels++
			continue
		}
		tiers = append(tiers, h)
	}
	if sentinels != 2 || len(tiers) != 2 {
		t.Fatalf("%d sentinels, %d tiers", sentinels, len(tiers))
	}
	if tiers[0].ID != "a" || tiers[0].Score != 9999 || !tiers[0].Threshold.Equal(decimal.RequireFromString("99.99")) || !tiers[0].HasGifts {
		t.Errorf("tier a decoded as %+v", tiers[0])
	}
	if tiers[1].ID != "b" || !tiers[1].Reward.Percent.Equal(decimal.NewFromInt(15)) || tiers[1].HasGifts {
		t.Errorf("tier b decoded as %+v", tiers[1])
	}
	if _, _, err := decodeTier("\xdb\x7f\xff\xff\xff"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("hostile bytes: %v", err)
	}
}
