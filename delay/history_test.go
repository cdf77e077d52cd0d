package delay

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// The slot of a minute, and which slots a reader takes: a slot counts
// only when its stamped minute is the one the window expects there, so a
// slot left from a day ago, or stamped ahead, reads as zero.
func TestHistorySlots(t *testing.T) {
	t.Parallel()
	const now = int64(29_000_000) // a Unix minute (2025)
	for _, c := range []struct {
		minute, slot int64
	}{
		{0, 0}, {1439, 1439}, {1440, 0}, {1441, 1}, {now, now % 1440}, {-1, 1439},
	} {
		if got := histSlot(c.minute); got != c.slot {
			t.Errorf("histSlot(%d) = %d, want %d", c.minute, got, c.slot)
		}
	}
	stamp := func(h map[string]string, minute, ok int64) {
		s := histSlot(minute)
		h[histField(s, "m")] = strconv.FormatInt(minute, 10)
		h[histField(s, "ok")] = strconv.FormatInt(ok, 10)
	}
	for _, c := range []struct {
		name   string
		since  int64           // Unix minute
		write  map[int64]int64 // minute -> ok count in the hash
		points int             // minutes returned
		want   map[int64]int64 // minute -> ok read back (others 0)
	}{
		{"current minute", now, map[int64]int64{now: 3}, 1, map[int64]int64{now: 3}},
		{"minute boundary", now - 1, map[int64]int64{now - 1: 2, now: 5}, 2, map[int64]int64{now - 1: 2, now: 5}},
		{"24 h kept", now - 1439, map[int64]int64{now - 1439: 7, now: 1}, 1440, map[int64]int64{now - 1439: 7, now: 1}},
		{"since clamped to 24 h", now - 5000, map[int64]int64{now - 1439: 7}, 1440, map[int64]int64{now - 1439: 7}},
		{"a day-old slot reads zero", now - 10, map[int64]int64{now - 1440 - 3: 9}, 11, nil},
		{"a slot stamped ahead reads zero", now - 10, map[int64]int64{now + 1440 - 3: 9}, 11, nil},
		{"before since ignored", now - 2, map[int64]int64{now - 3: 4, now - 2: 1}, 3, map[int64]int64{now - 2: 1}},
		{"since in the future: the current minute", now + 10, map[int64]int64{now: 6}, 1, map[int64]int64{now: 6}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := map[string]string{}
			for m, ok := range c.write {
				stamp(h, m, ok)
			}
			got := historyFrom(h, time.Unix(c.since*60+59, 0), now)
			if len(got) != c.points {
				t.Fatalf("%d points, want %d", len(got), c.points)
			}
			first := got[0].Start.Unix() / 60
			for i, m := range got {
				minute := first + int64(i)
				if m.Start.Unix() != minute*60 {
					t.Fatalf("point %d starts %v, want minute %d", i, m.Start, minute)
				}
				if m.OK != c.want[minute] {
					t.Errorf("minute %d: ok %d, want %d", minute-now, m.OK, c.want[minute])
				}
			}
			if got[len(got)-1].Start.Unix()/60 != now {
				t.Errorf("last point %v is not the current minute", got[len(got)-1].Start)
			}
		})
	}
}

func TestHistoryLateBuckets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		late time.Duration
		b    int
	}{
		{-time.Millisecond, 0}, {0, 0}, {9 * time.Millisecond, 0}, {10 * time.Millisecond, 1},
		{999 * time.Millisecond, 2}, {time.Second, 3}, {10 * time.Second, 4}, {time.Hour, 4},
	} {
		if got := lateBucket(max(c.late, 0)); got != c.b {
			t.Errorf("lateBucket(%v) = %d, want %d", c.late, got, c.b)
		}
	}
	m := Minute{OK: 98, Dead: 2, Late: [len(Minute{}.Late)]int64{90, 8, 1, 1, 0}}
	if p := m.lateUpper(50); p != 10*time.Millisecond {
		t.Errorf("p50 = %v", p)
	}
	if p := m.lateUpper(99); p != time.Second {
		t.Errorf("p99 = %v", p)
	}
	if p := m.lateUpper(100); p != 10*time.Second {
		t.Errorf("p100 = %v", p)
	}
}

