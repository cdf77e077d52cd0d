package delay

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// twoServers is a pool's two lines on two servers: b (the shared real
// Redis) and a private server s the test may freeze or kill. Line 0 is
// "reg-b" on b, line 1 "reg-a" on s, under b's prefix or, when the test
// asks, a prefix of its own.
type twoServers struct {
	b       *testredis.Backend
	s       *testredis.Server
	qa, qb  *Queue
	obsA    *faultObserver
	obsB    *faultObserver
	prefixA string
}

func newTwoServers(t *testing.T, samePrefix bool) *twoServers {
	t.Helper()
	ts := &twoServers{b: testredis.Redis(t), s: testredis.StartServer(t),
		obsA: &faultObserver{errs: map[string][]error{}}, obsB: &faultObserver{errs: map[string][]error{}}}
	ts.prefixA = ts.b.Prefix
	if !samePrefix {
		ts.prefixA += "-a"
	}
	var err error
	if ts.qb, err = New(ts.b.Client, "reg-b", Options{Prefix: ts.b.Prefix, Observer: obsOf(ts.obsB)}); err != nil {
		t.Fatal(err)
	}
	// no client retries: a call to the killed server fails at once
	if ts.qa, err = New(ts.s.Client(&redis.Options{MaxRetries: -1}), "reg-a", Options{Prefix: ts.prefixA, Observer: obsOf(ts.obsA)}); err != nil {
		t.Fatal(err)
	}
	return ts
}

