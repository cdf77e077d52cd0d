package gradient_test

import (
	"fmt"

	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/gradient"
)

func ExampleMatcher() {
	promo := gradient.Promotion{
		ID: "buy-more", Metric: gradient.Quantity, MinorDigits: 2,
		Tiers: []gradient.Tier{
			{ID: "3-items", Threshold: decimal.NewFromInt(3), Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(10)}},
			{ID: "5-items", Threshold: decimal.NewFromInt(5), Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(20)}},
			{ID: "10-items", Threshold: decimal.NewFromInt(10), Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(30)}},
		},
	}
	m, err := gradient.NewMatcher(promo)
	if err != nil {
		panic(err)
	}
	hit, _ := m.Match(decimal.NewFromInt(7))
	fmt.Printf("7 items hit %s; buy %s more for %s\n", hit.Tier.ID, hit.Shortfall, hit.Next.ID)

	off, _ := hit.Tier.Reward.Discount(decimal.RequireFromString("139.93"), decimal.NewFromInt(7), 2, gradient.RoundHalfUp)
	fmt.Println("discount on 139.93:", off)
	// Output:
	// 7 items hit 5-items; buy 3 more for 10-items
	// discount on 139.93: 27.99
}

func ExamplePromotion_Validate() {
	promo := gradient.Promotion{
		ID: "10086", Metric: gradient.Amount, MinorDigits: 2,
		Tiers: []gradient.Tier{
			{ID: "a", Threshold: decimal.RequireFromString("99.99"), Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(10)}},
			{ID: "b", Threshold: decimal.RequireFromString("99.990"), Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(20)}},
		},
	}
	fmt.Println(promo.Validate())
	// Output:
	// gradient: promotion "10086" tier 1 (id "b"): threshold: 99.99 equals the threshold of tier 0 (id "a")
}
