package budget_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/testredis"
)

// TestPeriodAcrossDST: a cap of one use per day in New York, judged by
// Redis TIME (miniredis SetTime, months from the client clock, so the
// first call also finds its period by Redis TIME, not the client's).
// Days across both DST changes are 23 and 25 hours long: a reservation
// at 23:30 and one at 00:10 the next local day are in two periods, one at
// 00:30 and one at 23:30 the same 25-hour day in one.
func TestPeriodAcrossDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no tz database: %v", err)
	}
	steps := []struct {
		at time.Time
		ok bool
	}{
		{time.Date(2026, 3, 7, 23, 30, 0, 0, ny), true},                 // Saturday, 24 h
		{time.Date(2026, 3, 8, 0, 10, 0, 0, ny), true},                  // Sunday: 23 h (02:00 EST -> 03:00 EDT)
		{time.Date(2026, 3, 8, 23, 59, 0, 0, ny), false},                // still Sunday
		{time.Date(2026, 3, 9, 0, 0, 0, 0, ny), true},                   // Monday
		{time.Date(2026, 11, 1, 0, 30, 0, 0, ny), true},                 // Sunday: 25 h (02:00 EDT -> 01:00 EST)
		{time.Date(2026, 11, 1, 1, 30, 0, 0, ny).Add(time.Hour), false}, // 01:30 EST, the repeated hour
		{time.Date(2026, 11, 1, 23, 30, 0, 0, ny), false},
		{time.Date(2026, 11, 2, 0, 0, 1, 0, ny), true},
	}
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	bg := newBudget(t, ctx, b, budget.Options{MaxHold: time.Hour},
		budget.Promotion{ID: "daily", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1, Period: budget.Day, Location: ny}}})
	for i, s := range steps {
		b.Mini.SetTime(s.at)
		// Each reservation is confirmed, so no hold ends between steps.
		order := "o" + s.at.Format(time.RFC3339)
		_, err := bg.Reserve(ctx, budget.Request{Order: order, Lines: line("daily", 1, 0), Hold: time.Minute})
		if s.ok != (err == nil) {
			t.Fatalf("step %d at %v: ok=%v, err %v", i, s.at, s.ok, err)
		}
		if err == nil {
			if _, err := bg.Confirm(ctx, order); err != nil {
				t.Fatal(err)
			}
		} else if !errors.Is(err, budget.ErrLimit) {
			t.Fatalf("step %d: %v", i, err)
		}
	}
}