// pool is a pool of both lines (b's first) beating every beat.
func (ts *twoServers) pool(t *testing.T, id string, beat time.Duration) *Pool {
	t.Helper()
	p, err := NewPool(PoolOptions{Concurrency: 2, Heartbeat: beat, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, *Task) error { return nil }
	for _, q := range []*Queue{ts.qb, ts.qa} {
		if err := p.Add(q, h, QueueOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// listedOn reports whether q's server lists a pool serving q.
func listedOn(ctx context.Context, q *Queue) bool {
	ws, err := q.Workers(ctx)
	return err == nil && len(ws) == 1
}

// A pool whose lines live on two servers under one prefix is listed on
// both, so each queue's Workers and Health see it.
func TestRegistryEveryServer(t *testing.T) {
	t.Parallel()
	ts := newTwoServers(t, true)
	ctx := testCtx(t)
	stop := runFunc(t, ts.pool(t, "two-servers", time.Second).Run)
	waitFor(t, 5*time.Second, "the pool listed on both servers", func() bool {
		return listedOn(ctx, ts.qa) && listedOn(ctx, ts.qb)
	})
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	for _, q := range []*Queue{ts.qa, ts.qb} {
		if ws, err := q.Workers(ctx); err != nil || len(ws) != 0 {
			t.Fatalf("%s after Run returned: %v %+v", q.Name(), err, ws)
		}
	}
}

// TestFaultHeartbeatFrozenServer: one of a pool's two servers hangs
// (SIGSTOP). The other server's entry keeps being refreshed at every
// interval meanwhile, so it never expires; once the server is thawed its
// entry is refreshed again. Under one prefix and under two.
func TestFaultHeartbeatFrozenServer(t *testing.T) {
	t.Parallel()
	for _, same := range []bool{true, false} {
		t.Run("same-prefix="+strconv.FormatBool(same), func(t *testing.T) { frozenServer(t, same) })
	}
}

func frozenServer(t *testing.T, samePrefix bool) {
	ts := newTwoServers(t, samePrefix)
	ctx := testCtx(t)
	const beat = 200 * time.Millisecond
	stop := runFunc(t, ts.pool(t, "frozen", beat).Run)
	waitFor(t, 5*time.Second, "the pool listed on both servers", func() bool {
		return listedOn(ctx, ts.qa) && listedOn(ctx, ts.qb)
	})
	live, _ := registryKeys(ts.b.Prefix)
	score := func() float64 {
		v, err := ts.b.Client.ZScore(ctx, live, "frozen").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Errorf("ZSCORE: %v", err)
		}
		return v
	}
	ts.s.Freeze()
	// Three refreshes of b's entry while s is frozen: with the beats in
	// turn, the first call to s held every later one (and b's entry, 3
	// intervals, expired under it).
	var beats []float64
	last := score()
	waitFor(t, 10*time.Second, "3 heartbeats on the healthy server while the other is frozen", func() bool {
		if v := score(); v > last {
			beats, last = append(beats, v), v
		}
		return len(beats) >= 3
	})
	if !listedOn(ctx, ts.qb) {
		t.Fatal("the healthy server does not list the pool while the other is frozen")
	}
	ts.s.Thaw()
	rc := ts.s.Client(nil)
	liveA, _ := registryKeys(ts.prefixA)
	frozen, _ := rc.ZScore(ctx, liveA, "frozen").Result()
	waitFor(t, 5*time.Second, "a heartbeat on the thawed server", func() bool {
		v, err := rc.ZScore(ctx, liveA, "frozen").Result()
		return err == nil && v > frozen
	})
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
}

// TestFaultHeartbeatErrorsChargedToTheirLine: a heartbeat that fails on
// one server (killed) is reported to the Observer of, and counted for, the
// lines with a queue there, never the others. Two prefixes, so that the
// pool wrote both servers before the fix too.
func TestFaultHeartbeatErrorsChargedToTheirLine(t *testing.T) {
	t.Parallel()
	ts := newTwoServers(t, false)
	ctx := testCtx(t)
	p := ts.pool(t, "charged", 200*time.Millisecond)
	stop := runFunc(t, p.Run)
	waitFor(t, 5*time.Second, "the pool listed on both servers", func() bool {
		return listedOn(ctx, ts.qa) && listedOn(ctx, ts.qb)
	})
	ts.s.Kill()
	waitFor(t, 10*time.Second, "a heartbeat error", func() bool {
		return ts.obsA.count("heartbeat")+ts.obsB.count("heartbeat") > 0
	})
	if a, b := ts.obsA.count("heartbeat"), ts.obsB.count("heartbeat"); a == 0 || b != 0 {
		t.Errorf("heartbeat errors sent to the killed server's line: %d, to the healthy server's: %d", a, b)
	}
	if st := p.Stats(); st[0].Errors != 0 || st[1].Errors == 0 {
		t.Errorf("errors counted: %s %d, %s %d", st[0].Name, st[0].Errors, st[1].Name, st[1].Errors)
	}
	if !listedOn(ctx, ts.qb) {
		t.Error("the healthy server does not list the pool")
	}
	_ = stop()
}

// Two live pools with one ID: the second is refused with ErrDuplicateID
// (its Run ends with it) and the first's entry stays, through the
// second's end, until the first's Run returns.
func TestRegistryDuplicateID(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		q1, q2 := namedQ(t, b, "dup-1", Options{}), namedQ(t, b, "dup-2", Options{})
		pool := func(q *Queue) *Pool {
			// A beat may take its whole interval: 500 ms, not 100, so a
			// busy machine under -race does not time every beat out (the
			// refusal comes at the second pool's beats, whatever their
			// interval).
			p, err := NewPool(PoolOptions{Concurrency: 1, Heartbeat: 500 * time.Millisecond, ID: "dup"})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Add(q, func(context.Context, *Task) error { return nil }, QueueOptions{}); err != nil {
				t.Fatal(err)
			}
			return p
		}
		first := runFunc(t, pool(q1).Run)
		waitFor(t, 5*time.Second, "the first pool listed", func() bool { return listedOn(ctx, q1) })
		p2 := pool(q2)
		done := make(chan error, 1)
		go func() { done <- p2.Run(ctx) }()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the second pool with the same ID still runs after 10 s")
		}
		if !errors.Is(err, ErrDuplicateID) {
			t.Fatalf("the second pool's Run: %v, want ErrDuplicateID", err)
		}
		ws, err := ListWorkers(ctx, b.Client, b.Prefix)
		if err != nil || len(ws) != 1 || !ws[0].Serves("dup-1") || ws[0].Serves("dup-2") {
			t.Fatalf("after the second pool ended: %v %+v, want the first pool's entry", err, ws)
		}
		_ = first()
		if ws, err := ListWorkers(ctx, b.Client, b.Prefix); err != nil || len(ws) != 0 {
			t.Fatalf("after the first pool ended: %v %+v", err, ws)
		}
	})
}

