package budget_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/testredis"
)

// TestAdvWireSkewBatch: with Redis TIME weeks from the client's clock,
// concurrent calls whose period caps the client put in the wrong period
// (the script answers skew; they are sent again) share batches with
// calls without period caps: each period cap grants exactly its limit,
// in the period of Redis TIME, and every other call is granted.
func TestAdvWireSkewBatch(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no zone database: %v", err)
	}
	for _, tc := range []struct {
		name  string
		shift time.Duration
	}{{"weeks ahead", 40 * 24 * time.Hour}, {"weeks behind", -20 * 24 * time.Hour}} {
		t.Run(tc.name, func(t *testing.T) {
			b := testredis.Mini(t)
			ctx := testredis.Ctx(t)
			redisNow := time.Now().Add(tc.shift).Truncate(time.Second)
			b.Mini.SetTime(redisNow)
			bg := newBudget(t, ctx, b, budget.Options{},
				budget.Promotion{ID: "daily", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 5, Period: budget.Day, Location: time.UTC},
					{Measure: budget.Uses, Limit: 1, Per: "customer", Period: budget.Week, Location: berlin}}},
				budget.Promotion{ID: "plain", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1000}}})
			const n = 48
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					lines := line("plain", 1, 0)
					if i%2 == 0 {
						lines = append(lines, budget.Line{Promotion: "daily", Uses: 1})
					}
					_, errs[i] = bg.Reserve(ctx, budget.Request{Order: fmt.Sprintf("s\"%d", i), Attributes: customer(fmt.Sprint("c<", i%20)), Lines: lines, Hold: time.Hour})
				}()
			}
			wg.Wait()
			daily := 0
			for i, err := range errs {
				switch {
				case err == nil && i%2 == 0:
					daily++
				case err == nil:
				case i%2 == 0 && errors.Is(err, budget.ErrLimit):
				default:
					t.Errorf("call %d: %v", i, err)
				}
			}
			if daily != 5 {
				t.Errorf("%d daily grants, want 5", daily)
			}
			info, err := bg.Info(ctx, "daily")
			if err != nil {
				t.Fatal(err)
			}
			c := info.Promotions[0].Caps[0]
			day := time.Date(redisNow.UTC().Year(), redisNow.UTC().Month(), redisNow.UTC().Day(), 0, 0, 0, 0, time.UTC)
			if c.Used != 5 || !c.Start.Equal(day) {
				t.Errorf("daily cap %+v: want 5 used in the day from %v", c, day)
			}
		})
	}
}
