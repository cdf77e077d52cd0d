package budget_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// Faults against group commit (batch.go): deadlines and ends of ctx,
// paused servers, lost replies with gone callers, maxmemory.

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
				first = func() <-chan outcomeOf {
					return reserveAsync(ctx, bg, budget.Request{Order: "after", Lines: line("p", 1, 0), Hold: time.Hour})
				}
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

// TestFaultBatchOOM: a batch run while Redis is past maxmemory
// (noeviction) writes nothing: Redis refuses a script's first write
// (HINCRBY, of a purge or of the commit) and would let every later one
// pass, so every write a batch can start with must be one Redis refuses.
// Every caller gets the OOM error, not ErrUnknown (no hold was made), the
// hold that ended is given back by the next script, and the same calls
// later are granted as new.
func TestFaultBatchOOM(t *testing.T) {
	for _, tc := range []struct {
		name  string
		purge bool // a hold ends before the batch
	}{{"nothing to purge", false}, {"purge writes first", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var dueEnd time.Time
			before := func(ctx context.Context, bg *budget.Budget) {
				if !tc.purge {
					return
				}
				res, err := bg.Reserve(ctx, budget.Request{Order: "due", Lines: line("p", 1, 0), Hold: 200 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				dueEnd = res.Expires
			}
			f, bg, ctx, release := heldBatch(t, budget.Options{}, "p", before, capPromo(100, false))
			const n = 3
			var chs []<-chan outcomeOf
			for i := range n {
				chs = append(chs, reserveAsync(ctx, bg, budget.Request{Order: fmt.Sprint("m", i), Lines: line("p", 1, 0), Hold: time.Hour}))
			}
			queuedBehind(t, bg, n)
			admin := f.Server.Client(nil)
			pipe := admin.Pipeline()
			for i := range 2000 {
				pipe.Set(ctx, fmt.Sprint("fill:", i), strings.Repeat("x", 1000), 0)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1mb"}} {
				if err := admin.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if tc.purge {
				redisPast(t, ctx, admin, dueEnd)
			}
			if o := await(t, release()); o.err != nil {
				t.Fatal(o.err)
			}
			for i, ch := range chs {
				o := await(t, ch)
				if o.err == nil || !strings.Contains(o.err.Error(), "OOM") || errors.Is(o.err, budget.ErrUnknown) {
					t.Errorf("m%d over maxmemory: %+v, %v: want the OOM error", i, o.res, o.err)
				}
			}
			if err := admin.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				res, err := bg.Reserve(ctx, budget.Request{Order: fmt.Sprint("m", i), Lines: line("p", 1, 0), Hold: time.Hour})
				if err != nil || !res.New {
					t.Errorf("m%d again: %+v, %v: want a new hold", i, res, err)
				}
			}
			// warm, first and the n: due ended.
			if left, err := bg.Remaining(ctx, nil, "p"); err != nil || left["p"].Uses != 100-2-n {
				t.Errorf("remaining %+v, %v: want %d", left, err, 100-2-n)
			}
		})
	}
}

// TestFaultBatchPausedDeadlines: callers with deadlines of 20 to 200 ms
// reserve (once per customer, 300 customers) while the server is paused
// (CLIENT PAUSE) again and again and every reply is 15 ms late, so
// batches end under their callers' deadlines, before or after the script
// ran. Every answer is true: a grant is held, a refusal or a bare
// ctx error (nothing sent) left no record, only ErrUnknown may have
// either; the counters are the holds, never past a cap.
func TestFaultBatchPausedDeadlines(t *testing.T) {
	f := testredis.StartFaulty(t)
	ctx := testredis.Ctx(t)
	const customers = 300
	bg := newBudget(t, ctx, &testredis.Backend{Client: f.Cut, Prefix: testredis.Prefix(t)}, budget.Options{},
		budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 250}, {Measure: budget.Uses, Limit: 1, Per: "customer"}}})
	admin := f.Server.Client(nil)
	// Replies come late too, so a batch can end under its deadline after
	// the script ran.
	f.Proxy.SetLatency(15 * time.Millisecond)
	var pauses atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for pauses.Load() < 6 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(20+rand.IntN(60)) * time.Millisecond):
			}
			if admin.Do(ctx, "CLIENT", "PAUSE", 30+rand.IntN(150), "ALL").Err() == nil {
				pauses.Add(1)
			}
		}
	})
	var mu sync.Mutex
	outcomes := map[string]string{}
	var next atomic.Int64
	for range 16 {
		wg.Go(func() {
			for pauses.Load() < 6 && ctx.Err() == nil {
				i := next.Add(1)
				order := fmt.Sprint("o", i)
				c, cancel := context.WithTimeout(ctx, time.Duration(20+rand.IntN(180))*time.Millisecond)
				_, err := bg.Reserve(c, budget.Request{Order: order, Attributes: customer(fmt.Sprint("c", i%customers)),
					Lines: line("p", 1, 0), Hold: time.Hour})
				cancel()
				o := "other: " + fmt.Sprint(err)
				switch {
				case err == nil:
					o = "ok"
				case errors.Is(err, budget.ErrLimit):
					o = "limit"
				case errors.Is(err, budget.ErrUnknown):
					o = "unknown"
				case errors.Is(err, context.DeadlineExceeded):
					o = "ctx"
				}
				mu.Lock()
				outcomes[order] = o
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := admin.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	s := readState(t, ctx, admin, bg)
	count := map[string]int{}
	for order, o := range outcomes {
		count[o]++
		st := s.records[order]
		switch o {
		case "ok":
			if st != "h" {
				t.Errorf("%s granted, record %q", order, st)
			}
		case "limit", "ctx":
			if st != "" {
				t.Errorf("%s answered %s, but its record is %q", order, o, st)
			}
		case "unknown":
		default:
			t.Errorf("%s: %s", order, o)
		}
	}
	held := map[string]int64{}
	for order, st := range s.records {
		if st == "h" {
			held[s.cust[order]]++
			held[""]++
		}
	}
	if s.total != held[""] || s.total > 250 {
		t.Errorf("counter %d, %d holds, cap 250", s.total, held[""])
	}
	for c, n := range s.per {
		if n != held[c] || n > 1 {
			t.Errorf("customer %s: counter %d, %d holds, cap 1", c, n, held[c])
		}
	}
	if count["ctx"]+count["unknown"] == 0 {
		t.Errorf("outcomes %v: no call met a pause", count)
	}
	t.Logf("outcomes %v, %d holds, %d pauses", count, held[""], pauses.Load())
}

// TestFaultBatchCutAbandonedSettled: a batch's reply is lost to a cut
// connection (go-redis sends it again) while one of its callers has gone (ErrUnknown): every
// grant of the batch, the gone caller's included, is told to the
// Observer exactly once and has its expiry task, and the gone caller's
// retry answers its hold, not new.
func TestFaultBatchCutAbandonedSettled(t *testing.T) {
	f := testredis.StartFaulty(t)
	ctx := testredis.Ctx(t)
	q, err := delay.New(f.Server.Client(nil), "orders", delay.Options{Prefix: testredis.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	grants := 0
	told := make(chan struct{}, 100)
	opts := budget.Options{Expiry: q, Observer: budget.Observer{OnGrant: func(string, string) {
		mu.Lock()
		grants++
		mu.Unlock()
		told <- struct{}{}
	}}}
	bg := newBudget(t, ctx, &testredis.Backend{Client: f.Cut, Prefix: testredis.Prefix(t)}, opts, capPromo(100, false))
	h := f.Proxy.HoldNext(faultproxy.Contains("EVALSHA"))
	t.Cleanup(h.Release)
	first := reserveAsync(ctx, bg, budget.Request{Order: "first", Lines: line("p", 1, 0), Hold: time.Hour})
	waitHeld(t, h)
	const n = 10
	gone, cancel := context.WithCancel(ctx)
	defer cancel()
	var chs []<-chan outcomeOf
	for i := range n {
		c := ctx
		if i == 3 {
			c = gone
		}
		chs = append(chs, reserveAsync(c, bg, budget.Request{Order: fmt.Sprint("o", i), Lines: line("p", 1, 0), Hold: time.Hour}))
	}
	queuedBehind(t, bg, n)
	second := f.Proxy.HoldNext(faultproxy.Contains("EVALSHA"))
	t.Cleanup(second.Release)
	h.Release()
	if o := await(t, first); o.err != nil {
		t.Fatal(o.err)
	}
	waitHeld(t, second) // the batch ran; its reply is held
	cancel()
	if o := await(t, chs[3]); !errors.Is(o.err, budget.ErrUnknown) {
		t.Fatalf("o3 gone in flight: %v, want ErrUnknown", o.err)
	}
	f.Proxy.CutAll() // the held reply is lost: go-redis sends the batch again
	for i, ch := range chs {
		if i == 3 {
			continue
		}
		if o := await(t, ch); o.err != nil || !o.res.New {
			t.Errorf("o%d: %+v, %v: want a new hold", i, o.res, o.err)
		}
	}
	for range 1 + n {
		select {
		case <-told:
		case <-time.After(10 * time.Second):
			t.Fatal("grants not all told in 10s")
		}
	}
	if res, err := bg.Reserve(ctx, budget.Request{Order: "o3", Lines: line("p", 1, 0), Hold: time.Hour}); err != nil || res.New {
		t.Errorf("o3 again: %+v, %v: want its hold, not new", res, err)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if grants != 1+n || st.Pending != 1+n {
		t.Errorf("%d grants told, %d expiry tasks: want %d", grants, st.Pending, 1+n)
	}
}
