package budget_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/testredis"
)

// TestLostAndRebuild: a budget never built, or whose epoch key is gone
// (Redis lost its data), refuses every call; Rebuild from redemptions puts
// the counters back, live holds included, under a new epoch.
func TestLostAndRebuild(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		day := time.UTC
		p := budget.Promotion{ID: "p", Caps: []budget.Cap{
			{Measure: budget.Uses, Limit: 5},
			{Measure: budget.Uses, Limit: 2, Per: "customer"},
			{Measure: budget.Spend, Limit: 1000, Period: budget.Day, Location: day},
		}}
		bg, err := budget.New(b.Client, "shop", budget.Options{Prefix: b.Prefix, Promotions: []budget.Promotion{p}})
		if err != nil {
			t.Fatal(err)
		}
		req := budget.Request{Order: "o1", Attributes: customer("a"), Lines: line("p", 1, 100), Hold: time.Minute}
		if _, err := bg.Reserve(ctx, req); !errors.Is(err, budget.ErrLost) {
			t.Fatalf("never built: %v", err)
		}
		ep1, err := bg.Rebuild(ctx, nil)
		if err != nil || ep1 == "" {
			t.Fatal(ep1, err)
		}
		if _, err := bg.Reserve(ctx, req); err != nil {
			t.Fatal(err)
		}
		// The ledger says: customer a redeemed once today for 300, b twice.
		now := time.Now()
		reds := []budget.Redemption{
			{Attributes: customer("a"), Lines: line("p", 1, 300), At: now},
			{Attributes: customer("b"), Lines: line("p", 2, 0), At: now},
			{Attributes: customer("b"), Lines: line("p", 1, 500), At: now.Add(-72 * time.Hour)}, // another day
		}
		ep2, err := bg.Rebuild(ctx, reds)
		if err != nil || ep2 == ep1 {
			t.Fatalf("rebuild: %q %v", ep2, err)
		}
		left, err := bg.Remaining(ctx, customer("a"), "p")
		if err != nil {
			t.Fatal(err)
		}
		// uses: 1 held + 4 redeemed of 5; a: 1 held + 1 of 2; today's spend: 100 held + 300 of 1000.
		if left["p"] != (budget.Left{Uses: 0, Spend: 600}) {
			t.Fatalf("after rebuild: %+v", left["p"])
		}
		// The hold still releases into the rebuilt counters.
		if _, err := bg.Release(ctx, "o1"); err != nil {
			t.Fatal(err)
		}
		left, _ = bg.Remaining(ctx, customer("a"), "p")
		if left["p"] != (budget.Left{Uses: 1, Spend: 700}) {
			t.Fatalf("after release: %+v", left["p"])
		}
		// Data loss: the epoch key goes (as every key would).
		if err := b.Client.Del(ctx, bg.Keys()[1]).Err(); err != nil {
			t.Fatal(err)
		}
		for _, call := range []func() error{
			func() error {
				_, err := bg.Reserve(ctx, budget.Request{Order: "o2", Attributes: customer("c"), Lines: line("p", 1, 0), Hold: time.Minute})
				return err
			},
			func() error { _, err := bg.Confirm(ctx, "o1"); return err },
			func() error { _, err := bg.Release(ctx, "o1"); return err },
			func() error { _, err := bg.Expire(ctx, "o1"); return err },
			func() error { _, err := bg.Remaining(ctx, customer("a"), "p"); return err },
			func() error { _, err := bg.Sweep(ctx); return err },
		} {
			if err := call(); !errors.Is(err, budget.ErrLost) {
				t.Fatalf("after loss: %v", err)
			}
		}
	})
}

