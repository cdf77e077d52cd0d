package delay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/score"
)

// TestPauseResume: a paused queue hands out nothing to any take, says so
// (takeBatch.Paused, Stats.Paused with its start), and everything else goes
// on: enqueue, cancel, reschedule, the ack of a task taken before the
// pause, and the sweep, whose expired leases wait in due. A second Pause
// keeps the first start; Resume pushes the wake list and takes resume.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{Lease: 50 * time.Millisecond}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		held := takeOne(t, ctx, q, Job{Key: "held"}) // in flight across the pause
		if _, err := q.extend(ctx, held, time.Minute); err != nil {
			t.Fatal(err)
		}
		expiring := takeOne(t, ctx, q, Job{Key: "expiring"})
		for i := range 3 {
			mustEnqueue(t, ctx, q, Job{Key: fmt.Sprint("k", i)})
		}
		if err := q.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		st := mustStats(t, ctx, q)
		if !st.Paused || st.PausedSince.IsZero() || st.PausedSince.After(st.ServerTime) {
			t.Fatalf("stats after Pause: paused %v since %v (server time %v)", st.Paused, st.PausedSince, st.ServerTime)
		}
		since := st.PausedSince
		passServerTime(t, ctx, b, since.Add(2*time.Millisecond))
		if err := q.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		if st := mustStats(t, ctx, q); !st.PausedSince.Equal(since) {
			t.Fatalf("a second Pause moved the start from %v to %v", since, st.PausedSince)
		}
		bt := mustTake(t, ctx, q, 10)
		if len(bt.Tasks) != 0 || !bt.Paused || !bt.PausedSince.Equal(since) {
			t.Fatalf("take of a paused queue: %d tasks, paused %v since %v; want none, paused since %v",
				len(bt.Tasks), bt.Paused, bt.PausedSince, since)
		}
		if bt.NextDue.IsZero() || bt.NextExpiry.IsZero() {
			t.Fatalf("a paused take still tells the head and the next expiry: %+v", bt)
		}
		// everything but taking goes on
		e := mustEnqueue(t, ctx, q, Job{Key: "late", Token: "t"})
		if dup := mustEnqueue(t, ctx, q, Job{Key: "late", Token: "t"}); !dup.Duplicate || dup.ID != e.ID {
			t.Fatalf("duplicate enqueue while paused: %+v", dup)
		}
		if r, err := q.Cancel(ctx, Selector{Key: "k0"}); err != nil || r.Pending != 1 {
			t.Fatalf("Cancel while paused: %+v %v", r, err)
		}
		if r, err := q.Reschedule(ctx, Selector{Key: "k1"}, After(time.Hour)); err != nil || r.Moved != 1 {
			t.Fatalf("Reschedule while paused: %+v %v", r, err)
		}
		if err := q.ackTask(ctx, held); err != nil {
			t.Fatalf("ack of a task taken before the pause: %v", err)
		}
		// on miniredis the clock is set, never moved back past a due time
		// already used: late must stay due (under -race the pause can come
		// later than the lease's end)
		at := expiring.Deadline
		if e.Due.After(at) {
			at = e.Due
		}
		passServerTime(t, ctx, b, at)
		if r, err := q.Sweep(ctx, 10); err != nil || r.Returned != 1 {
			t.Fatalf("sweep while paused: %+v %v, want the expired lease back in due", r, err)
		}
		if ti := lookupOne(t, ctx, q, "expiring"); ti.State != StatePending {
			t.Fatalf("expired lease of a paused queue: %s, want pending (waiting)", ti.State)
		}
		if bt := mustTake(t, ctx, q, 10); len(bt.Tasks) != 0 || !bt.Paused {
			t.Fatalf("take after the sweep: %d tasks, paused %v", len(bt.Tasks), bt.Paused)
		}

		if err := b.Client.Del(ctx, q.k.wake).Err(); err != nil {
			t.Fatal(err)
		}
		if err := q.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		if n := b.Client.LLen(ctx, q.k.wake).Val(); n != 1 {
			t.Fatalf("wake list after Resume: %d elements, want 1", n)
		}
		if st := mustStats(t, ctx, q); st.Paused || !st.PausedSince.IsZero() {
			t.Fatalf("stats after Resume: paused %v since %v", st.Paused, st.PausedSince)
		}
		if err := q.Resume(ctx); err != nil { // resuming a running queue: nothing
			t.Fatal(err)
		}
		bt = mustTake(t, ctx, q, 10)
		got := map[string]bool{}
		for _, tk := range bt.Tasks {
			got[tk.Key] = true
		}
		if bt.Paused || len(bt.Tasks) != 3 || !got["k2"] || !got["late"] || !got["expiring"] {
			t.Fatalf("take after Resume: paused %v, %d tasks %v; want k2, late, expiring", bt.Paused, len(bt.Tasks), got)
		}
		mustAckMany(t, ctx, q, bt.Tasks)
	})
}

