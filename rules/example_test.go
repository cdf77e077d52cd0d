package rules_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tierset/tierset/rules"
)

func ExampleParse() {
	in := `{"version": 1, "promotions": [{
	  "id": "10086", "metric": "amount", "minor_digits": 2,
	  "start": "2026-12-01T00:00:00+08:00", "end": "2027-01-01T00:00:00+08:00",
	  "tiers": [
	    {"id": "t1", "threshold": "99.99", "reward": {"kind": "amount_off", "amount": "10"},
	     "gifts": [{"sku": "TOTE-01", "qty": 1, "name": "Canvas tote bag"}]},
	    {"id": "t2", "threshold": 199.99, "reward": {"kind": "percent_off", "percent": 15, "cap": "40"}}]}]}`
	promos, err := rules.Parse(strings.NewReader(in), "rules.json", rules.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range promos[0].Tiers {
		fmt.Println(promos[0].ID, t.ID, t.Threshold, t.Reward.Kind, len(t.Gifts), "gift(s)")
	}
	// Output:
	// 10086 t1 99.99 amount-off 1 gift(s)
	// 10086 t2 199.99 percent-off 0 gift(s)
}

func ExampleError() {
	in := `{"version": 1, "promotions": [{"id": "10086", "metric": "amount", "minor_digits": 2,
	  "tiers": [{"id": "t1", "threshold": "99.999", "reward": {"kind": "amount_off", "amount": "10"}}]}]}`
	_, err := rules.Parse(strings.NewReader(in), "rules.json", rules.Options{})
	fmt.Println(err)
	var re *rules.Error
	if errors.As(err, &re) {
		fmt.Printf("promotion %s, tier %d, field %s\n", re.Promotion, re.TierIndex, re.Field)
	}
	// Output:
	// rules.json: promotion "10086" tier 0 (id "t1"): threshold "99.999" has 3 fractional digits, currency allows 2
	// promotion 10086, tier 0, field threshold
}
