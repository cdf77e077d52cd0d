package budget_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// TestFaultOneArgCutResend: a batch whose reply is cut is sent again by
// go-redis; its first try may read no record (one EXISTS: all new) and
// its second reads the records the first wrote. Each call still answers
// as uncut: a grant new once (its token), a duplicate of an order in the
// batch its first's hold, another cart ErrConflict, past the cap
// ErrLimit; the Observer is told each grant once and the counter is the
// records.
func TestFaultOneArgCutResend(t *testing.T) {
	const tries = 4 // go-redis's default MaxRetries (3), plus the first
	r := func(order string, uses int64) budget.Request {
		return budget.Request{Order: order, Attributes: customer("c"), Lines: line("p", uses, 0), Hold: time.Hour}
	}
	type call struct {
		r    budget.Request
		want string
	}
	// warm and first hold 2 of the cap of 8
	fresh := []call{
		{r("oa-1", 1), "new"}, {r("oa-2", 2), "new"}, {r("oa-1", 1), "again"}, {r("oa-3", 1), "new"},
		{r("oa-2", 1), "conflict"}, {r("oa-4", 2), "new"}, {r("oa-5", 1), "limit"}, {r("oa-1", 1), "again"},
	}
	existing := []call{
		{r("oa-1", 1), "new"}, {r("oa-held", 1), "again"}, {r("oa-exp", 2), "new"}, {r("oa-1", 1), "again"},
		{r("oa-held", 2), "conflict"}, {r("oa-2", 1), "new"}, {r("oa-3", 2), "limit"}, {r("oa-exp", 2), "again"},
	}
	for _, tc := range []struct {
		name     string
		calls    []call
		existing bool
		cuts     int
	}{
		{"fresh uncut", fresh, false, 0},
		{"fresh cut once", fresh, false, 1},
		{"fresh cut thrice", fresh, false, tries - 1},
		{"fresh every try cut", fresh, false, tries},
		{"existing uncut", existing, true, 0},
		{"existing cut once", existing, true, 1},
		{"existing every try cut", existing, true, tries},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var told atomic.Int64
			obs := counted(&told).Observer
			before := func(ctx context.Context, bg *budget.Budget, admin *redis.Client) {
				if !tc.existing {
					return
				}
				if _, err := bg.Reserve(ctx, r("oa-held", 1)); err != nil {
					t.Fatal(err)
				}
				ex := r("oa-exp", 1)
				ex.Hold = 20 * time.Millisecond
				res, err := bg.Reserve(ctx, ex)
				if err != nil {
					t.Fatal(err)
				}
				redisPast(t, ctx, admin, res.Expires)
			}
			f, bg, ctx, release := oneargHeld(t, budget.Options{Observer: obs}, before, capPromo(8, false))
			toldBefore := told.Load() // warm, and oa-held, oa-exp
			var chs []<-chan outcomeOf
			for i, cl := range tc.calls {
				chs = append(chs, reserveAsync(ctx, bg, cl.r))
				queuedBehind(t, bg, i+1)
			}
			if tc.cuts > 0 {
				f.Proxy.CutNext(tc.cuts, faultproxy.Contains("oa-"))
			}
			if o := await(t, release()); o.err != nil {
				t.Fatal(o.err)
			}
			var got, want []string
			for i, ch := range chs {
				got = append(got, await(t, ch).name())
				w := tc.calls[i].want
				if tc.cuts == tries {
					w = "unknown"
				}
				want = append(want, w)
			}
			if !slices.Equal(got, want) {
				t.Errorf("outcomes %v, want %v", got, want)
			}
			if f.Proxy.Cuts() != int64(tc.cuts) {
				t.Errorf("%d cuts, want %d", f.Proxy.Cuts(), tc.cuts)
			}
			news := int64(1) // first
			for _, g := range got {
				if g == "new" {
					news++
				}
			}
			if tc.cuts == tries {
				news = 1 // the grants were made, but answered unknown: untold
			}
			if n := told.Load() - toldBefore; n != news {
				t.Errorf("%d grants told, want %d", n, news)
			}
			// the same calls again: every grant answers its hold
			for _, cl := range tc.calls {
				o := func() outcomeOf { res, err := bg.Reserve(ctx, cl.r); return outcomeOf{res, err} }().name()
				w := cl.want
				if w == "new" {
					w = "again"
				}
				if o != w {
					t.Errorf("%s again: %s, want %s", cl.r.Order, o, w)
				}
			}
			recs, used := oneargState(t, ctx, f.Server.Client(nil), bg)
			uses := map[string]int64{"warm": 1, "first": 1}
			for _, cl := range tc.calls {
				if _, ok := uses[cl.r.Order]; !ok && (cl.want == "new" || cl.want == "again") {
					uses[cl.r.Order] = cl.r.Lines[0].Uses
				}
			}
			var held int64
			for order, st := range recs {
				if st == "h" {
					held += uses[order]
				}
			}
			if used != held || used > 8 {
				t.Errorf("counter %d, held records' uses %d, cap 8 (records %v)", used, held, recs)
			}
		})
	}
}

