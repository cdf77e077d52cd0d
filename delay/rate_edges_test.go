package delay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// TestRateEdgeValues: every Rate outside its documented range is refused
// with the invalid-options error naming the field (and writes nothing);
// the ends of the range are accepted, and a default burst never passes
// MaxBatch. On Sharded, a share under minRatePerSecond is refused too.
func TestRateEdgeValues(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		q := newQ(t, b, Options{})
		for _, c := range []struct {
			in    Rate
			field string // "" accepted; else the Rate field the error names
			want  Rate   // Stats.Rate when accepted
		}{
			{in: Rate{}, want: Rate{}},
			{in: Rate{PerSecond: 0, Burst: 5}, want: Rate{}}, // off: the burst is not used
			{in: Rate{PerSecond: math.Copysign(0, -1)}, want: Rate{}},
			{in: Rate{PerSecond: -1}, field: "Rate.PerSecond"},
			{in: Rate{PerSecond: math.NaN()}, field: "Rate.PerSecond"},
			{in: Rate{PerSecond: math.Inf(1)}, field: "Rate.PerSecond"},
			{in: Rate{PerSecond: math.Inf(-1)}, field: "Rate.PerSecond"},
			{in: Rate{PerSecond: 1e-17, Burst: 1}, field: "Rate.PerSecond"},
			{in: Rate{PerSecond: math.SmallestNonzeroFloat64}, field: "Rate.PerSecond"},
			{in: Rate{PerSecond: minRatePerSecond / 2}, field: "Rate.PerSecond"},
			{in: Rate{PerSecond: 1e308}, field: "Rate.PerSecond"},
			{in: Rate{PerSecond: math.MaxFloat64}, field: "Rate.PerSecond"},
			{in: Rate{PerSecond: maxRatePerSecond * 2}, field: "Rate.PerSecond"},
			{in: Rate{PerSecond: 5, Burst: -1}, field: "Rate.Burst"},
			{in: Rate{PerSecond: 5, Burst: math.MinInt}, field: "Rate.Burst"},
			{in: Rate{PerSecond: 5, Burst: MaxBatch + 1}, field: "Rate.Burst"},
			{in: Rate{PerSecond: 5, Burst: math.MaxInt}, field: "Rate.Burst"},
			{in: Rate{PerSecond: 0, Burst: -1}, field: "Rate.Burst"},
			{in: Rate{PerSecond: minRatePerSecond}, want: Rate{PerSecond: minRatePerSecond, Burst: 1}},
			{in: Rate{PerSecond: 0.5}, want: Rate{PerSecond: 0.5, Burst: 1}},
			{in: Rate{PerSecond: 1000}, want: Rate{PerSecond: 1000, Burst: 100}},
			{in: Rate{PerSecond: 10000}, want: Rate{PerSecond: 10000, Burst: MaxBatch}},
			{in: Rate{PerSecond: 20000}, want: Rate{PerSecond: 20000, Burst: MaxBatch}}, // not 2,000
			{in: Rate{PerSecond: maxRatePerSecond}, want: Rate{PerSecond: maxRatePerSecond, Burst: MaxBatch}},
			{in: Rate{PerSecond: 25, Burst: MaxBatch}, want: Rate{PerSecond: 25, Burst: MaxBatch}},
			{in: Rate{PerSecond: 25, Burst: 1}, want: Rate{PerSecond: 25, Burst: 1}},
		} {
			if err := q.SetRate(ctx, Rate{}); err != nil {
				t.Fatal(err)
			}
			err := q.SetRate(ctx, c.in)
			if c.field != "" {
				if !errors.Is(err, &ValidationError{Field: "options"}) || !strings.Contains(err.Error(), c.field) {
					t.Errorf("SetRate(%+v): %v; want invalid options naming %s", c.in, err, c.field)
				}
				if n := b.Client.Exists(ctx, q.k.ctl).Val(); n != 0 {
					t.Errorf("SetRate(%+v) was refused but wrote the ctl key", c.in)
				}
				continue
			}
			if err != nil {
				t.Errorf("SetRate(%+v): %v", c.in, err)
				continue
			}
			if got := mustStats(t, ctx, q).Rate; got != c.want {
				t.Errorf("SetRate(%+v): Stats.Rate %+v, want %+v", c.in, got, c.want)
			}
		}
		s, err := NewSharded(b.Client, "sh", ShardedOptions{Shards: 4, Queue: Options{Prefix: b.Prefix}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetRate(ctx, Rate{PerSecond: 2 * minRatePerSecond}); !errors.Is(err, &ValidationError{Field: "options"}) {
			t.Errorf("Sharded.SetRate under 4 × minRatePerSecond: %v, want invalid options", err)
		}
		if err := s.SetRate(ctx, Rate{PerSecond: 4 * minRatePerSecond}); err != nil {
			t.Errorf("Sharded.SetRate at 4 × minRatePerSecond: %v", err)
		}
		if err := s.SetRate(ctx, Rate{}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestShardedRateAtMinimumShare: Sharded.SetRate accepts a rate of
// exactly K × minRatePerSecond, the least its doc allows, for shard
// counts where that product over K rounds a unit in the last place under
// the minimum (23, 49, ...), and each shard gets at least the minimum.
func TestShardedRateAtMinimumShare(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		for _, k := range []int{1, 3, 23, 49} {
			s, err := NewSharded(b.Client, fmt.Sprint("min", k), ShardedOptions{Shards: k, Queue: Options{Prefix: b.Prefix}})
			if err != nil {
				t.Fatal(err)
			}
			r := Rate{PerSecond: float64(k) * minRatePerSecond}
			if err := s.SetRate(ctx, r); err != nil {
				t.Errorf("K=%d: SetRate(%+v): %v; want accepted", k, r, err)
				continue
			}
			st, err := s.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i, x := range st {
				if x.Rate.PerSecond < minRatePerSecond || x.Rate.PerSecond > 1.000001*minRatePerSecond {
					t.Errorf("K=%d: shard %d rate %v, want minRatePerSecond", k, i, x.Rate.PerSecond)
				}
			}
			if err := s.SetRate(ctx, Rate{PerSecond: math.Nextafter(r.PerSecond, 0)}); !errors.Is(err, &ValidationError{Field: "options"}) {
				t.Errorf("K=%d: SetRate just under K × minRatePerSecond: %v, want invalid options", k, err)
			}
		}
	})
}

// TestRateStrayCtlFields: whatever a stray write left in the ctl hash, a
// limited queue keeps handing out tasks, and SetRate still sets a limit.
// A rate with no burst once made SetRate fail (a Lua error on the missing
// burst), and tokens of -inf stopped the queue for good, through every
// refill and every later SetRate.
func TestRateStrayCtlFields(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		for i, c := range []struct {
			name    string
			fields  []any
			setRate bool
		}{
			{"no burst, then SetRate", []any{"rate", "10"}, true},
			{"tokens -inf", []any{"rate", "10", "burst", "5", "tok", "-inf"}, false},
			{"tokens -inf, then SetRate", []any{"rate", "10", "burst", "5", "tok", "-inf"}, true},
			{"tokens nan, then SetRate", []any{"rate", "10", "burst", "5", "tok", "nan"}, true},
		} {
			q := namedQ(t, b, "stray"+strconv.Itoa(i), Options{})
			mustEnqueueBatch(t, ctx, q, jobsOf(3, func(i int) Job { return Job{Key: fmt.Sprint("k", i)} }))
			if err := b.Client.HSet(ctx, q.k.ctl, c.fields...).Err(); err != nil {
				t.Fatal(err)
			}
			if c.setRate {
				if err := q.SetRate(ctx, Rate{PerSecond: 10, Burst: 5}); err != nil {
					t.Errorf("%s: SetRate: %v", c.name, err)
					continue
				}
			}
			deadline := time.Now().Add(time.Second) // 10 a second: a token within 100 ms
			for {
				bt := mustTake(t, ctx, q, 1)
				if len(bt.Tasks) == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("%s: no task taken in a second (next token in %v, ctl %v)", c.name,
						bt.NextToken.Sub(bt.ServerTime), b.Client.HGetAll(ctx, q.k.ctl).Val())
					break
				}
				time.Sleep(min(100*time.Millisecond, max(time.Millisecond, time.Until(bt.NextToken))))
			}
		}
	})
}

