package budget_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/internal/testredis"
)

// TestPublishOpenZones: Publish writes a period cap's Location so that
// Open, in a tool without the definitions, reads the same cap: the same
// zone offset at the same instant, and Open does not fail on any zone New
// accepted (a fixed zone, Local, UTC, an IANA zone).
func TestPublishOpenZones(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, loc := range []*time.Location{time.UTC, berlin, time.FixedZone("UTC+3", 3*3600), time.FixedZone("", -5*3600)} {
		t.Run(loc.String(), func(t *testing.T) {
			b := testredis.Mini(t)
			ctx := testredis.Ctx(t)
			p := budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 5, Period: budget.Day, Location: loc}}}
			bg := newBudget(t, ctx, b, budget.Options{}, p)
			if err := bg.Publish(ctx); err != nil {
				t.Fatal(err)
			}
			ob, err := budget.Open(ctx, b.Client, "shop", budget.Options{Prefix: b.Prefix})
			if err != nil {
				t.Fatalf("Open of a budget published with a cap in %q: %v", loc, err)
			}
			got, ok := ob.Promotion("p")
			if !ok || len(got.Caps) != 1 || got.Caps[0].Location == nil {
				t.Fatalf("Open read %+v", got)
			}
			at := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
			_, want := at.In(loc).Zone()
			if _, off := at.In(got.Caps[0].Location).Zone(); off != want {
				t.Fatalf("Open's zone %q is UTC%+d s, the cap's %q UTC%+d s", got.Caps[0].Location, off, loc, want)
			}
		})
	}
}

// TestOffersAtCapRace: 16 goroutines price carts (Offers) and reserve the
// last uses of a cap at once: Reserve grants exactly the cap, and once it
// is full every Offer says the promotion cannot be given (OK false, Left
// zero), per customer and in all.
func TestOffersAtCapRace(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		const limit = 20
		p := budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: limit}, {Measure: budget.Uses, Limit: 2, Per: "customer"}}}
		bg := newBudget(t, ctx, b, budget.Options{}, p)
		hit := []cache.Result{{Promotion: "p", Tier: &cache.TierHit{}}, {Promotion: "other", Tier: &cache.TierHit{}}, {Promotion: "p"}}
		var granted atomic.Int64
		errs := make(chan error, 16)
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for i := range 10 {
					attrs := customer(fmt.Sprint("c", (g*10+i)%12))
					if _, err := bg.Offers(ctx, attrs, hit); err != nil {
						errs <- err
						return
					}
					_, err := bg.Reserve(ctx, budget.Request{Order: fmt.Sprintf("o%d-%d", g, i), Attributes: attrs,
						Lines: line("p", 1, 0), Hold: time.Minute})
					switch {
					case err == nil:
						granted.Add(1)
					case !errors.Is(err, budget.ErrLimit):
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if granted.Load() != limit {
			t.Fatalf("granted %d, cap %d", granted.Load(), limit)
		}
		offers, err := bg.Offers(ctx, customer("new"), hit)
		if err != nil {
			t.Fatal(err)
		}
		want := []budget.Offer{
			{Promotion: "p", Hit: true, Budgeted: true, Left: budget.Left{Uses: 0, Spend: budget.NoCap}},
			{Promotion: "other", Hit: true, Left: budget.Left{Uses: budget.NoCap, Spend: budget.NoCap}, OK: true},
			{Promotion: "p"},
		}
		for i := range want {
			if offers[i] != want[i] {
				t.Fatalf("offer %d: %+v, want %+v", i, offers[i], want[i])
			}
		}
		info, err := bg.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c := info.Promotions[0].Caps
		if c[0].Used != limit || c[0].Held != limit || c[0].Remaining != 0 || info.Holds != limit {
			t.Fatalf("Info at the cap: %+v holds %d", c[0], info.Holds)
		}
		if c[1].Values > 12 || c[1].Most > 2 || c[1].Used != limit {
			t.Fatalf("Info per customer: %+v", c[1])
		}
	})
}