// TestFaultOneArgCutsHistory: 32 goroutines reserve (one order once each,
// asked again while unknown), confirm every 2nd grant and release every
// 5th, through a proxy cutting a script's reply every few calls (go-redis
// sends it again; four in a row use its retries up). Per order at most
// one call answers new, and exactly one for an order held or confirmed
// that no call left unknown; the Observer is told each new once; the
// counter is the held and confirmed records, never past the cap.
func TestFaultOneArgCutsHistory(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBatch int
	}{{"default batch", 0}, {"batch 1000", 1000}} {
		t.Run(tc.name, func(t *testing.T) {
			const limit, orders, workers = 150, 400, 32
			f := testredis.StartFaulty(t)
			ctx := testredis.Ctx(t)
			var told atomic.Int64
			bg := newBudget(t, ctx, &testredis.Backend{Client: f.Cut, Prefix: testredis.Prefix(t)},
				budget.Options{MaxBatch: tc.maxBatch, Observer: counted(&told).Observer},
				capPromo(limit, false))
			done := make(chan struct{})
			var cutter sync.WaitGroup
			cutter.Go(func() {
				for {
					if f.Proxy.Armed() == 0 {
						f.Proxy.CutNext(1+rand.IntN(4), faultproxy.Contains("EVALSHA"))
					}
					select {
					case <-done:
						f.Proxy.CutNext(0, nil)
						return
					case <-time.After(time.Duration(2+rand.IntN(8)) * time.Millisecond): // pacing, not a sync
					}
				}
			})
			var mu sync.Mutex
			hist := map[string][]string{}
			next := make(chan int)
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for i := range next {
						order := fmt.Sprint("h", i)
						req := budget.Request{Order: order, Attributes: customer(fmt.Sprint("c", i%9)), Lines: line("p", 1, 0), Hold: 10 * time.Minute}
						var got []string
						var granted bool
						for try := 0; try < 20; try++ {
							res, err := bg.Reserve(ctx, req)
							o := outcomeOf{res, err}.name()
							got = append(got, "R "+o)
							if o != "unknown" {
								granted = err == nil
								break
							}
						}
						if granted {
							var err error
							switch {
							case i%2 == 0:
								_, err = bg.Confirm(ctx, order)
								got = append(got, "C "+outcome(err))
							case i%5 == 1:
								_, err = bg.Release(ctx, order)
								got = append(got, "L "+outcome(err))
							}
						}
						mu.Lock()
						hist[order] = got
						mu.Unlock()
					}
				})
			}
			for i := range orders {
				next <- i
			}
			close(next)
			wg.Wait()
			close(done)
			cutter.Wait()
			if f.Proxy.Cuts() == 0 {
				t.Fatal("no reply was cut")
			}
			recs, used := oneargState(t, ctx, f.Server.Client(nil), bg)
			var live, news int64
			for order, calls := range hist {
				n, unknown := 0, false
				for _, c := range calls {
					switch c {
					case "R new":
						n++
					case "R unknown":
						unknown = true
					}
				}
				news += int64(n)
				st := recs[order]
				if n > 1 || (n == 1 && st == "") {
					t.Errorf("%s: %v, record %q", order, calls, st)
				}
				if (st == "h" || st == "c") && n == 0 && !unknown {
					t.Errorf("%s: %v, record %q: held, never answered new", order, calls, st)
				}
				if slices.Contains(calls, "C ok") && st != "c" || slices.Contains(calls, "L ok") && st != "r" {
					t.Errorf("%s: %v, record %q", order, calls, st)
				}
			}
			for _, st := range recs {
				if st == "h" || st == "c" {
					live++
				}
			}
			if used != live || used > limit {
				t.Errorf("counter %d, %d held or confirmed records, cap %d", used, live, limit)
			}
			if told.Load() != news {
				t.Errorf("%d grants told, %d answered new", told.Load(), news)
			}
			t.Logf("%d cuts, %d new, counter %d", f.Proxy.Cuts(), news, used)
		})
	}
}
