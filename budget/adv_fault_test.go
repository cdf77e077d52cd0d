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
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// TestFaultObserverCutReply: the reply of a Reserve's script is cut and
// go-redis sends it again, which answers the first run's reservation from
// the record. The Observer still counts one grant per line: the caller
// made one reservation and it was new.
func TestFaultObserverCutReply(t *testing.T) {
	f := testredis.StartFaulty(t)
	ctx := testredis.Ctx(t)
	b := &testredis.Backend{Client: f.Cut, Prefix: testredis.Prefix(t)}
	var grants atomic.Int64
	bg := newBudget(t, ctx, b, budget.Options{Observer: budget.Observer{OnGrant: func(string, string) { grants.Add(1) }}}, capPromo(5, false))
	// A first reservation loads the script, so the cut one runs it.
	if _, err := bg.Reserve(ctx, budget.Request{Order: "o0", Lines: line("p", 1, 0), Hold: time.Minute}); err != nil {
		t.Fatal(err)
	}
	grants.Store(0)
	f.Proxy.CutNext(1, faultproxy.Contains("EVALSHA"))
	res, err := bg.Reserve(ctx, budget.Request{Order: "o1", Lines: line("p", 1, 0), Hold: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if f.Proxy.Cuts() != 1 {
		t.Fatalf("%d cuts, want 1", f.Proxy.Cuts())
	}
	if grants.Load() != 1 || !res.New {
		t.Fatalf("one reservation whose reply was cut: %d grants observed, New %v", grants.Load(), res.New)
	}
}

// TestFaultCounterEvictedReads: a counter evicted while the epoch stays
// (DEL stands for the eviction): Offers answers ErrLost (it is a
// Remaining), a Release or Confirm meanwhile does not bring the counter
// back below what was counted, Reserve stays ErrLost, and Info, which
// the console shows, does not report the cap's whole limit left.
func TestFaultCounterEvictedReads(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		bg := newBudget(t, ctx, b, budget.Options{}, capPromo(3, false))
		for i := range 3 {
			if _, err := bg.Reserve(ctx, budget.Request{Order: fmt.Sprint("o", i), Lines: line("p", 1, 0), Hold: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := bg.Confirm(ctx, "o0"); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.Del(ctx, bg.Keys()[0]+"c:p").Err(); err != nil {
			t.Fatal(err)
		}
		hit := []cache.Result{{Promotion: "p", Tier: &cache.TierHit{}}}
		if _, err := bg.Offers(ctx, nil, hit); !errors.Is(err, budget.ErrLost) {
			t.Fatalf("Offers after the counter's eviction: %v, want ErrLost", err)
		}
		if _, err := bg.Release(ctx, "o1"); err != nil && !errors.Is(err, budget.ErrLost) {
			t.Fatal(err)
		}
		if _, err := bg.Confirm(ctx, "o2"); err != nil && !errors.Is(err, budget.ErrLost) {
			t.Fatal(err)
		}
		for i := range 4 {
			_, err := bg.Reserve(ctx, budget.Request{Order: fmt.Sprint("n", i), Lines: line("p", 1, 0), Hold: time.Minute})
			if !errors.Is(err, budget.ErrLost) {
				t.Fatalf("Reserve %d after the eviction: %v, want ErrLost", i, err)
			}
		}
		in, err := bg.Info(ctx)
		if err == nil && in.Promotions[0].Caps[0].Remaining == 3 {
			t.Fatalf("Info after the eviction reports the whole cap left: %+v (want ErrLost)", in.Promotions[0].Caps[0])
		}
		if err != nil && !errors.Is(err, budget.ErrLost) {
			t.Fatal(err)
		}
	})
}

// TestFaultFrozenInfo: Redis frozen (SIGSTOP) while Info, Offers and
// Reserve wait: each returns an error at its deadline, not a stale
// answer, and after the thaw the cap still refuses.
func TestFaultFrozenInfo(t *testing.T) {
	srv := testredis.StartServer(t)
	c := srv.Client(nil)
	ctx := testredis.Ctx(t)
	bg := newBudget(t, ctx, &testredis.Backend{Client: c, Prefix: testredis.Prefix(t)}, budget.Options{}, capPromo(1, false))
	if _, err := bg.Reserve(ctx, budget.Request{Order: "o", Lines: line("p", 1, 0), Hold: time.Minute}); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			srv.Thaw()
		}
	})
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := bg.Info(short); err == nil {
		t.Fatal("Info answered from a frozen Redis")
	}
	if _, err := bg.Offers(short, nil, []cache.Result{{Promotion: "p", Tier: &cache.TierHit{}}}); err == nil {
		t.Fatal("Offers answered from a frozen Redis")
	}
	if _, err := bg.Reserve(short, budget.Request{Order: "x", Lines: line("p", 1, 0), Hold: time.Minute}); err == nil {
		t.Fatal("Reserve granted from a frozen Redis")
	}
	srv.Thaw()
	thawed = true
	// The Reserve sent while frozen may run after the thaw; either it
	// ran (refused: the cap is full) or it did not. Nothing is granted.
	for _, o := range []string{"x", "y"} {
		if _, err := bg.Reserve(ctx, budget.Request{Order: o, Lines: line("p", 1, 0), Hold: time.Minute}); !errors.Is(err, budget.ErrLimit) {
			t.Fatalf("after the thaw, %s: %v, want ErrLimit", o, err)
		}
	}
	in, err := bg.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cp := in.Promotions[0].Caps[0]; cp.Used != 1 || cp.Remaining != 0 {
		t.Fatalf("after the thaw: %+v", cp)
	}
}