// TestInfoRacesWrites: Info and Publish run while 16 goroutines reserve,
// confirm and release: every Info sees used within the cap, held within
// used, and once the writers stop Info's used and held equal what the
// calls answered.
func TestInfoRacesWrites(t *testing.T) {
	b := testredis.Redis(t)
	ctx := testredis.Ctx(t)
	const limit = 30
	bg := newBudget(t, ctx, b, budget.Options{}, capPromo(limit, false))
	var granted, confirmed, released atomic.Int64
	stop := make(chan struct{})
	errs := make(chan error, 32)
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := bg.Publish(ctx); err != nil {
				errs <- err
				return
			}
			in, err := bg.Info(ctx, "p")
			if err != nil {
				errs <- err
				return
			}
			c := in.Promotions[0].Caps[0]
			if c.Used > limit || c.Held > c.Used || c.Held < 0 || c.Remaining != limit-c.Used {
				errs <- fmt.Errorf("Info mid-race: %+v", c)
				return
			}
		}
	})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 8 {
				o := fmt.Sprintf("o%d-%d", g, i)
				_, err := bg.Reserve(ctx, budget.Request{Order: o, Lines: line("p", 1, 0), Hold: time.Minute})
				if errors.Is(err, budget.ErrLimit) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				granted.Add(1)
				if i%2 == 0 {
					_, err = bg.Confirm(ctx, o)
					confirmed.Add(1)
				} else if g%2 == 0 {
					_, err = bg.Release(ctx, o)
					released.Add(1)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	in, err := bg.Info(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	c := in.Promotions[0].Caps[0]
	used := granted.Load() - released.Load()
	if c.Used != used || c.Held != used-confirmed.Load() || used > limit {
		t.Fatalf("Info %+v; calls: %d granted, %d confirmed, %d released", c, granted.Load(), confirmed.Load(), released.Load())
	}
}

// TestSpendAt2p53: a spend cap at 2^53 minor units counts exactly: the
// last unit is granted, one more is refused, and Left and Info say 0.
func TestSpendAt2p53(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		const max = int64(1) << 53
		bg := newBudget(t, ctx, b, budget.Options{}, budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Spend, Limit: max}}})
		for i, c := range []struct {
			amount int64
			ok     bool
		}{{max - 1, true}, {2, false}, {1, true}, {1, false}} {
			_, err := bg.Reserve(ctx, budget.Request{Order: fmt.Sprint("o", i), Lines: line("p", 1, c.amount), Hold: time.Minute})
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, budget.ErrLimit)) {
				t.Fatalf("reserve %d of %d: %v, want granted %v", c.amount, max, err, c.ok)
			}
		}
		left, err := bg.Remaining(ctx, nil, "p")
		if err != nil {
			t.Fatal(err)
		}
		if l := left["p"]; l.Spend != 0 || l.Allows(1, 1) || !l.Allows(1, 0) {
			t.Fatalf("Left at 2^53: %+v", l)
		}
		in, err := bg.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c := in.Promotions[0].Caps[0]; c.Used != max || c.Remaining != 0 {
			t.Fatalf("Info at 2^53: %+v", c)
		}
	})
}

// TestInfoDSTDay: Info's period on a day across a DST change in the cap's
// zone is that day in the zone: 23 hours in spring.
func TestInfoDSTDay(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	b.Mini.SetTime(time.Date(2026, 3, 29, 10, 0, 0, 0, time.UTC))
	bg := newBudget(t, ctx, b, budget.Options{}, budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 3, Period: budget.Day, Location: berlin}}})
	if _, err := bg.Reserve(ctx, budget.Request{Order: "o", Lines: line("p", 1, 0), Hold: time.Minute}); err != nil {
		t.Fatal(err)
	}
	in, err := bg.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := in.Promotions[0].Caps[0]
	if want := time.Date(2026, 3, 29, 0, 0, 0, 0, berlin); !c.Start.Equal(want) || c.End.Sub(c.Start) != 23*time.Hour || c.Used != 1 {
		t.Fatalf("Info on the spring DST day: %v..%v used %d", c.Start, c.End, c.Used)
	}
}
