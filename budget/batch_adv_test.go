package budget_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// heldBatch starts a Faulty server with a budget of promos on it, sends
// "warm" (one use of warmPromo) so the script is loaded, runs before
// (alone, not held), then holds the reply of the next call ("first", the
// same as warm): the calls made until release go together in one batch.
func heldBatch(t *testing.T, opts budget.Options, warmPromo string, before func(ctx context.Context, bg *budget.Budget), promos ...budget.Promotion) (*testredis.Faulty, *budget.Budget, context.Context, func() <-chan outcomeOf) {
	t.Helper()
	f := testredis.StartFaulty(t)
	ctx := testredis.Ctx(t)
	bg := newBudget(t, ctx, &testredis.Backend{Client: f.Cut, Prefix: testredis.Prefix(t)}, opts, promos...)
	if _, err := bg.Reserve(ctx, budget.Request{Order: "warm", Lines: line(warmPromo, 1, 0), Hold: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(ctx, bg)
	}
	h := f.Proxy.HoldNext(faultproxy.Contains("EVALSHA"))
	t.Cleanup(h.Release)
	first := reserveAsync(ctx, bg, budget.Request{Order: "first", Lines: line(warmPromo, 1, 0), Hold: time.Hour})
	waitHeld(t, h)
	return f, bg, ctx, func() <-chan outcomeOf { h.Release(); return first }
}

// TestFaultBatchDeadlines: callers of one batch with different deadlines,
// the batch's reply held past all of them: each gets ErrUnknown (matching
// DeadlineExceeded) by its own deadline, the latest one too (the batch
// runs under it, so its end and the caller's race), and every one of
// them was granted: the same Reserve again answers its hold, not new.
func TestFaultBatchDeadlines(t *testing.T) {
	f, bg, ctx, release := heldBatch(t, budget.Options{}, "p", nil, capPromo(100, false))
	second := f.Proxy.HoldNext(faultproxy.Contains("EVALSHA"))
	t.Cleanup(second.Release)
	const n = 6
	start := time.Now()
	var chs []<-chan outcomeOf
	var cancels []context.CancelFunc
	for i := range n {
		// the last two share the latest deadline
		d := time.Duration(100+100*min(i, n-2)) * time.Millisecond
		c, cancel := context.WithDeadline(ctx, start.Add(d))
		cancels = append(cancels, cancel)
		chs = append(chs, reserveAsync(c, bg, budget.Request{Order: fmt.Sprint("d", i), Lines: line("p", 1, 0), Hold: time.Hour}))
		queuedBehind(t, bg, i+1)
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	if o := await(t, release()); o.err != nil {
		t.Fatal(o.err)
	}
	waitHeld(t, second)
	for i, ch := range chs {
		o := await(t, ch)
		took := time.Since(start)
		if !errors.Is(o.err, budget.ErrUnknown) || !errors.Is(o.err, context.DeadlineExceeded) {
			t.Errorf("d%d: %+v, %v: want ErrUnknown and DeadlineExceeded", i, o.res, o.err)
		}
		if lim := time.Duration(100+100*min(i, n-2))*time.Millisecond + time.Second; took > lim {
			t.Errorf("d%d answered after %v, want by %v", i, took, lim)
		}
	}
	second.Release()
	for i := range n {
		res, err := bg.Reserve(ctx, budget.Request{Order: fmt.Sprint("d", i), Lines: line("p", 1, 0), Hold: time.Hour})
		if err != nil || res.New || res.State != budget.Held {
			t.Errorf("d%d again: %+v, %v: want its hold, not new", i, res, err)
		}
	}
}

// TestBatchCtxDoneBeforeCall: a ctx already ended sends nothing, alone or
// behind a batch in flight: its error, not ErrUnknown (the outcome is
// known: no hold), and no record.
func TestBatchCtxDoneBeforeCall(t *testing.T) {
	for _, tc := range []struct {
		name   string
		behind bool // a batch is in flight
	}{{"alone", false}, {"behind a batch", true}} {
		t.Run(tc.name, func(t *testing.T) {
			_, bg, ctx, release := heldBatch(t, budget.Options{}, "p", nil, capPromo(100, false))
			first := release
			if !tc.behind {
				ch := release()
				if o := await(t, ch); o.err != nil {
					t.Fatal(o.err)
				}
				first = func() <-chan outcomeOf { return reserveAsync(ctx, bg, budget.Request{Order: "first", Lines: line("p", 1, 0), Hold: time.Hour}) }
			}
			done, cancel := context.WithCancel(ctx)
			cancel()
			_, err := bg.Reserve(done, budget.Request{Order: "late", Lines: line("p", 1, 0), Hold: time.Hour})
			if !errors.Is(err, context.Canceled) || errors.Is(err, budget.ErrUnknown) {
				t.Errorf("ended ctx: %v, want context.Canceled, not ErrUnknown", err)
			}
			if o := await(t, first()); o.err != nil {
				t.Fatal(o.err)
			}
			if _, err := bg.Order(ctx, "late"); !errors.Is(err, budget.ErrNotFound) {
				t.Errorf("late: %v, want ErrNotFound (never sent)", err)
			}
		})
	}
}