// TestInfoMaxHoldsPlusOne: MaxInfoHolds+1 live holds: Info counts them
// all in Holds, sets Partial, and Held counts exactly MaxInfoHolds of
// them (the rest is in Used).
func TestInfoMaxHoldsPlusOne(t *testing.T) {
	b := testredis.Redis(t)
	ctx := testredis.Ctx(t)
	const n = budget.MaxInfoHolds + 1
	bg := newBudget(t, ctx, b, budget.Options{}, capPromo(n, false))
	sem := make(chan struct{}, 8)
	errs := make(chan error, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			if _, err := bg.Reserve(ctx, budget.Request{Order: fmt.Sprint("o", i), Lines: line("p", 1, 0), Hold: 10 * time.Minute}); err != nil {
				errs <- err
			}
		}()
	}
	for range cap(sem) {
		sem <- struct{}{}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	in, err := bg.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cp := in.Promotions[0].Caps[0]
	if in.Holds != n || !in.Partial || cp.Used != n || cp.Held != budget.MaxInfoHolds || cp.Remaining != 0 || in.Promotions[0].Holds != budget.MaxInfoHolds {
		t.Fatalf("Info of %d holds: holds %d partial %v, cap %+v, promotion holds %d", n, in.Holds, in.Partial, cp, in.Promotions[0].Holds)
	}
}