// A flush into a slot a day old clears it first, a flush into a slot
// that already counts a later minute is dropped, and repeated flushes
// within a minute add up.
func TestHistoryFlushRollover(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		now, err := b.Client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		minute := now.Unix() / 60
		s := histSlot(minute)
		// yesterday's counts in this minute's slot, and a later minute
		// (a clock ahead) in the slot of the minute before
		if err := b.Client.HSet(ctx, q.k.hist,
			histField(s, "m"), minute-historySlots, histField(s, "ok"), 50, histField(s, "d"), 4, histField(s, "l3"), 54,
			histField(histSlot(minute-1), "m"), minute-1+historySlots, histField(histSlot(minute-1), "ok"), 8,
		).Err(); err != nil {
			t.Fatal(err)
		}
		var a histAgg
		at := time.Unix(minute*60, 0)
		a.record(at, HandleOK, 0, 3*time.Millisecond)
		a.record(at, HandleError, outcomeRetried, 20*time.Millisecond)
		a.record(at.Add(-time.Minute), HandleOK, 0, 0)
		if err := a.flush(ctx, q); err != nil {
			t.Fatal(err)
		}
		a.record(at.Add(30*time.Second), HandleSkipRetry, outcomeDead, 2*time.Second)
		if err := a.flush(ctx, q); err != nil {
			t.Fatal(err)
		}
		h, err := b.Client.HGetAll(ctx, q.k.hist).Result()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			histField(s, "m"): strconv.FormatInt(minute, 10), histField(s, "ok"): "1", histField(s, "r"): "1",
			histField(s, "d"): "1", histField(s, "ls"): "2023", histField(s, "l0"): "1", histField(s, "l1"): "1",
			histField(s, "l3"): "1",
			// untouched: it counts a later minute
			histField(histSlot(minute-1), "m"): strconv.FormatInt(minute-1+historySlots, 10), histField(histSlot(minute-1), "ok"): "8",
		}
		if len(h) != len(want) {
			t.Errorf("hash %v, want %v", h, want)
		}
		for f, v := range want {
			if h[f] != v {
				t.Errorf("%s = %q, want %q", f, h[f], v)
			}
		}
		if ttl, err := b.Client.PTTL(ctx, q.k.hist).Result(); err != nil || ttl <= 24*time.Hour || ttl > historyTTL {
			t.Errorf("PTTL = %v %v, want (24h, %v]", ttl, err, historyTTL)
		}
	})
}

// A Worker's history counts every handled task exactly: acked, retried
// and dead-lettered, with every lateness counted once.
func TestHistoryWorkerCounts(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		q := newQ(t, b, Options{Backoff: func(int) time.Duration { return time.Millisecond }})
		start, err := b.Client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		const n = 300
		jobs := jobsOf(n, func(i int) Job { return Job{Key: "k" + strconv.Itoa(i)} })
		if _, err := q.EnqueueBatch(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		// k..0: dead at once; k..1: fails once, then ok; the rest ok.
		var mu sync.Mutex
		seen := map[string]int{}
		w, err := newWorker(q, func(_ context.Context, tk *Task) error {
			mu.Lock()
			seen[tk.Key]++
			tries := seen[tk.Key]
			mu.Unlock()
			switch {
			case strings.HasSuffix(tk.Key, "0"):
				return Permanent(errors.New("bad input"))
			case strings.HasSuffix(tk.Key, "1") && tries == 1:
				return errors.New("try again")
			}
			return nil
		}, workerOpts{Concurrency: 8, Heartbeat: -1})
		if err != nil {
			t.Fatal(err)
		}
		stop := runFunc(t, w.Run)
		waitFor(t, 30*time.Second, "every task acked or dead", func() bool {
			st, err := q.Stats(ctx)
			return err == nil && st.Dead == n/10 && st.Pending == 0 && st.InFlight == 0
		})
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v", err)
		}
		hist, err := q.History(ctx, start)
		if err != nil {
			t.Fatal(err)
		}
		var sum Minute
		for _, m := range hist {
			if m.LateMean != m.lateMean() || m.LateP99 != m.lateUpper(99) {
				t.Errorf("minute %v: LateMean %v LateP99 %v, want %v %v", m.Start, m.LateMean, m.LateP99, m.lateMean(), m.lateUpper(99))
			}
			sum.add(m)
		}
		if sum.OK != n-n/10 || sum.Retried != n/10 || sum.Dead != n/10 {
			t.Fatalf("history ok %d retried %d dead %d, want %d %d %d", sum.OK, sum.Retried, sum.Dead, n-n/10, n/10, n/10)
		}
		var late int64
		for _, c := range sum.Late {
			late += c
		}
		if late != sum.handled() {
			t.Errorf("lateness buckets hold %d tasks, want %d", late, sum.handled())
		}
	})
}