// takeCounter is a go-redis hook counting the take scripts sent for the
// queue whose due key is due.
type takeCounter struct {
	due string
	n   atomic.Int64
}

func (h *takeCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *takeCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && strings.HasPrefix(cmd.Name(), "eval") &&
			(a[1] == scriptTake.Hash() || a[1] == luaTake) && len(a) > 3 && a[3] == h.due {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *takeCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRateTinyNoSpin: a throttled queue costs one take per token, not a
// spin. At minRatePerSecond, with a rate of 1e-17 that an older writer
// left in the ctl hash (whose wait is past 2^63 ms), and with a rate of -1
// a stray write left there (its wait came out negative), a take with
// no token left replies a next token within a day, and a Worker that
// handed out the one token sends a handful of takes in the next second
// (its idle check and a wake-up), not hundreds.
func TestRateTinyNoSpin(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		for i, c := range []struct {
			name string
			set  func(t *testing.T, q *Queue)
		}{
			{"minRatePerSecond", func(t *testing.T, q *Queue) {
				if err := q.SetRate(ctx, Rate{PerSecond: minRatePerSecond, Burst: 1}); err != nil {
					t.Fatal(err)
				}
			}},
			{"1e-17 stored by an older writer", func(t *testing.T, q *Queue) {
				if err := b.Client.HSet(ctx, q.k.ctl, "rate", "1e-17", "burst", "1").Err(); err != nil {
					t.Fatal(err)
				}
			}},
			{"-1 stored by a stray write", func(t *testing.T, q *Queue) {
				if err := b.Client.HSet(ctx, q.k.ctl, "rate", "-1", "burst", "1").Err(); err != nil {
					t.Fatal(err)
				}
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				q := namedQ(t, b, "tiny"+strconv.Itoa(i), Options{})
				c.set(t, q)
				// the bucket's one token, then none: a wait within a day
				mustEnqueueBatch(t, ctx, q, jobsOf(3, func(i int) Job { return Job{Key: fmt.Sprint("k", i)} }))
				if bt := mustTake(t, ctx, q, 10); len(bt.Tasks) != 1 {
					t.Fatalf("first take: %d tasks, want the burst of 1", len(bt.Tasks))
				}
				bt := mustTake(t, ctx, q, 10)
				if wait := bt.NextToken.Sub(bt.ServerTime); len(bt.Tasks) != 0 || wait <= 0 || wait > maxTokenWait {
					t.Errorf("take without a token: %d tasks, next token in %v; want none, in (0, %v]",
						len(bt.Tasks), wait, maxTokenWait)
				}
				// a fresh bucket for the worker: SetRate again, or the
				// older writer's fields again
				if err := b.Client.HDel(ctx, q.k.ctl, "tok", "ts").Err(); err != nil {
					t.Fatal(err)
				}
				cnt := &takeCounter{due: q.k.due}
				b.Client.AddHook(cnt)
				got := make(chan struct{}, 3)
				w, err := newWorker(q, func(context.Context, *Task) error { got <- struct{}{}; return nil }, workerOpts{})
				if err != nil {
					t.Fatal(err)
				}
				runFunc(t, w.Run)
				select {
				case <-got:
				case <-time.After(5 * time.Second):
					t.Fatal("the worker never handed out the bucket's token")
				}
				before := cnt.n.Load()
				window := time.NewTimer(time.Second)
				defer window.Stop()
				select {
				case <-got:
					t.Fatal("a second task went out under a rate of one a day")
				case <-window.C:
				}
				if n := cnt.n.Load() - before; n > 5 {
					t.Fatalf("%d take scripts in the second after the token went: a spin", n)
				}
			})
		}
	})
}