// A pool restarted under the ID of a killed one (its entry and owner still
// in place, never refreshed) is not refused: it claims the ID once the
// old entry expires.
func TestRegistryClaimsExpiredID(t *testing.T) {
	t.Parallel()
	b := testredis.Redis(t) // expiry by Redis's clock; miniredis expires only when told
	ctx := testCtx(t)
	q := namedQ(t, b, "reclaim", Options{})
	live, info := registryKeys(b.Prefix)
	const ttl = 600 * time.Millisecond
	if err := b.Client.Set(ctx, ownerKey(b.Prefix, "same"), "dead-run", ttl).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Client.Set(ctx, info+"same", `{"id":"same"}`, ttl).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Client.ZAdd(ctx, live, redis.Z{Score: 1, Member: "same"}).Err(); err != nil {
		t.Fatal(err)
	}
	p, err := NewPool(PoolOptions{Concurrency: 1, Heartbeat: 100 * time.Millisecond, ID: "same"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Add(q, func(context.Context, *Task) error { return nil }, QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := runFunc(t, p.Run)
	waitFor(t, 10*time.Second, "the pool listed under the reclaimed ID", func() bool { return listedOn(ctx, q) })
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
}

// The live set is scored by Redis TIME and ListWorkers reports each
// pool's Beat and Age by Redis TIME: a server clock an hour behind the
// process (miniredis) and a queue clock (Options.Now) an hour ahead change
// neither.
func TestRegistryRedisClock(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		if b.Mini != nil {
			b.Mini.SetTime(time.Now().Add(-time.Hour))
		}
		q := namedQ(t, b, "clock", Options{Now: func() time.Time { return time.Now().Add(time.Hour) }})
		p, err := NewPool(PoolOptions{Concurrency: 1, Heartbeat: time.Second, ID: "clock"})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Add(q, func(context.Context, *Task) error { return nil }, QueueOptions{}); err != nil {
			t.Fatal(err)
		}
		stop := runFunc(t, p.Run)
		defer func() { _ = stop() }()
		waitFor(t, 5*time.Second, "the pool listed", func() bool { return listedOn(ctx, q) })
		live, _ := registryKeys(b.Prefix)
		beat, err := b.Client.ZScore(ctx, live, "clock").Result()
		if err != nil {
			t.Fatal(err)
		}
		now, err := b.Client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		// the first beat came at most a few intervals before now (the
		// poll's slack), never after it
		if d := now.Sub(time.UnixMilli(int64(beat))); d < 0 || d > 5*time.Second {
			t.Fatalf("live set score %s, Redis TIME %s: %v apart", strconv.FormatFloat(beat, 'f', 0, 64), now, d)
		}
		ws, err := q.Workers(ctx)
		if err != nil || len(ws) != 1 {
			t.Fatalf("Workers: %v %+v", err, ws)
		}
		w := ws[0]
		if w.Beat.Before(time.UnixMilli(int64(beat))) {
			t.Errorf("Beat %v, older than the live set's score %v", w.Beat, time.UnixMilli(int64(beat)))
		}
		if age := time.Duration(w.Age); age < 0 || age > 5*time.Second {
			t.Errorf("Age %v, Beat %v", age, w.Beat)
		}
	})
}

// Typed nils are refused with ErrInvalid, never dereferenced: Pool.Add,
// Queue.Workers and Health, Sharded.Workers, and nil clients of every
// type (ListWorkers, Discover, New, a WakeClient).
func TestRegistryTypedNil(t *testing.T) {
	t.Parallel()
	p, err := NewPool(PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, *Task) error { return nil }
	var q *Queue
	var s *Sharded
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Add(nil *Queue)", func() error { return p.Add(q, h, QueueOptions{}) }},
		{"Add(nil *Sharded)", func() error { return p.Add(s, h, QueueOptions{}) }},
		{"nil Queue.Workers", func() error { _, err := q.Workers(ctx); return err }},
		{"nil Queue.Health", func() error { _, err := q.Health(ctx, 0); return err }},
		{"nil Sharded.Workers", func() error { _, err := s.Workers(ctx); return err }},
		{"ListWorkers(nil client)", func() error { _, err := ListWorkers(ctx, nil, ""); return err }},
		{"ListWorkers(nil *redis.Client)", func() error { _, err := ListWorkers(ctx, (*redis.Client)(nil), ""); return err }},
		{"ListWorkers(nil *redis.ClusterClient)", func() error { _, err := ListWorkers(ctx, (*redis.ClusterClient)(nil), ""); return err }},
		{"Discover(nil *redis.Client)", func() error { _, err := Discover(ctx, (*redis.Client)(nil), ""); return err }},
		{"New(nil *redis.Client)", func() error { _, err := New((*redis.Client)(nil), "q", Options{}); return err }},
		{"NewPool(WakeClient nil *redis.Client)", func() error {
			_, err := NewPool(PoolOptions{WakeClient: (*redis.Client)(nil)})
			return err
		}},
		{"newWorker(WakeClient nil *redis.Ring)", func() error {
			q, err := New(testredis.Mini(t).Client, "q", Options{})
			if err != nil {
				return err
			}
			_, err = newWorker(q, h, workerOpts{WakeClient: (*redis.Ring)(nil)})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						err = errors.New("panic")
						t.Errorf("panicked: %v", r)
					}
				}()
				err = tc.call()
			}()
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v, want ErrInvalid", err)
			}
		})
	}
}

