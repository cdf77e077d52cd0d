package budget_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/testredis"
)

// TestAdvOneArgNeverOver: 64 goroutines reserve carts of six shapes (six
// caps strings in a batch: p alone, with a capped line per zone, with a
// day cap, with an uncapped line, with a cap per a name that needs
// escaping, and carts not naming p) against a cap of n uses of p: the
// carts naming p are granted exactly n times, every grant a held record,
// the counter n; the carts without p are all granted.
func TestAdvOneArgNeverOver(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBatch int
		limit    int64
	}{{"default batch", 0, 300}, {"batch 1000", 1000, 500}, {"cap 0", 0, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			b := testredis.Redis(t)
			ctx := testredis.Ctx(t)
			bg := newBudget(t, ctx, b, budget.Options{MaxBatch: tc.maxBatch},
				budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: tc.limit}}},
				budget.Promotion{ID: "q", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1 << 40, Per: "zone"}}},
				budget.Promotion{ID: "d", Caps: []budget.Cap{{Measure: budget.Spend, Limit: 1 << 40, Period: budget.Day, Location: time.UTC}}},
				budget.Promotion{ID: "x"},
				budget.Promotion{ID: "e", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1 << 40, Per: oneargPerName}}})
			p := budget.Line{Promotion: "p", Uses: 1}
			shapes := [][]budget.Line{
				{p},
				{p, {Promotion: "q", Uses: 1}},
				{p, {Promotion: "d", Uses: 1, Amount: 9}},
				{p, {Promotion: "x", Uses: 2, Amount: 3}},
				{p, {Promotion: "e", Uses: 1}},
				{{Promotion: "q", Uses: 1}, {Promotion: "x", Uses: 1}},
			}
			const workers, each = 64, 40
			var grants, others, refused atomic.Int64
			var mu sync.Mutex
			var errs []error
			var wg sync.WaitGroup
			// most seen queued behind a batch in flight (a batch's size)
			var most atomic.Int64
			stop := make(chan struct{})
			var watch sync.WaitGroup
			watch.Go(func() {
				for {
					if n := int64(budget.Queued(bg)); n > most.Load() {
						most.Store(n)
					}
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Microsecond): // a sample, not a sync
					}
				}
			})
			for w := range workers {
				wg.Go(func() {
					for i := range each {
						k := w*each + i
						lines := shapes[k%len(shapes)]
						res, err := bg.Reserve(ctx, budget.Request{Order: fmt.Sprint("n", k),
							Attributes: map[string]string{"zone": fmt.Sprint("z", k%7), oneargPerName: "v<&>"},
							Lines:      lines, Hold: time.Hour})
						switch {
						case err == nil && res.New && lines[0].Promotion == "p":
							grants.Add(1)
						case err == nil && res.New:
							others.Add(1)
						case errors.Is(err, budget.ErrLimit) && lines[0].Promotion == "p":
							refused.Add(1)
						default:
							mu.Lock()
							errs = append(errs, fmt.Errorf("n%d: %+v, %w", k, res, err))
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			close(stop)
			watch.Wait()
			t.Logf("at most %d calls seen queued behind a batch", most.Load())
			for _, err := range errs {
				t.Error(err)
			}
			recs, used := oneargState(t, ctx, b.Client, bg)
			held := 0
			for _, st := range recs {
				if st == "h" {
					held++
				}
			}
			const all, withoutP = workers * each, workers * each / 6
			if grants.Load() != tc.limit || used != tc.limit || others.Load() != int64(withoutP) ||
				int64(held) != grants.Load()+others.Load() || refused.Load() != int64(all-withoutP)-tc.limit {
				t.Errorf("%d grants of p, %d refused, %d other grants, counter %d, %d held records: want %d grants of p, %d others",
					grants.Load(), refused.Load(), others.Load(), used, held, tc.limit, withoutP)
			}
		})
	}
}