// TestRateBurstCappedAfterIdle: after an idle spell, no more than Burst
// (at most MaxBatch) tasks go out at once: two takes back to back hand
// out at most MaxBatch plus the tokens the time between them earned, with
// the default burst of a fast rate (20,000 a second: a tenth is 2,000)
// and with a burst of 2,000 an older writer stored in the ctl hash.
func TestRateBurstCappedAfterIdle(t *testing.T) {
	t.Parallel()
	const perSecond = 20000
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		for i, c := range []struct {
			name string
			set  func(t *testing.T, q *Queue)
		}{
			{"default burst", func(t *testing.T, q *Queue) {
				if err := q.SetRate(ctx, Rate{PerSecond: perSecond}); err != nil {
					t.Fatal(err)
				}
				if got := mustStats(t, ctx, q).Rate; got.Burst > MaxBatch {
					t.Errorf("Stats.Rate %+v: burst above MaxBatch", got)
				}
			}},
			{"burst 2000 stored by an older writer", func(t *testing.T, q *Queue) {
				now, err := b.Client.Time(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Client.HSet(ctx, q.k.ctl, "rate", strconv.Itoa(perSecond), "burst", "2000",
					"tok", "2000", "ts", strconv.FormatInt(now.UnixMilli(), 10)).Err(); err != nil {
					t.Fatal(err)
				}
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				q := namedQ(t, b, "burst"+strconv.Itoa(i), Options{})
				fillDue(t, ctx, q, 2500)
				c.set(t, q)
				b1 := mustTake(t, ctx, q, MaxBatch)
				b2 := mustTake(t, ctx, q, MaxBatch)
				// ms stamps: the span may be up to a ms longer than they say
				span := b2.ServerTime.Sub(b1.ServerTime) + time.Millisecond
				limit := MaxBatch + int(math.Ceil(perSecond*span.Seconds()))
				if got := len(b1.Tasks) + len(b2.Tasks); got > limit {
					t.Fatalf("%d + %d tasks within %v of a full bucket; at most %d (MaxBatch + rate × span)",
						len(b1.Tasks), len(b2.Tasks), span, limit)
				}
			})
		}
	})
}