// TestPauseReportsChange: the script says whether the call changed the
// state, which is what a kept reply must carry over a re-send.
func TestPauseReportsChange(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, _ *testredis.Backend, q *Queue) {
		for _, step := range []struct {
			mode    string
			changed int64
		}{{"1", 1}, {"1", 0}, {"0", 1}, {"0", 0}, {"1", 1}} {
			r, err := q.mutate(ctx, scriptPause, "pause", q.req.next(), []string{q.k.ctl, q.k.wake}, step.mode)
			if err != nil {
				t.Fatal(err)
			}
			if r.int(3) != step.changed || (step.mode == "1") != (r.str(2) != "") {
				t.Fatalf("mode %s: reply %v, want changed %d", step.mode, r, step.changed)
			}
		}
	})
}

// TestRateTokenBucket drives Redis TIME (miniredis) through a rate limit
// of 10 a second with a burst of 5: a full bucket gives 5, an empty one
// nothing and the time of its next token, tokens accrue by the time
// passed (fractions carried), never past the burst, and a new limit
// keeps the tokens earned.
func TestRateTokenBucket(t *testing.T) {
	t.Parallel()
	b := testredis.Mini(t)
	ctx := testCtx(t)
	q := newQ(t, b, Options{})
	t0 := time.UnixMilli(time.Now().UnixMilli())
	b.Mini.SetTime(t0)
	jobs := jobsOf(200, func(i int) Job { return Job{Key: fmt.Sprint("k", i)} })
	if _, err := q.EnqueueBatch(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if err := q.SetRate(ctx, Rate{PerSecond: 10, Burst: 5}); err != nil {
		t.Fatal(err)
	}
	if st := mustStats(t, ctx, q); st.Rate != (Rate{PerSecond: 10, Burst: 5}) {
		t.Fatalf("Stats.Rate %+v", st.Rate)
	}
	steps := []struct {
		at        time.Duration // Redis TIME after t0
		want      int
		nextToken time.Duration // after t0; -1: none
	}{
		{0, 5, 100 * time.Millisecond},                     // full bucket: the burst, then none left
		{0, 0, 100 * time.Millisecond},                     // empty: when the next comes
		{99 * time.Millisecond, 0, 100 * time.Millisecond}, // 0.99 of a token
		{250 * time.Millisecond, 2, 300 * time.Millisecond},
		{299 * time.Millisecond, 0, 300 * time.Millisecond}, // 0.99 again: the half carried
		{10 * time.Second, 5, 10*time.Second + 100*time.Millisecond},
	}
	for i, s := range steps {
		b.Mini.SetTime(t0.Add(s.at))
		bt := mustTake(t, ctx, q, 100)
		var next time.Duration = -1
		if !bt.NextToken.IsZero() {
			next = bt.NextToken.Sub(t0)
		}
		if len(bt.Tasks) != s.want || next != s.nextToken {
			t.Fatalf("step %d at +%v: %d tasks, next token +%v; want %d, +%v", i, s.at, len(bt.Tasks), next, s.want, s.nextToken)
		}
		for _, tk := range bt.Tasks {
			if tk.Lateness() < 0 {
				t.Fatalf("task %s delivered %v early", tk.ID, -tk.Lateness())
			}
		}
	}
	// a new limit keeps the tokens earned (2.5 by +10.25 s), capped at its burst
	b.Mini.SetTime(t0.Add(10*time.Second + 250*time.Millisecond))
	if err := q.SetRate(ctx, Rate{PerSecond: 100, Burst: 2}); err != nil {
		t.Fatal(err)
	}
	if bt := mustTake(t, ctx, q, 100); len(bt.Tasks) != 2 || !bt.NextToken.Equal(t0.Add(10*time.Second+260*time.Millisecond)) {
		t.Fatalf("after a new limit: %d tasks, next token %v", len(bt.Tasks), bt.NextToken)
	}
	// off: the whole backlog, no token time
	if err := q.SetRate(ctx, Rate{}); err != nil {
		t.Fatal(err)
	}
	if st := mustStats(t, ctx, q); st.Rate != (Rate{}) {
		t.Fatalf("Stats.Rate after clearing: %+v", st.Rate)
	}
	if n := b.Client.Exists(ctx, q.k.ctl).Val(); n != 0 {
		t.Fatal("the ctl key outlives its last field")
	}
	if bt := mustTake(t, ctx, q, 1000); len(bt.Tasks) != 200-14 || !bt.NextToken.IsZero() {
		t.Fatalf("without a limit: %d tasks, next token %v; want the %d left", len(bt.Tasks), bt.NextToken, 200-14)
	}
}

// TestRateBadInput: a rate outside its range is refused with
// an invalid-options error and writes nothing; a zero burst takes its default.
func TestRateBadInput(t *testing.T) {
	t.Parallel()
	b := testredis.Mini(t)
	ctx := testCtx(t)
	q := newQ(t, b, Options{})
	for _, r := range []Rate{
		{PerSecond: -1}, {PerSecond: math.NaN()}, {PerSecond: math.Inf(1)}, {PerSecond: maxRatePerSecond * 2},
		{PerSecond: 5, Burst: -1}, {PerSecond: 5, Burst: MaxBatch + 1},
	} {
		if err := q.SetRate(ctx, r); !errors.Is(err, &ValidationError{Field: "options"}) {
			t.Errorf("SetRate(%+v): %v, want invalid options", r, err)
		}
	}
	if n := b.Client.Exists(ctx, q.k.ctl).Val(); n != 0 {
		t.Fatal("a refused SetRate wrote the ctl key")
	}
	for _, c := range []struct {
		in   Rate
		want Rate
	}{
		{Rate{PerSecond: 1000}, Rate{PerSecond: 1000, Burst: 100}},
		{Rate{PerSecond: 0.5}, Rate{PerSecond: 0.5, Burst: 1}},
		{Rate{PerSecond: 25, Burst: 7}, Rate{PerSecond: 25, Burst: 7}},
	} {
		if err := q.SetRate(ctx, c.in); err != nil {
			t.Fatal(err)
		}
		if got := mustStats(t, ctx, q).Rate; got != c.want {
			t.Errorf("SetRate(%+v): Stats.Rate %+v, want %+v", c.in, got, c.want)
		}
	}
	if _, err := New(b.Client, "q", Options{HighWaterWarn: 1.5}); !errors.Is(err, &ValidationError{Field: "options"}) {
		t.Errorf("HighWaterWarn 1.5: %v, want invalid options", err)
	}
}

type highWaterObserver struct {
	Recorder
	warnings []error
}

func (o *highWaterObserver) OnWarning(_ string, err error) { o.warnings = append(o.warnings, err) }

// TestHighWater: with 4 sequence bits (16 seqs a millisecond) and a
// threshold of a half, the mark follows the seqs enqueues were given (one
// by one and batched), counts a spill as the whole space, warns once a
// window, and Stats shows the current and the previous minute's.
func TestHighWater(t *testing.T) {
	t.Parallel()
	b := testredis.Mini(t) // Redis TIME moved across windows
	ctx := testCtx(t)
	codec, err := score.NewTimeCodec(time.Unix(1_700_000_000, 0), 4)
	if err != nil {
		t.Fatal(err)
	}
	obs := &highWaterObserver{}
	q := newQ(t, b, Options{Codec: codec, HighWaterWarn: 0.5, Observer: obsOf(obs)})
	win := time.UnixMilli((time.Now().UnixMilli()/highWaterWindowMs + 1) * highWaterWindowMs)
	b.Mini.SetTime(win.Add(time.Second))
	at := At(win.Add(time.Hour))
	for i := range 7 {
		mustEnqueue(t, ctx, q, Job{Key: fmt.Sprint("a", i), When: at})
	}
	if st := mustStats(t, ctx, q); st.HighWater != 7 || st.HighWaterSpace != 16 || obs.HighWater.Load() != 7 || len(obs.warnings) != 0 {
		t.Fatalf("7 tasks in one ms: mark %d of %d, observer %d, %d warnings; want 7 of 16, 7, none",
			st.HighWater, st.HighWaterSpace, obs.HighWater.Load(), len(obs.warnings))
	}
	jobs := jobsOf(3, func(i int) Job { return Job{Key: fmt.Sprint("b", i), When: at} })
	if _, err := q.EnqueueBatch(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if st := mustStats(t, ctx, q); st.HighWater != 10 || obs.HighWater.Load() != 10 || len(obs.warnings) != 1 || !errors.Is(obs.warnings[0], ErrHighWater) {
		t.Fatalf("10 tasks in one ms: mark %d, observer %d, warnings %v; want 10, 10, one ErrHighWater",
			st.HighWater, obs.HighWater.Load(), obs.warnings)
	}
	for i := range 8 { // 6 fill the ms, 2 spill
		mustEnqueue(t, ctx, q, Job{Key: fmt.Sprint("c", i), When: at})
	}
	if st := mustStats(t, ctx, q); st.HighWater != 16 || st.SeqOverflows != 2 || len(obs.warnings) != 1 {
		t.Fatalf("a spill: mark %d, overflows %d, %d warnings; want 16 (the whole space), 2, still one", st.HighWater, st.SeqOverflows, len(obs.warnings))
	}
	// the next window shows the last one's mark; a new enqueue starts its own
	b.Mini.SetTime(win.Add(highWaterWindowMs*time.Millisecond + time.Second))
	if st := mustStats(t, ctx, q); st.HighWater != 16 {
		t.Fatalf("next window: mark %d, want the previous window's 16", st.HighWater)
	}
	for i := range 9 {
		mustEnqueue(t, ctx, q, Job{Key: fmt.Sprint("d", i), When: At(win.Add(2 * time.Hour))})
	}
	if st := mustStats(t, ctx, q); st.HighWater != 16 || len(obs.warnings) != 2 {
		t.Fatalf("next window, 9 in one ms: mark %d, %d warnings; want 16 (the previous window's), 2 (one a window)", st.HighWater, len(obs.warnings))
	}
	b.Mini.SetTime(win.Add(2*highWaterWindowMs*time.Millisecond + time.Second))
	if st := mustStats(t, ctx, q); st.HighWater != 9 {
		t.Fatalf("two windows on: mark %d, want 9", st.HighWater)
	}
	b.Mini.SetTime(win.Add(3*highWaterWindowMs*time.Millisecond + time.Second))
	if st := mustStats(t, ctx, q); st.HighWater != 0 {
		t.Fatalf("three windows on, no enqueue: mark %d, want 0", st.HighWater)
	}
}

// TestShardedPauseAndRate: Sharded pauses and resumes every shard, and
// splits a rate limit evenly over them (burst rounded up).
func TestShardedPauseAndRate(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		s, err := NewSharded(b.Client, "sh", ShardedOptions{Shards: 4, Queue: Options{Prefix: b.Prefix}})
		if err != nil {
			t.Fatal(err)
		}
		states := func() []Stats {
			t.Helper()
			st, err := s.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		if err := s.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		for i, st := range states() {
			if !st.Paused {
				t.Fatalf("shard %d not paused", i)
			}
		}
		if err := s.SetRate(ctx, Rate{PerSecond: 100, Burst: 10}); err != nil {
			t.Fatal(err)
		}
		if err := s.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		for i, st := range states() {
			if st.Paused || st.Rate != (Rate{PerSecond: 25, Burst: 3}) {
				t.Fatalf("shard %d: paused %v, rate %+v; want running at 25 a second, burst 3", i, st.Paused, st.Rate)
			}
		}
		if err := s.SetRate(ctx, Rate{}); err != nil {
			t.Fatal(err)
		}
		for i, st := range states() {
			if st.Rate != (Rate{}) {
				t.Fatalf("shard %d: rate %+v after clearing", i, st.Rate)
			}
		}
	})
}