// TestExpiryReported: a hold that ends unconfirmed is given back on time
// and reported through the delay queue: its task comes due at the hold's
// end, keyed by the order, and Expire takes the report once. A report
// whose enqueue failed is enqueued again by Sweep after ReportGrace.
func TestExpiryReported(t *testing.T) {
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	t0 := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	b.Mini.SetTime(t0)
	q, err := delay.New(b.Client, "orders", delay.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	p := budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 10}}}
	bg := newBudget(t, ctx, b, budget.Options{Expiry: q, ReportGrace: time.Minute}, p)
	if _, err := bg.Reserve(ctx, budget.Request{Order: "o1", Lines: line("p", 1, 0), Hold: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := bg.Reserve(ctx, budget.Request{Order: "paid", Lines: line("p", 1, 0), Hold: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := bg.Confirm(ctx, "paid"); err != nil {
		t.Fatal(err)
	}
	// A budget on the same keys whose queue is unreachable: its enqueue
	// fails (logged), so o2's report is lost until Sweep.
	dead := redis.NewClient(&redis.Options{Addr: testredis.ClosedAddr(t), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })
	qd, err := delay.New(dead, "orders", delay.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	bd, err := budget.New(b.Client, "shop", budget.Options{Prefix: b.Prefix, Promotions: []budget.Promotion{p}, Expiry: qd,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bd.Reserve(ctx, budget.Request{Order: "o2", Lines: line("p", 1, 0), Hold: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "expiry task not enqueued") {
		t.Fatalf("a failed enqueue was not logged: %q", logged.String())
	}
	tasks, err := delayraw.Take(ctx, q, 10)
	if err != nil || len(tasks) != 0 {
		t.Fatalf("tasks due before the holds end: %v %v", tasks, err)
	}
	b.Mini.SetTime(t0.Add(time.Minute))
	tasks, err = delayraw.Take(ctx, q, 10)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, task := range tasks {
		keys[task.Key] = true
	}
	if len(keys) != 2 || !keys["o1"] || !keys["paid"] {
		t.Fatalf("due tasks %v", keys)
	}
	for _, order := range []string{"o1", "paid"} {
		e, err := bg.Expire(ctx, order)
		want := budget.Expiry{State: budget.Expired, Expires: t0.Add(time.Minute), First: true}
		if order == "paid" {
			want = budget.Expiry{State: budget.Confirmed, Expires: t0.Add(time.Minute)}
		}
		if err != nil || e.State != want.State || e.First != want.First || !e.Expires.Equal(want.Expires) {
			t.Fatalf("expire %s: %+v %v", order, e, err)
		}
	}
	if e, _ := bg.Expire(ctx, "o1"); e.First {
		t.Fatal("a report taken twice")
	}
	if sw, err := bg.Sweep(ctx); err != nil || sw.Requeued != 0 {
		t.Fatalf("sweep within the grace: %+v %v", sw, err)
	}
	b.Mini.SetTime(t0.Add(2 * time.Minute))
	sw, err := bg.Sweep(ctx)
	if err != nil || sw.Requeued != 1 || sw.Held != 0 {
		t.Fatalf("sweep after the grace: %+v %v", sw, err)
	}
	tasks, err = delayraw.Take(ctx, q, 10)
	if err != nil || len(tasks) != 1 || tasks[0].Key != "o2" {
		t.Fatalf("o2's report: %v %v", tasks, err)
	}
	if e, err := bg.Expire(ctx, "o2"); err != nil || !e.First || e.State != budget.Expired {
		t.Fatalf("expire o2: %+v %v", e, err)
	}
	if sw, err := bg.Sweep(ctx); err != nil || sw.Requeued != 0 {
		t.Fatalf("sweep after the report: %+v %v", sw, err)
	}
}

// TestRemainingPipe: Remaining beside other commands in one pipeline,
// one round trip, the same answer as Remaining.
func TestRemainingPipe(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		bg := newBudget(t, ctx, b, budget.Options{},
			budget.Promotion{ID: "a", MaxPerCart: 3, Caps: []budget.Cap{{Measure: budget.Uses, Limit: 10}, {Measure: budget.Spend, Limit: 500, Per: "customer"}}},
			budget.Promotion{ID: "b"})
		if _, err := bg.Reserve(ctx, budget.Request{Order: "o", Attributes: customer("c"), Lines: line("a", 1, 200), Hold: time.Minute}); err != nil {
			t.Fatal(err)
		}
		want := map[string]budget.Left{"a": {Uses: 3, Spend: 300}, "b": {Uses: budget.NoCap, Spend: budget.NoCap}}
		rt, err := testredis.CountRoundTrips(ctx, b.Client)
		if err != nil {
			t.Fatal(err)
		}
		// A connection's set-up commands pass through the hook too: warm
		// the pool first.
		warm := b.Client.Pipeline()
		warm.Ping(ctx)
		if _, err := warm.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the first sends the script, the second its SHA
			rt.Reset()
			pipe := b.Client.Pipeline()
			other := pipe.Ping(ctx)
			cmd, err := bg.RemainingPipe(ctx, pipe, customer("c"), "a", "b")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := cmd.Result()
			if err != nil || other.Err() != nil {
				t.Fatal(err, other.Err())
			}
			if got["a"] != want["a"] || got["b"] != want["b"] {
				t.Fatalf("got %+v", got)
			}
			// One round trip on one server. A Cluster pipeline goes to each
			// node it names in parallel (here the PING's node and the
			// budget's), with the cluster client's own slot refreshes
			// besides: the answer is checked there, not the count.
			if n := rt.Total(); n != 1 && !b.IsCluster() {
				t.Fatalf("%d round trips: %v", n, rt.PerNode())
			}
		}
	})
}

// TestLuaHeaders: every script in lua/ declares its KEYS, ARGV and
// Returns in its header.
func TestLuaHeaders(t *testing.T) {
	files, err := filepath.Glob("lua/*.lua")
	if err != nil || len(files) < 8 {
		t.Fatalf("scripts: %v %v", files, err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var header strings.Builder
		for _, l := range strings.Split(string(src), "\n") {
			if !strings.HasPrefix(l, "--") {
				break
			}
			header.WriteString(l + "\n")
		}
		for _, want := range []string{"-- KEYS[", "-- ARGV[", "-- Returns"} {
			if !strings.Contains(header.String(), want) {
				t.Errorf("%s: no %q in its header", f, want)
			}
		}
	}
}
