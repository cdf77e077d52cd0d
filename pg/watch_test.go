package pg

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
)

// watchRig is a Watch running on its own schema and private Redis.
type watchRig struct {
	pool   *pgxpool.Pool
	schema string
	r      *Rules
	c      *cache.Cache
	ps     []gradient.Promotion
	events chan WatchEvent
	pid    uint32 // the first listener's backend
}

func startWatch(t *testing.T, opts WatchOptions) *watchRig {
	t.Helper()
	pool, schema := testDB(t)
	r, _ := NewRules(pool, schema)
	w := &watchRig{pool: pool, schema: schema, r: r, c: testCache(t), ps: examplePromotions(t), events: make(chan WatchEvent, 10000)}
	saveAll(t, pool, r, w.ps...)
	opts.OnEvent = func(e WatchEvent) {
		select {
		case w.events <- e:
		default: // a test that stops reading must not block Watch
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = Watch(ctx, pool, r, w.c, opts) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	w.pid = w.wait(t, "the first listener", func(e WatchEvent) bool { return e.Kind == WatchListening }).PID
	w.wait(t, "the first full pass", func(e WatchEvent) bool { return e.Kind == WatchFullPass })
	return w
}

// wait returns the first event matching ok, failing after 10 s.
func (w *watchRig) wait(t *testing.T, what string, ok func(WatchEvent) bool) WatchEvent {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-w.events:
			if ok(e) {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s within 10 s", what)
		}
	}
}

// change saves p with its first tier's reward changed to percent pct and
// returns it and the commit time.
func (w *watchRig) change(t *testing.T, p gradient.Promotion, pct decimal.Decimal) (gradient.Promotion, time.Time) {
	t.Helper()
	p.Tiers = slices.Clone(p.Tiers)
	p.Tiers[0].Reward.Percent = pct
	saveAll(t, w.pool, w.r, p)
	return p, time.Now()
}

func (w *watchRig) stored(t *testing.T, id string) string {
	t.Helper()
	in, err := w.c.Info(t.Context(), id)
	if err != nil {
		t.Fatalf("Info(%q): %v", id, err)
	}
	return in.Version
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// TestWatchRefreshLatency commits 200 changes to one promotion, one after
// the other, and measures commit-to-refreshed-in-Redis.
func TestWatchRefreshLatency(t *testing.T) {
	w := startWatch(t, WatchOptions{})
	p := w.ps[0] // qty-3-5-10, percent_off tiers
	const changes = 200
	lat := make([]time.Duration, 0, changes)
	for i := range changes {
		want, committed := w.change(t, p, decimal.New(int64(500+i), -2)) // 5.00%, 5.01%, ...
		v := version(t, want)
		e := w.wait(t, "refresh", func(e WatchEvent) bool {
			if e.Kind == WatchRefreshed && e.ID != p.ID {
				t.Errorf("change %d to %q refreshed %q too", i, p.ID, e.ID)
			}
			return e.Kind == WatchRefreshed && e.ID == p.ID && e.Version == v
		})
		if e.Outcome != cache.Updated {
			t.Fatalf("change %d: outcome %v, want updated", i, e.Outcome)
		}
		lat = append(lat, e.At.Sub(committed))
		if got := w.stored(t, p.ID); got != v {
			t.Fatalf("change %d: Redis has version %s, want %s", i, got, v)
		}
	}
	p50, p99, worst := percentile(lat, 0.50), percentile(lat, 0.99), slices.Max(lat)
	t.Logf("watch: %d committed changes to one promotion, commit to refreshed in Redis: p50 %v, p99 %v, max %v",
		changes, p50.Round(time.Microsecond), p99.Round(time.Microsecond), worst.Round(time.Microsecond))
	// The median shows notifications drive the refresh (a full pass
	// comes every 5 minutes); the tail is the machine's scheduling, which
	// on a shared 2-core machine under -race reached 410 ms.
	if p50 > 100*time.Millisecond {
		t.Errorf("p50 %v, want ≤ 100 ms", p50)
	}
}

func TestWatchDeleteAndRefused(t *testing.T) {
	w := startWatch(t, WatchOptions{})
	ctx := testCtx(t, 30*time.Second)
	id := w.ps[2].ID
	tx, _ := w.pool.Begin(ctx)
	if ok, err := w.r.Delete(ctx, tx, id); !ok || err != nil {
		t.Fatalf("Delete = %v, %v", ok, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	w.wait(t, "delete of "+id, func(e WatchEvent) bool { return e.Kind == WatchDeleted && e.ID == id })
	if _, err := w.c.Info(ctx, id); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("Info after the row was deleted = %v, want ErrNotFound", err)
	}

	bad := w.ps[3].ID // bundle-2-for-30
	kept := w.stored(t, bad)
	if _, err := w.pool.Exec(ctx, `UPDATE `+w.schema+`.tiers SET amount = 30.001 WHERE promotion_id = $1 AND tier_id = 'two'`, bad); err != nil {
		t.Fatal(err)
	}
	e := w.wait(t, "skip of "+bad, func(e WatchEvent) bool { return e.Kind == WatchSkipped && e.ID == bad })
	if !errors.Is(e.Err, gradient.ErrBadReward) {
		t.Fatalf("skipped with %v, want gradient.ErrBadReward", e.Err)
	}
	if got := w.stored(t, bad); got != kept {
		t.Fatalf("a refused change replaced the stored version %s with %s", kept, got)
	}
}

// TestWatchFullPassCatchesMissedNotification commits a change with the
// notify triggers off (no notification at all; the revision triggers
// still give it its revision); the periodic full pass must still bring
// it to Redis.
func TestWatchFullPassCatchesMissedNotification(t *testing.T) {
	w := startWatch(t, WatchOptions{FullEvery: 300 * time.Millisecond})
	ctx := testCtx(t, 30*time.Second)
	p := w.ps[0]
	tx, _ := w.pool.Begin(ctx)
	defer func() { _ = tx.Rollback(ctx) }()
	notify := func(on string) {
		t.Helper()
		for _, tb := range []string{"promotions", "tiers", "gifts"} {
			if _, err := tx.Exec(ctx, `ALTER TABLE `+w.schema+`.`+tb+` `+on+` TRIGGER `+tb+`_notify`); err != nil {
				t.Fatal(err)
			}
		}
	}
	notify("DISABLE")
	p.Tiers = slices.Clone(p.Tiers)
	p.Tiers[0].Reward.Percent = decimal.RequireFromString("11.5")
	if err := w.r.Save(ctx, tx, p); err != nil {
		t.Fatal(err)
	}
	notify("ENABLE")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	w.wait(t, "a full pass updating "+p.ID, func(e WatchEvent) bool {
		if e.Kind == WatchRefreshed && e.ID == p.ID {
			t.Fatal("a change made with triggers off was notified")
		}
		return e.Kind == WatchFullPass && slices.Contains(e.Summary.Updated, p.ID)
	})
	if got, want := w.stored(t, p.ID), version(t, p); got != want {
		t.Fatalf("Redis has %s, want %s", got, want)
	}
}

// TestFaultWatchListenerTerminated kills the listener's backend with
// pg_terminate_backend, commits a change while it is down, and expects a
// new listener whose reconnect pass brings the change, then notifications
// working again.
func TestFaultWatchListenerTerminated(t *testing.T) {
	w := startWatch(t, WatchOptions{ReconnectMin: time.Second})
	ctx := testCtx(t, 30*time.Second)
	var killed bool
	if err := w.pool.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, int32(w.pid)).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", w.pid, killed, err)
	}
	w.wait(t, "the listener's error", func(e WatchEvent) bool { return e.Kind == WatchError && e.ID == "" })
	// Watch now waits ReconnectMin before reconnecting: this change has no listener.
	p, _ := w.change(t, w.ps[0], decimal.RequireFromString("12.5"))
	e := w.wait(t, "a new listener", func(e WatchEvent) bool { return e.Kind == WatchListening })
	if e.PID == w.pid {
		t.Fatalf("reconnected on the terminated backend %d", e.PID)
	}
	pass := w.wait(t, "the reconnect pass", func(e WatchEvent) bool { return e.Kind == WatchFullPass })
	if !slices.Contains(pass.Summary.Updated, p.ID) {
		t.Fatalf("the reconnect pass updated %v, want %q (changed while no listener ran)", pass.Summary.Updated, p.ID)
	}
	if got, want := w.stored(t, p.ID), version(t, p); got != want {
		t.Fatalf("Redis has %s, want %s", got, want)
	}
	p, _ = w.change(t, p, decimal.RequireFromString("13.5"))
	v := version(t, p)
	w.wait(t, "a notified refresh on the new listener", func(e WatchEvent) bool {
		return e.Kind == WatchRefreshed && e.ID == p.ID && e.Version == v
	})
}