// TestRateScriptBoundsMatchGo: take.lua's and rate.lua's bounds are the
// Go constants they mirror.
func TestRateScriptBoundsMatchGo(t *testing.T) {
	t.Parallel()
	if got := time.Duration(float64(time.Second) / minRatePerSecond); got != maxTokenWait {
		t.Errorf("1/minRatePerSecond is %v, maxTokenWait %v", got, maxTokenWait)
	}
	for file, want := range map[string]map[string]int64{
		"lua/take.lua": {"MAX_BURST": MaxBatch, "MAX_TOKEN_WAIT_MS": maxTokenWait.Milliseconds()},
		"lua/rate.lua": {"MAX_BURST": MaxBatch},
	} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range want {
			m := regexp.MustCompile(`(?m)^local ([A-Z_, ]*\b` + name + `\b[A-Z_, ]*) = ([0-9, ]+)`).FindSubmatch(src)
			if m == nil {
				t.Errorf("%s: no local %s", file, name)
				continue
			}
			names, vals := strings.Split(string(m[1]), ","), strings.Split(string(m[2]), ",")
			for i, n := range names {
				if strings.TrimSpace(n) == name && i < len(vals) {
					if got, _ := strconv.ParseInt(strings.TrimSpace(vals[i]), 10, 64); got != v {
						t.Errorf("%s: %s = %d, want %d", file, name, got, v)
					}
				}
			}
		}
	}
}

// TestTokenTimeClamp: a take's next-token time outside [now,
// now+maxTokenWait] (the -2^63 an overflowed %d gave, a time past, a wait
// of years) is read as the longest wait, never as none.
func TestTokenTimeClamp(t *testing.T) {
	t.Parallel()
	const now = int64(1_800_000_000_000)
	longest := now + maxTokenWait.Milliseconds()
	for _, c := range []struct{ ms, want int64 }{
		{now, now},
		{now + 1, now + 1},
		{longest, longest},
		{longest + 1, longest},
		{now - 1, longest},
		{math.MinInt64, longest},
		{math.MaxInt64, longest},
		{0, longest},
	} {
		if got := tokenTime(now, c.ms); got != c.want {
			t.Errorf("tokenTime(now, %d) = %d, want %d", c.ms, got, c.want)
		}
	}
}