// A paused queue with due tasks reads Paused, with or without a live
// worker: not Behind (the workers keep up with what they may take) nor
// NoWorker. Resumed, the worker drains it.
func TestHealthPaused(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		q := namedQ(t, b, "health-paused", Options{})
		if err := q.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		mustEnqueue(t, ctx, q, Job{Key: "due"})
		waitFor(t, 5*time.Second, "a task due", func() bool {
			st, err := q.Stats(ctx)
			return err == nil && st.Ready == 1
		})
		verdict := func() Verdict {
			h, err := q.Health(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			return h.Verdict
		}
		if v := verdict(); v != VerdictPaused {
			t.Fatalf("paused, no worker: %v, want paused", v)
		}
		p, err := NewPool(PoolOptions{Concurrency: 1, Heartbeat: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Add(q, func(context.Context, *Task) error { return nil }, QueueOptions{}); err != nil {
			t.Fatal(err)
		}
		stop := runFunc(t, p.Run)
		waitFor(t, 5*time.Second, "the pool listed", func() bool { return listedOn(ctx, q) })
		if v := verdict(); v != VerdictPaused {
			t.Fatalf("paused, a live worker: %v, want paused", v)
		}
		if err := q.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the task handled after the resume", func() bool { return p.Stats()[0].Handled == 1 })
		_ = stop()
	})
}

// A server's entry lists only the pool's lines with a queue there: a
// queue named like one the pool serves elsewhere (another server, or
// another prefix on the same server) has no worker, and Health says
// NoWorker, not Served.
func TestRegistryEntryListsItsServersLines(t *testing.T) {
	t.Parallel()
	t.Run("two servers", func(t *testing.T) {
		t.Parallel()
		ts := newTwoServers(t, true)
		ctx := testCtx(t)
		stop := runFunc(t, ts.pool(t, "own-lines", 100*time.Millisecond).Run)
		waitFor(t, 5*time.Second, "the pool listed on both servers", func() bool {
			return listedOn(ctx, ts.qa) && listedOn(ctx, ts.qb)
		})
		// "reg-a" is served on s; this one, on b, is not
		twin, err := New(ts.b.Client, ts.qa.name, Options{Prefix: ts.b.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		unserved(t, ctx, twin)
		_ = stop()
	})
	t.Run("two prefixes", func(t *testing.T) {
		t.Parallel()
		b := testredis.Redis(t)
		ctx := testCtx(t)
		other := b.Prefix + "-2" // cleaned with b.Prefix
		x := namedQ(t, b, "x", Options{})
		y, err := New(b.Client, "y", Options{Prefix: other})
		if err != nil {
			t.Fatal(err)
		}
		p, err := NewPool(PoolOptions{Concurrency: 1, Heartbeat: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []*Queue{x, y} {
			if err := p.Add(q, func(context.Context, *Task) error { return nil }, QueueOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		stop := runFunc(t, p.Run)
		waitFor(t, 5*time.Second, "the pool listed under both prefixes", func() bool {
			return listedOn(ctx, x) && listedOn(ctx, y)
		})
		twin, err := New(b.Client, "x", Options{Prefix: other})
		if err != nil {
			t.Fatal(err)
		}
		unserved(t, ctx, twin)
		ws, err := ListWorkers(ctx, b.Client, other)
		if err != nil || len(ws) != 1 || len(ws[0].Lines) != 1 || ws[0].Lines[0].Name != "y" {
			t.Errorf("entry under %s: %+v, %v; want the line y alone", other, ws, err)
		}
		_ = stop()
	})
}

// unserved checks that q, given a due task, has no worker and reads
// NoWorker.
func unserved(t *testing.T, ctx context.Context, q *Queue) {
	t.Helper()
	mustEnqueue(t, ctx, q, Job{Key: "due"})
	h, err := q.Health(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Workers) != 0 || h.Verdict != VerdictNoWorker {
		t.Errorf("%s: %d workers, verdict %v; want none, NoWorker", q.name, len(h.Workers), h.Verdict)
	}
}

// sawDuplicateID reports whether a heartbeat found the ID held.
func (o *faultObserver) sawDuplicateID() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, err := range o.errs["heartbeat"] {
		if errors.Is(err, ErrDuplicateID) {
			return true
		}
	}
	return false
}

// idPool is a pool of q alone under id, beating every beat.
func idPool(t *testing.T, q *Queue, id string, beat time.Duration) *Pool {
	t.Helper()
	p, err := NewPool(PoolOptions{Concurrency: 1, Heartbeat: beat, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Add(q, func(context.Context, *Task) error { return nil }, QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFaultRegistryLostKeysKeepOwner: a server that loses the registry's
// keys (a restart without persistence, a flush) hands the ID back to the
// live pool that held it, not to a second pool waiting for it: the
// waiter claims a free ID only past one holder TTL after it found it
// free early, and ends with ErrDuplicateID when the holder beats again.
// The waiter beats 10 times as often as the holder, so it would come
// first to the free ID.
func TestFaultRegistryLostKeysKeepOwner(t *testing.T) {
	t.Parallel()
	b := testredis.Redis(t) // expiry by Redis's clock
	ctx := testCtx(t)
	obs := &faultObserver{errs: map[string][]error{}}
	q1, q2 := namedQ(t, b, "lost-1", Options{}), namedQ(t, b, "lost-2", Options{Observer: obsOf(obs)})
	holder := idPool(t, q1, "lost", 300*time.Millisecond)
	stopHolder := runFunc(t, holder.Run)
	waitFor(t, 5*time.Second, "the holder listed", func() bool { return listedOn(ctx, q1) })
	waiter := idPool(t, q2, "lost", 30*time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- waiter.Run(ctx) }()
	live, info := registryKeys(b.Prefix)
	waitFor(t, 5*time.Second, "the waiter refused", func() bool { return obs.sawDuplicateID() })
	if err := b.Client.Del(ctx, info+"lost", ownerKey(b.Prefix, "lost"), live).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrDuplicateID) {
			t.Fatalf("the waiter's Run: %v, want ErrDuplicateID", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter still runs after 10 s")
	}
	ws, err := ListWorkers(ctx, b.Client, b.Prefix)
	if err != nil || len(ws) != 1 || !ws[0].Serves("lost-1") {
		t.Fatalf("after the waiter ended: %v %+v, want the holder's entry", err, ws)
	}
	if err := stopHolder(); !errors.Is(err, context.Canceled) {
		t.Fatalf("the holder's Run: %v, want context.Canceled", err)
	}
}

// TestRegistrySplitClaim: a pool that holds its ID under one prefix and
// finds it held, and beating, under another (two pools that started at
// once and each claimed one first) ends with ErrDuplicateID only when the
// other holder's token is the lower; otherwise it waits for the other to
// end (which it does on seeing this pool beat) and claims the ID there,
// so one of the two survives, never neither. The other holder here is
// written by hand with a token below or above every hex token.
func TestRegistrySplitClaim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		token    string
		survives bool
	}{{"0", false}, {"~", true}} {
		t.Run("other="+tc.token, func(t *testing.T) {
			t.Parallel()
			b := testredis.Redis(t)
			ctx := testCtx(t)
			other := b.Prefix + "-2" // cleaned with b.Prefix
			q1 := namedQ(t, b, "split-1", Options{})
			obs := &faultObserver{errs: map[string][]error{}}
			q2, err := New(b.Client, "split-2", Options{Prefix: other, Observer: obsOf(obs)})
			if err != nil {
				t.Fatal(err)
			}
			live, info := registryKeys(other)
			const ttl = time.Second
			beat := func() { // the other holder's heartbeat under other
				if _, err := b.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.Set(ctx, ownerKey(other, "split"), tc.token, ttl)
					p.Set(ctx, info+"split", `{"id":"split"}`, ttl)
					p.ZAdd(ctx, live, redis.Z{Score: float64(time.Now().UnixMilli()), Member: "split"})
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			beat()
			p := idPool(t, q1, "split", 40*time.Millisecond)
			if err := p.Add(q2, func(context.Context, *Task) error { return nil }, QueueOptions{}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			// the other holder beats until the pool has found it there
			// (a holder beating on would end the pool past one holder
			// TTL), then twice more, 5 of the pool's intervals apart: the
			// pool sees a live holder (having claimed the ID there if the
			// first entry expired meanwhile)
			waitFor(t, 5*time.Second, "the pool refused under the second prefix", func() bool {
				if obs.sawDuplicateID() {
					return true
				}
				beat()
				return false
			})
			waitFor(t, 5*time.Second, "the pool listed under its first prefix", func() bool { return listedOn(ctx, q1) })
			for range 2 {
				beat()
				time.Sleep(200 * time.Millisecond)
			}
			if !tc.survives {
				select {
				case err := <-done:
					if !errors.Is(err, ErrDuplicateID) {
						t.Fatalf("Run: %v, want ErrDuplicateID", err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("the pool still runs beside a lower token")
				}
				return
			}
			select {
			case err := <-done:
				t.Fatalf("Run beside a higher token: %v, want it to wait", err)
			default:
			}
			// the other holder ends, as it does on seeing the pool beat
			if err := b.Client.Del(ctx, info+"split", ownerKey(other, "split")).Err(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 5*time.Second, "the ID claimed under the second prefix", func() bool { return listedOn(ctx, q2) })
			select {
			case err := <-done:
				t.Fatalf("Run: %v", err)
			default:
			}
		})
	}
}