// TestFaultListEpochEvicted: a published budget whose epoch key was
// evicted (DEL stands for it) answers ErrLost, and List still names it,
// so the CLI and console list it with why instead of dropping it.
func TestFaultListEpochEvicted(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		bg := newBudget(t, ctx, b, budget.Options{}, capPromo(3, false))
		if err := bg.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.Del(ctx, bg.Keys()[1]).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := bg.Remaining(ctx, nil, "p"); !errors.Is(err, budget.ErrLost) {
			t.Fatalf("epoch gone: Remaining %v, want ErrLost", err)
		}
		names, err := budget.List(ctx, b.Client, b.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != 1 || names[0] != "shop" {
			t.Fatalf("List with the epoch evicted: %q, want [shop]", names)
		}
		ob, err := budget.Open(ctx, b.Client, "shop", budget.Options{Prefix: b.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ob.Info(ctx); !errors.Is(err, budget.ErrLost) {
			t.Fatalf("Info with the epoch evicted: %v, want ErrLost", err)
		}
	})
}

// TestFaultInfoSkewedClock: a tool's clock is off from Redis TIME by more
// than a period (here Redis TIME is 40 days behind) and it has not yet
// measured the offset (a fresh Open): Info still reads the period
// holding Redis TIME, as Reserve and Remaining do, not an empty one.
func TestFaultInfoSkewedClock(t *testing.T) {
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	b.Mini.SetTime(time.Now().Add(-40 * 24 * time.Hour))
	for _, period := range []budget.Period{budget.Day, budget.Week, budget.Month} {
		t.Run(fmt.Sprint(period), func(t *testing.T) {
			name := fmt.Sprint("shop", period)
			bg, err := budget.New(b.Client, name, budget.Options{Prefix: b.Prefix, Promotions: []budget.Promotion{{ID: "p",
				Caps: []budget.Cap{{Measure: budget.Uses, Limit: 5, Period: period, Location: time.UTC}}}}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := bg.Rebuild(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if err := bg.Publish(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := bg.Reserve(ctx, budget.Request{Order: "o", Lines: line("p", 2, 0), Hold: time.Minute}); err != nil {
				t.Fatal(err)
			}
			ob, err := budget.Open(ctx, b.Client, name, budget.Options{Prefix: b.Prefix})
			if err != nil {
				t.Fatal(err)
			}
			in, err := ob.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if c := in.Promotions[0].Caps[0]; c.Used != 2 || c.Remaining != 3 || c.Start.After(in.At) || !in.At.Before(c.End) {
				t.Fatalf("Info from a tool whose clock is 40 days ahead: %+v at %v", c, in.At)
			}
		})
	}
}

// TestFaultOrderSkewedClock: Order judges a hold ended by Redis TIME, so
// a tool whose clock is 40 days ahead of Redis (a fresh Open, no offset
// measured) reads a live hold as Held, not Expired.
func TestFaultOrderSkewedClock(t *testing.T) {
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	b.Mini.SetTime(time.Now().Add(-40 * 24 * time.Hour))
	bg := newBudget(t, ctx, b, budget.Options{}, capPromo(5, false))
	if _, err := bg.Reserve(ctx, budget.Request{Order: "o", Lines: line("p", 1, 0), Hold: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ob, err := budget.Open(ctx, b.Client, "shop", budget.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	o, err := ob.Order(ctx, "o")
	if err != nil {
		t.Fatal(err)
	}
	if o.State != budget.Held {
		t.Fatalf("a live hold read by a tool 40 days ahead: %s", o.State)
	}
}

// TestFaultRestartReads: Redis restarted without persistence: Offers,
// Info and Remaining answer ErrLost (not the whole cap left) and Reserve
// grants nothing until Rebuild; with appendonly always, Info after the
// restart reads every grant made before it.
func TestFaultRestartReads(t *testing.T) {
	for _, aof := range []bool{true, false} {
		t.Run(fmt.Sprint("appendonly=", aof), func(t *testing.T) {
			var args []string
			if aof {
				args = []string{"--appendonly", "yes", "--appendfsync", "always"}
			}
			srv := testredis.StartServer(t, args...)
			c := srv.Client(nil)
			ctx := testredis.Ctx(t)
			bg := newBudget(t, ctx, &testredis.Backend{Client: c, Prefix: testredis.Prefix(t)}, budget.Options{}, capPromo(3, false))
			for i := range 3 {
				if _, err := bg.Reserve(ctx, budget.Request{Order: fmt.Sprint("o", i), Lines: line("p", 1, 0), Hold: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			srv.Restart()
			hit := []cache.Result{{Promotion: "p", Tier: &cache.TierHit{}}}
			// The first command after the restart may meet the closed
			// connection; go-redis retries it on a new one.
			offers, err := bg.Offers(ctx, nil, hit)
			in, ierr := bg.Info(ctx)
			_, rerr := bg.Reserve(ctx, budget.Request{Order: "n", Lines: line("p", 1, 0), Hold: time.Hour})
			if aof {
				if err != nil || offers[0].OK || ierr != nil || in.Promotions[0].Caps[0].Used != 3 || !errors.Is(rerr, budget.ErrLimit) {
					t.Fatalf("after a restart with appendonly: offers %+v %v; info %+v %v; reserve %v", offers, err, in, ierr, rerr)
				}
				return
			}
			if !errors.Is(err, budget.ErrLost) || !errors.Is(ierr, budget.ErrLost) || !errors.Is(rerr, budget.ErrLost) {
				t.Fatalf("after a restart without persistence: offers %v, info %v, reserve %v (want ErrLost)", err, ierr, rerr)
			}
		})
	}
}

// TestFaultKillDuringReads: CLIENT KILL of every connection, again and
// again, while 8 goroutines reserve and 4 read Offers and Info: a read
// either fails or answers within the cap (Offers OK false once Info
// says it is full), and the cap ends exactly full.
func TestFaultKillDuringReads(t *testing.T) {
	f := testredis.StartFaulty(t)
	ctx := testredis.Ctx(t)
	b := &testredis.Backend{Client: f.Cut, Prefix: testredis.Prefix(t)}
	const limit = 25
	bg := newBudget(t, ctx, b, budget.Options{}, capPromo(limit, false))
	admin := f.Server.Client(nil)
	stop := make(chan struct{})
	errs := make(chan error, 16)
	var killer, readers, writers sync.WaitGroup
	killer.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			_ = admin.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Err()
		}
	})
	hit := []cache.Result{{Promotion: "p", Tier: &cache.TierHit{}}}
	for range 4 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if in, err := bg.Info(ctx); err == nil {
					if c := in.Promotions[0].Caps[0]; c.Used > limit || c.Remaining != limit-c.Used {
						errs <- fmt.Errorf("Info under kills: %+v", c)
						return
					}
				}
				if o, err := bg.Offers(ctx, nil, hit); err == nil && (o[0].Left.Uses < 0 || o[0].Left.Uses > limit || o[0].OK != (o[0].Left.Uses > 0)) {
					errs <- fmt.Errorf("Offers under kills: %+v", o[0])
					return
				}
			}
		})
	}
	for g := range 8 {
		writers.Go(func() {
			for i := 0; i < 40; i++ {
				o := fmt.Sprintf("o%d-%d", g, i)
				for try := 0; try < 20; try++ { // the same order again until it answers
					_, err := bg.Reserve(ctx, budget.Request{Order: o, Lines: line("p", 1, 0), Hold: time.Hour})
					if err == nil || errors.Is(err, budget.ErrLimit) {
						break
					}
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	killer.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	in, err := bg.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := in.Promotions[0].Caps[0]; c.Used != limit {
		t.Fatalf("after the kills: %+v, want the cap exactly full", c)
	}
}