// TestMemoryHistoryFull: a queue's history hash with every slot of the
// day written and every field present (a queue busy every minute, with
// failures and lateness in every bucket), by MEMORY USAGE ... SAMPLES 0.
// The budget is the figure measured on Redis 7.0 plus a quarter.
func TestMemoryHistoryFull(t *testing.T) {
	t.Parallel()
	b := testredis.Redis(t)
	ctx := testCtx(t)
	q := newQ(t, b, Options{})
	now := q.ServerNow().Unix() / 60
	var a histAgg
	a.set = map[int64]bool{}
	stamps := make([]any, 0, 2*historySlots)
	for minute := now - historySlots + 1; minute <= now; minute++ {
		// counts of a busy queue: 6-digit values, as at 10k tasks/s
		d := Minute{OK: 600_000, Retried: 1_200, Dead: 60, LateSum: 9_000_000 * time.Millisecond,
			Late: [len(Minute{}.Late)]int64{500_000, 90_000, 9_000, 900, 100}}
		a.add(minute, d)
		a.set[minute] = true // claimed below in one HSET rather than 1440 WATCHes
		stamps = append(stamps, histField(histSlot(minute), "m"), minute)
	}
	if err := b.Client.HSet(ctx, q.k.hist, stamps...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.flush(ctx, q); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Client.HLen(ctx, q.k.hist).Result(); err != nil || n != historySlots*int64(len(histMetrics)) {
		t.Fatalf("HLEN = %d, %v; want %d", n, err, historySlots*len(histMetrics))
	}
	began := time.Now()
	h, err := q.History(ctx, time.Time{})
	took := time.Since(began)
	if err != nil || len(h) != historySlots {
		t.Fatalf("History: %d minutes, %v", len(h), err)
	}
	// judged by each minute's start: a slow run that crosses into the next
	// minute reads a day that ends one minute later, that minute empty
	written := 0
	for _, m := range h {
		if u := m.Start.Unix() / 60; u > now-historySlots && u <= now {
			written++
			if m.OK != 600_000 || m.Late[4] != 100 {
				t.Fatalf("History: minute %d reads %+v, want what was written", u, m)
			}
		}
	}
	if written < historySlots-1 {
		t.Fatalf("History: %d of the %d written minutes", written, historySlots)
	}
	t.Logf("History of a full day: %v (one HGETALL of %d fields, decoded)", took, historySlots*len(histMetrics))
	bytes, err := b.Client.MemoryUsage(ctx, q.k.hist, 0).Result()
	if err != nil {
		t.Fatal(err)
	}
	const budget = 944_000 // 754,912 B measured on Redis 7.0.15, plus a quarter
	t.Logf("a full day of history: %d B per queue (%d fields, %.1f B a field)", bytes, historySlots*len(histMetrics), float64(bytes)/float64(historySlots*len(histMetrics)))
	if bytes > budget {
		t.Errorf("%d B, budget %d B", bytes, budget)
	}
}
