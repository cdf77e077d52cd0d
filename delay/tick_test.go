package delay

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// TestFaultCutReplyEnqueueTick cuts the reply of one EnqueueTick after
// Redis ran it; go-redis sends it again under the same request ID. The
// call reports what its first run did ("enqueued", not "stale", which a
// second run would answer since the guard moved), and one task exists.
func TestFaultCutReplyEnqueueTick(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t)
	ctx := testCtx(t)
	loadScripts(t, ctx, env.direct)
	q, err := New(env.c, "q", Options{Prefix: testredis.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	now, err := env.direct.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	state := q.k.ctl + ":tick-state" // any key on the queue's tag
	exp := strconv.FormatInt(now.Add(time.Minute).UnixMilli(), 10)
	if err := env.direct.HSet(ctx, state, "p:proc", exp+" def", "d:def", "1 spec").Err(); err != nil {
		t.Fatal(err)
	}
	tick := now.Add(-time.Second).Truncate(time.Millisecond)
	before := env.proxy.Cuts()
	env.proxy.CutNext(1, faultproxy.Contains("evalsha"))
	out, err := q.EnqueueTick(ctx, Tick{Key: "job", Time: tick, State: state, Process: "proc", Def: "def"})
	if err != nil || out.Outcome != "enqueued" || !out.Task.Due.Equal(tick) || !out.Last.Equal(tick) {
		t.Fatalf("EnqueueTick: %+v %v, want enqueued at the tick", out, err)
	}
	if got := env.proxy.Cuts() - before; got != 1 {
		t.Fatalf("%d replies cut, want 1: the call under test was not cut", got)
	}
	if ti := lookupOne(t, ctx, q, "job"); ti.ID != out.Task.ID || ti.Token != strconv.FormatInt(tick.UnixMilli(), 10) {
		t.Fatalf("Lookup %+v, EnqueueTick said %+v", ti, out.Task)
	}
	again, err := q.EnqueueTick(ctx, Tick{Key: "job", Time: tick, State: state, Process: "proc", Def: "def"})
	if err != nil || again.Outcome != "stale" {
		t.Fatalf("the same tick again: %+v %v, want stale", again, err)
	}
}

// A refused tick is a typed error and writes nothing.
func TestEnqueueTickBadInput(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		q := newQ(t, b, Options{})
		state := q.k.ctl + ":tick-state"
		ok := Tick{Key: "job", Time: time.Now(), State: state, Process: "p", Def: "d"}
		rows := []struct {
			name string
			edit func(*Tick)
			want error
		}{
			{"zero time", func(tk *Tick) { tk.Time = time.Time{} }, &ValidationError{Field: "tick"}},
			{"no state", func(tk *Tick) { tk.State = "" }, &ValidationError{Field: "tick"}},
			{"no process", func(tk *Tick) { tk.Process = "" }, &ValidationError{Field: "tick"}},
			{"no definition", func(tk *Tick) { tk.Def = "" }, &ValidationError{Field: "tick"}},
			{"empty key", func(tk *Tick) { tk.Key = "" }, &ValidationError{Field: "key"}},
			{"state on another slot", func(tk *Tick) { tk.State = "elsewhere" }, ErrCrossSlot},
		}
		for _, r := range rows {
			tk := ok
			r.edit(&tk)
			if _, err := q.EnqueueTick(ctx, tk); !errors.Is(err, r.want) {
				t.Errorf("%s: %v, want %v", r.name, err, r.want)
			}
		}
		if n, err := testredis.CountKeys(ctx, b.Client, b.Prefix); err != nil || n != 0 {
			t.Fatalf("%d keys written (%v), want none", n, err)
		}
	})
}