// TestPeriodsWeekMonth: week (Monday to Monday) and month caps in a zone
// far from UTC.
func TestPeriodsWeekMonth(t *testing.T) {
	tokyo := time.FixedZone("UTC+9", 9*3600)
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	bg := newBudget(t, ctx, b, budget.Options{},
		budget.Promotion{ID: "w", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1, Period: budget.Week, Location: tokyo}}},
		budget.Promotion{ID: "m", Caps: []budget.Cap{{Measure: budget.Spend, Limit: 100, Period: budget.Month, Location: tokyo}}})
	steps := []struct {
		at    time.Time
		promo string
		ok    bool
	}{
		{time.Date(2026, 6, 7, 23, 0, 0, 0, tokyo), "w", true}, // Sunday
		{time.Date(2026, 6, 8, 0, 0, 0, 0, tokyo), "w", true},  // Monday: a new week
		{time.Date(2026, 6, 14, 23, 59, 0, 0, tokyo), "w", false},
		{time.Date(2026, 6, 30, 23, 0, 0, 0, tokyo), "m", true}, // 100 of 100
		{time.Date(2026, 6, 30, 23, 59, 0, 0, tokyo), "m", false},
		{time.Date(2026, 7, 1, 0, 0, 0, 0, tokyo), "m", true},
	}
	for i, s := range steps {
		b.Mini.SetTime(s.at)
		order := s.promo + s.at.Format(time.RFC3339)
		_, err := bg.Reserve(ctx, budget.Request{Order: order, Lines: line(s.promo, 1, 100), Hold: time.Minute})
		if s.ok != (err == nil) {
			t.Fatalf("step %d: ok=%v, err %v", i, s.ok, err)
		}
		if err == nil {
			if _, err := bg.Confirm(ctx, order); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestHoldExpiry: a hold counts until its time passes by Redis TIME, with
// no Release; Confirm after that is granted only while the caps allow it.
func TestHoldExpiry(t *testing.T) {
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	t0 := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	b.Mini.SetTime(t0)
	bg := newBudget(t, ctx, b, budget.Options{}, budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1}}})
	res, err := bg.Reserve(ctx, budget.Request{Order: "o1", Lines: line("p", 1, 0), Hold: time.Minute})
	if err != nil || !res.Expires.Equal(t0.Add(time.Minute)) {
		t.Fatal(res, err)
	}
	b.Mini.SetTime(t0.Add(time.Minute - time.Millisecond))
	if _, err := bg.Reserve(ctx, budget.Request{Order: "o2", Lines: line("p", 1, 0), Hold: time.Minute}); !errors.Is(err, budget.ErrLimit) {
		t.Fatalf("hold still live: %v", err)
	}
	b.Mini.SetTime(t0.Add(time.Minute))
	// Expired: o1's expired hold is confirmed again since the cap allows it.
	c, err := bg.Confirm(ctx, "o1")
	if err != nil || !c.New || !c.At.Equal(t0.Add(time.Minute)) {
		t.Fatalf("confirm after expiry: %+v %v", c, err)
	}
	if _, err := bg.Reserve(ctx, budget.Request{Order: "o2", Lines: line("p", 1, 0), Hold: time.Minute}); !errors.Is(err, budget.ErrLimit) {
		t.Fatalf("cap held by the confirmed o1: %v", err)
	}
	// An expired hold whose place was taken is refused.
	bg2 := newBudget(t, ctx, &testredis.Backend{Client: b.Client, Prefix: b.Prefix + "2"}, budget.Options{},
		budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1}}})
	if _, err := bg2.Reserve(ctx, budget.Request{Order: "a", Lines: line("p", 1, 0), Hold: time.Minute}); err != nil {
		t.Fatal(err)
	}
	b.Mini.SetTime(t0.Add(3 * time.Minute))
	if _, err := bg2.Reserve(ctx, budget.Request{Order: "b", Lines: line("p", 1, 0), Hold: time.Minute}); err != nil {
		t.Fatal(err)
	}
	_, err = bg2.Confirm(ctx, "a")
	if !errors.Is(err, budget.ErrExpired) || !errors.Is(err, budget.ErrLimit) {
		t.Fatalf("confirm of a hold whose place was taken: %v", err)
	}
	if st, err := bg2.Release(ctx, "a"); err != nil || st != budget.Expired {
		t.Fatalf("release expired: %v %v", st, err)
	}
}

// TestPeriodKeysExpire: a period's counters go by themselves, MaxHold + 1h
// after the period ends (past any hold that can still give back to them),
// so per-day caps cost no memory for days gone.
func TestPeriodKeysExpire(t *testing.T) {
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	t0 := time.Date(2026, 2, 10, 15, 0, 0, 0, time.UTC)
	b.Mini.SetTime(t0)
	bg := newBudget(t, ctx, b, budget.Options{MaxHold: 2 * time.Hour},
		budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 5, Period: budget.Day, Location: time.UTC}}})
	if _, err := bg.Reserve(ctx, budget.Request{Order: "o", Lines: line("p", 1, 0), Hold: time.Hour}); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 2, 10, 0, 0, 0, 0, time.UTC)
	key := fmt.Sprintf("%sc:p:d%d", bg.Keys()[0], start.Unix())
	ttl := b.Mini.TTL(key)
	want := start.Add(24*time.Hour + 3*time.Hour).Sub(t0) // the day's end + MaxHold + 1h
	if ttl != want {
		t.Fatalf("TTL of %s: %v, want %v", key, ttl, want)
	}
}
