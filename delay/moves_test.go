package delay

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/score"
)

// moveCase sets up a queue where one move must fail, and makes the move.
type moveCase struct {
	name string
	bits uint
	// epoch of the codec, relative to now (0: the Unix epoch)
	epoch time.Duration
	// setup fills the queue and returns the keys whose tasks the move touches
	setup func(t *testing.T, ctx context.Context, q *Queue) []string
	move  func(ctx context.Context, q *Queue) error
	want  error
	// ready (nil: always) reports, right before the move, whether the
	// setup still makes it fail: a running clock may have left the
	// window of full milliseconds the setup made
	ready func(ctx context.Context, q *Queue) error
}

// fill enqueues n tasks due at at, in one batch: with few sequence bits
// they fill n/2^bits consecutive milliseconds from at.
func fill(t *testing.T, ctx context.Context, q *Queue, at time.Time, n int) {
	t.Helper()
	jobs := jobsOf(n, func(i int) Job { return Job{Key: "fill:" + strconv.Itoa(i), When: At(at)} })
	out, err := q.EnqueueBatch(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range out {
		if e.Err != nil {
			t.Fatal(e.Err)
		}
	}
	// one more elsewhere, so the next search for at walks every full ms
	// (the counter no longer remembers the burst)
	mustEnqueue(t, ctx, q, Job{Key: "elsewhere", When: At(at.Add(-time.Hour))})
}

// moveCases are the cases. stopped is the server's stopped clock
// (miniredis), around which a window of full milliseconds just wider than
// a search is enough; a running clock (zero stopped) needs more.
func moveCases(stopped time.Time) []moveCase {
	window, before := 6000, time.Second
	clock := time.Now
	if !stopped.IsZero() {
		window, before = 200, 50*time.Millisecond
		clock = func() time.Time { return stopped }
	}
	at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	var full time.Time // the end of the requeue case's full window
	return []moveCase{
		{
			name: "reschedule seq exhausted", bits: 1,
			setup: func(t *testing.T, ctx context.Context, q *Queue) []string {
				mustEnqueue(t, ctx, q, Job{Key: "victim", Token: "a", When: At(at.Add(2 * time.Hour))})
				fill(t, ctx, q, at, 128) // 64 full ms from at
				return []string{"victim"}
			},
			move: func(ctx context.Context, q *Queue) error {
				_, err := q.Reschedule(ctx, Selector{Key: "victim", Token: "a"}, At(at))
				return err
			},
			want: ErrSeqExhausted,
		},
		{
			name: "reschedule of several tokens, the second fails", bits: 1,
			setup: func(t *testing.T, ctx context.Context, q *Queue) []string {
				for _, tok := range []string{"a", "b", "c"} {
					mustEnqueue(t, ctx, q, Job{Key: "victim", Token: tok, When: At(at.Add(2 * time.Hour))})
				}
				// the last ms has one free slot: room for the first task only
				fill(t, ctx, q, q.o.Codec.MaxTime(), 1)
				return []string{"victim"}
			},
			move: func(ctx context.Context, q *Queue) error {
				_, err := q.Reschedule(ctx, Selector{Key: "victim"}, At(q.o.Codec.MaxTime()))
				return err
			},
			want: score.ErrOutOfRange,
		},
		{
			name: "reschedule to the codec's last ms, full", bits: 1,
			setup: func(t *testing.T, ctx context.Context, q *Queue) []string {
				mustEnqueue(t, ctx, q, Job{Key: "victim", Token: "a", When: At(at)})
				mustEnqueue(t, ctx, q, Job{Key: "victim", Token: "b", When: At(at)})
				fill(t, ctx, q, q.o.Codec.MaxTime(), 2)
				return []string{"victim"}
			},
			move: func(ctx context.Context, q *Queue) error {
				_, err := q.Reschedule(ctx, Selector{Key: "victim"}, At(q.o.Codec.MaxTime()))
				return err
			},
			want: score.ErrOutOfRange,
		},
		{
			// 20 bits leave the codec about 99 days after its epoch
			name: "retry past the codec's range", bits: 20, epoch: -time.Second,
			setup: func(t *testing.T, ctx context.Context, q *Queue) []string {
				mustEnqueue(t, ctx, q, Job{Key: "victim", Token: "a"})
				if b := mustTake(t, ctx, q, 1); len(b.Tasks) != 1 {
					t.Fatalf("took %d", len(b.Tasks))
				}
				return []string{"victim"}
			},
			move: func(ctx context.Context, q *Queue) error {
				info, err := lookup(ctx, q, "victim")
				if err != nil || len(info) != 1 {
					return errors.Join(err, errors.New("victim not found"))
				}
				fence, err := q.c.HGet(ctx, q.k.lease, info[0].ID).Int64()
				if err != nil {
					return err
				}
				_, err = q.retryAfter(ctx, &Task{Attempt: 1, lease: leaseRef{ID: info[0].ID, Fence: fence}}, 200*24*time.Hour, errors.New("boom"))
				return err
			},
			want: score.ErrOutOfRange,
		},
		{
			name: "requeue seq exhausted", bits: 0,
			setup: func(t *testing.T, ctx context.Context, q *Queue) []string {
				for _, tok := range []string{"a", "b"} {
					mustEnqueue(t, ctx, q, Job{Key: "victim", Token: tok})
				}
				for _, tk := range mustTake(t, ctx, q, 2).Tasks {
					if _, err := q.killTask(ctx, tk, errors.New("boom")); err != nil {
						t.Fatal(err)
					}
				}
				// one task a ms: every ms of the window around now is full
				start := clock().Add(-before)
				fill(t, ctx, q, start, window)
				full = start.Add(time.Duration(window) * time.Millisecond)
				return []string{"victim"}
			},
			ready: func(ctx context.Context, q *Queue) error {
				if !stopped.IsZero() {
					return nil
				}
				now, err := q.c.Time(ctx).Result()
				if err != nil {
					return err
				}
				// the search walks 64 ms; a second for the move's round trips
				if now.Add(64*time.Millisecond + time.Second).After(full) {
					return fmt.Errorf("redis TIME %v is within 1 s of the end of the full window, %v", now, full)
				}
				return nil
			},
			move: func(ctx context.Context, q *Queue) error {
				page, err := listDead(ctx, q, 0, 10)
				if err != nil {
					return err
				}
				var ids []string
				for _, d := range page.Tasks {
					ids = append(ids, d.ID)
				}
				_, err = q.Requeue(ctx, Selector{IDs: ids})
				return err
			},
			want: ErrSeqExhausted,
		},
	}
}

// movesAllOrNothing runs each case: the move fails with its typed error
// and every key of the queue, and every task's Lookup, is as it was.
func movesAllOrNothing(t *testing.T, b *testredis.Backend) {
	var stopped time.Time
	if b.Mini != nil {
		stopped = time.Now()
		b.Mini.SetTime(stopped)
	}
	for i, c := range moveCases(stopped) {
		t.Run(c.name, func(t *testing.T) {
			ctx := testCtx(t)
			codec := score.DefaultTimeCodec()
			if c.bits != score.DefaultSeqBits || c.epoch != 0 {
				var epoch time.Time
				if c.epoch != 0 {
					// relative to the server's clock: miniredis's stopped
					// at the start, however long the cases before took
					epoch = time.Now().Add(c.epoch)
					if !stopped.IsZero() {
						epoch = stopped.Add(c.epoch)
					}
				} else {
					epoch = time.UnixMilli(0)
				}
				var err error
				if codec, err = score.NewTimeCodec(epoch, c.bits); err != nil {
					t.Fatal(err)
				}
			}
			// a setup that a busy machine made too slowly for its case is
			// made again on a fresh queue, at most four times
			var q *Queue
			var keys []string
			var snap string
			looks := map[string][]TaskInfo{}
			for attempt := 0; ; attempt++ {
				name := "move" + strconv.Itoa(i)
				if attempt > 0 {
					name += "-" + strconv.Itoa(attempt)
				}
				var err error
				if q, err = New(b.Client, name, Options{Prefix: b.Prefix, Codec: codec}); err != nil {
					t.Fatal(err)
				}
				keys = c.setup(t, ctx, q)
				snap = snapshot(t, ctx, b)
				for _, k := range keys {
					looks[k], err = lookup(ctx, q, k)
					if err != nil {
						t.Fatal(err)
					}
				}
				if c.ready == nil {
					break
				}
				err = c.ready(ctx, q)
				if err == nil {
					break
				}
				if attempt == 4 {
					// nothing can be proven: the case's precondition never held
					t.Skipf("the machine is too slow for this case: 5 setups each outlasted their window (%v)", err)
				}
				t.Logf("setup outrun (%v): made again", err)
				// the outrun attempt's keys go, so the next snapshot is of
				// what the next attempt made
				stale, err := testredis.Keys(ctx, b.Client, b.Prefix+":"+keyname.QueueTag(name))
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range stale {
					if err := b.Client.Del(ctx, k).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			err := c.move(ctx, q)
			falseErrors, lost := 0, 0
			if !errors.Is(err, c.want) {
				falseErrors++
				t.Errorf("move: %v, want %v", err, c.want)
			}
			for _, k := range keys {
				now, lerr := lookup(ctx, q, k)
				if lerr != nil {
					t.Fatal(lerr)
				}
				for j, ti := range looks[k] {
					if j >= len(now) || !reflect.DeepEqual(now[j], ti) {
						lost++
						t.Errorf("task %s of %s moved or changed: %+v", ti.ID, k, now)
					}
				}
			}
			if got := snapshot(t, ctx, b); got != snap {
				t.Errorf("a failed move wrote: %s", lineDiff(snap, got))
			}
			t.Logf("%s: tasks lost %d, handled twice 0, false errors %d", c.name, lost, falseErrors)
		})
	}
}

// A move that fails, for each reason, leaves every task where and as it
// was, on real Redis.
func TestFaultMoveFails(t *testing.T) {
	t.Parallel()
	testredis.EachReal(t, movesAllOrNothing)
}

// The same on miniredis.
func TestMoveFailsMini(t *testing.T) {
	t.Parallel()
	movesAllOrNothing(t, testredis.Mini(t))
}

// A reschedule of several tokens that fits moves them all, in token order.
func TestRescheduleSeveralTokens(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, _ *testredis.Backend, q *Queue) {
		for _, tok := range []string{"a", "b", "c"} {
			mustEnqueue(t, ctx, q, Job{Key: "k", Token: tok, When: After(time.Hour)})
		}
		at := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
		res, err := q.Reschedule(ctx, Selector{Key: "k"}, At(at))
		if err != nil || res.Moved != 3 {
			t.Fatalf("reschedule: %+v %v", res, err)
		}
		info, err := lookup(ctx, q, "k")
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range info {
			if !ti.When.Equal(at) || ti.State != StatePending {
				t.Errorf("task %s: %s at %v, want pending at %v", ti.Token, ti.State, ti.When, at)
			}
		}
	})
}

// lineDiff lists the lines only in a and only in b, each cut to 200 bytes.
func lineDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	out := ""
	for _, l := range strings.Split(a, "\n") {
		if !mb[l] {
			out += "\n- " + l[:min(len(l), 200)]
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ma[l] {
			out += "\n+ " + l[:min(len(l), 200)]
		}
	}
	return out
}
