package delay

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// queueState renders everything a queue stores, for comparing two queues
// fed the same jobs (their IDs are per-queue counters, so they match).
func queueState(t *testing.T, b *testredis.Backend, q *Queue) string {
	t.Helper()
	ctx := testCtx(t)
	var buf bytes.Buffer
	for _, k := range []struct{ name, key string }{
		{"due", q.k.due}, {"inflight", q.k.inflight}, {"dead", q.k.dead},
	} {
		zs, err := b.Client.ZRangeWithScores(ctx, k.key, 0, -1).Result()
		if err != nil {
			t.Fatalf("%s: %v", k.name, err)
		}
		fmt.Fprintf(&buf, "%s:", k.name)
		for _, z := range zs {
			if k.name == "inflight" {
				fmt.Fprintf(&buf, " %v", z.Member) // lease deadlines follow the clock
				continue
			}
			fmt.Fprintf(&buf, " %v=%.0f", z.Member, z.Score)
		}
		buf.WriteByte('\n')
	}
	for _, k := range []struct{ name, key string }{
		{"tasks", q.k.tasks}, {"idx", q.k.idx}, {"lease", q.k.lease}, {"ctr", q.k.ctr}, {"stats", q.k.stats},
	} {
		m := map[string]string{}
		names := []string{k.key}
		if k.name == "tasks" { // bucketed: every bucket, fields prefixed by its name
			var err error
			if names, err = testredis.Keys(ctx, b.Client, k.key+":"); err != nil {
				t.Fatalf("%s: %v", k.name, err)
			}
		}
		for _, name := range names {
			h, err := b.Client.HGetAll(ctx, name).Result()
			if err != nil {
				t.Fatalf("%s: %v", k.name, err)
			}
			for f, v := range h {
				if name != k.key {
					f = strings.TrimPrefix(name, k.key) + "/" + f
				}
				if k.name == "stats" && strings.HasPrefix(f, "lat:") {
					// A lateness bucket follows the clock, as lease
					// deadlines do: only how many were counted is state.
					n, _ := strconv.Atoi(m["lat"])
					d, _ := strconv.Atoi(v)
					f, v = "lat", strconv.Itoa(n+d)
				}
				m[f] = v
			}
		}
		if k.name == "ctr" {
			// The high-water mark's windows follow the clock, as lateness
			// buckets do: a run may cross into a new minute at another
			// point. Its largest mark over the windows is state.
			hw, _ := strconv.Atoi(m["hw"])
			hwp, _ := strconv.Atoi(m["hwp"])
			delete(m, "hww")
			delete(m, "hwp")
			m["hw"] = strconv.Itoa(max(hw, hwp))
		}
		fmt.Fprintf(&buf, "%s: %v\n", k.name, m)
	}
	return buf.String()
}

func sameEnqueued(t *testing.T, i int, got, want Enqueued) {
	t.Helper()
	if fmt.Sprint(got.Err) != fmt.Sprint(want.Err) {
		t.Fatalf("job %d: batch err %v, one by one %v", i, got.Err, want.Err)
	}
	got.Err, want.Err = nil, nil
	if got.ID != want.ID || got.Token != want.Token || !got.Due.Equal(want.Due) || got.Seq != want.Seq ||
		got.Duplicate != want.Duplicate || got.State != want.State {
		t.Fatalf("job %d: batch %+v, one by one %+v", i, got, want)
	}
}

// enqueueBoth sends jobs through EnqueueBatch on batch and one Enqueue at
// a time on single, and requires identical results and stored state.
// patch, when set, may edit jobs[i] just before job i is sent one by one,
// from the one-by-one results so far (to reuse a generated ID as a token);
// the batch gets the patched jobs.
func enqueueBoth(t *testing.T, b *testredis.Backend, single, batch *Queue, jobs []Job, patch func(i int, jobs []Job, res []Enqueued)) []Enqueued {
	t.Helper()
	ctx := testCtx(t)
	want := make([]Enqueued, len(jobs))
	for i := range jobs {
		if patch != nil {
			patch(i, jobs, want)
		}
		e, err := single.Enqueue(ctx, jobs[i])
		want[i], want[i].Err = e, err
	}
	got, err := batch.EnqueueBatch(ctx, jobs)
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	for i := range jobs {
		sameEnqueued(t, i, got[i], want[i])
	}
	if s, g := queueState(t, b, single), queueState(t, b, batch); s != g {
		t.Fatalf("stored state differs:\none by one:\n%s\nbatch:\n%s", s, g)
	}
	return got
}

func twoQueues(t *testing.T, b *testredis.Backend) (single, batch *Queue) {
	t.Helper()
	var err error
	if single, err = New(b.Client, "single", Options{Prefix: b.Prefix}); err != nil {
		t.Fatal(err)
	}
	if batch, err = New(b.Client, "batch", Options{Prefix: b.Prefix}); err != nil {
		t.Fatal(err)
	}
	return single, batch
}

// A batch behaves exactly as the same jobs enqueued one by one: IDs, due
// times, seqs, duplicate flags and states (duplicates inside the batch, of
// pending and in-flight tasks, of a generated token), the per-key cap,
// per-job validation errors, and everything stored.
func TestEnqueueBatchEqualsOneByOne(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		single, batch := twoQueues(t, b)
		m := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		ms := func(d int) When { return At(m.Add(time.Duration(d) * time.Millisecond)) }
		// the same history on both: a pending task, an in-flight one
		for _, q := range []*Queue{single, batch} {
			mustEnqueue(t, ctx, q, Job{Key: "k1", Token: "a", When: ms(0)})
			mustEnqueue(t, ctx, q, Job{Key: "kp", Token: "x", When: At(time.Now().Add(-time.Second))})
			if tk := mustTake(t, ctx, q, 10); len(tk.Tasks) != 1 {
				t.Fatalf("take: %d tasks", len(tk.Tasks))
			}
		}
		jobs := []Job{
			{Key: "k1", Token: "a", When: ms(5)},                        // 0: dup of a pending task
			{Key: "kp", Token: "x"},                                     // 1: dup of an in-flight task
			{Key: "k3", Token: "b", When: ms(0), Payload: []byte("p3")}, // 2: new, after k1/a in ms 0
			{Key: "k3", Token: "b", When: ms(9)},                        // 3: dup of job 2, inside the batch
			{Key: "k4", When: ms(0)},                                    // 4: generated token
			{Key: "k4", When: ms(0)},                                    // 5: token patched to job 4's ID: dup
			{Key: "k5", Token: "c", When: ms(1)},                        // 6: interleaved ms 1, 0, 1
			{Key: "k6", When: ms(0)},                                    // 7
			{Key: "k5", Token: "d", When: ms(1)},                        // 8
			{Key: "", Token: "bad"},                                     // 9: invalid, never sent
			{Key: "k7", When: When{After: -time.Second}},                // 10: invalid
		}
		for i := range maxTasksPerKey + 2 { // the last two exceed the per-key cap
			jobs = append(jobs, Job{Key: "full", Token: "t" + strconv.Itoa(i), When: ms(2)})
		}
		jobs = append(jobs,
			Job{Key: "full", Token: "t3"},                  // dup, even at the cap
			Job{Key: "k3", Token: "b", When: ms(7)},        // dup of job 2 again
			Job{Key: "k8", Token: "e", When: ms(-1)},       // an earlier ms
			Job{Key: "k8", When: ms(0), Payload: []byte{}}, // same key, generated token
		)
		if b.Mini != nil { // After(D) is deterministic only under a frozen TIME
			b.Mini.SetTime(m.Add(-time.Hour))
			jobs = append(jobs, Job{Key: "k9", When: After(time.Hour)}, Job{Key: "k9", Token: "f", When: After(time.Hour + time.Millisecond)})
		}
		patch := func(i int, jobs []Job, res []Enqueued) {
			if i == 5 {
				jobs[5].Token = res[4].ID
			}
		}
		got := enqueueBoth(t, b, single, batch, jobs, patch)
		checks := []struct {
			i     int
			dup   bool
			state State
		}{{0, true, StatePending}, {1, true, StateInFlight}, {3, true, StatePending}, {5, true, StatePending}, {2, false, StatePending}}
		for _, c := range checks {
			if got[c.i].Duplicate != c.dup || got[c.i].State != c.state {
				t.Fatalf("job %d: %+v", c.i, got[c.i])
			}
		}
		if got[3].ID != got[2].ID || !got[3].Due.Equal(got[2].Due) || got[2].Seq != 1 {
			t.Fatalf("in-batch duplicate %+v of %+v", got[3], got[2])
		}
		n := len(jobs)
		if b.Mini != nil {
			n -= 2
		}
		for _, i := range []int{n - 5, n - 6} {
			if got[i].Err == nil {
				t.Fatalf("job %d over the per-key cap: %+v", i, got[i])
			}
		}
		if got[9].Err == nil || got[10].Err == nil {
			t.Fatalf("invalid jobs: %v, %v", got[9].Err, got[10].Err)
		}
	})
}

// More than 1024 tasks in one ms, spread over several script calls of one
// batch, with a task already pending in the next ms and one of the batch
// due in it: the spill continues after them and the overflow is counted,
// exactly as one by one.
func TestEnqueueBatchSpillEqualsOneByOne(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		single, batch := twoQueues(t, b)
		m := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		next := m.Add(time.Millisecond)
		for _, q := range []*Queue{single, batch} {
			for i := range 10 {
				mustEnqueue(t, ctx, q, Job{Key: "pre" + strconv.Itoa(i), When: At(next)})
			}
		}
		var jobs []Job
		for i := range 1030 {
			jobs = append(jobs, Job{Key: "s" + strconv.Itoa(i), When: At(m)})
		}
		jobs = append(jobs, Job{Key: "n", When: At(next)}, Job{Key: "x1", When: At(m)}, Job{Key: "x2", When: At(m)})
		got := enqueueBoth(t, b, single, batch, jobs, nil)
		for i, r := range got {
			wantAt, wantSeq := m, int64(i)
			switch {
			case i >= 1024 && i < 1030:
				wantAt, wantSeq = next, int64(10+i-1024)
			case i >= 1030:
				wantAt, wantSeq = next, int64(16+i-1030)
			}
			if r.Err != nil || !r.Due.Equal(wantAt) || r.Seq != wantSeq {
				t.Fatalf("job %d: %+v, want %v seq %d", i, r, wantAt, wantSeq)
			}
		}
		st, err := batch.Stats(ctx)
		if err != nil || st.SeqOverflows != 8 {
			t.Fatalf("overflows %d (%v), want 8", st.SeqOverflows, err)
		}
	})
}

// At and After mixed in one batch: After(D) is Redis TIME + D, At exact.
func TestEnqueueBatchMixesAtAndAfter(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		at := time.Now().Add(time.Minute).Truncate(time.Millisecond)
		serverNow := func() time.Time {
			if b.Mini != nil {
				return time.Now() // miniredis TIME is the real clock unless set
			}
			tm, err := b.Client.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			return tm
		}
		before := serverNow().Truncate(time.Millisecond)
		jobs := []Job{
			{Key: "a", When: After(time.Minute)},
			{Key: "b", When: At(at)},
			{Key: "c", When: After(0)},
			{Key: "d", When: At(at)},
			{Key: "e", When: After(time.Minute + 500*time.Microsecond)},
		}
		res, err := q.EnqueueBatch(ctx, jobs)
		if err != nil {
			t.Fatal(err)
		}
		after := serverNow().Add(time.Millisecond)
		for i, r := range res {
			if r.Err != nil || r.Duplicate {
				t.Fatalf("job %d: %+v", i, r)
			}
		}
		within := func(i int, d time.Duration) {
			t.Helper()
			if due := res[i].Due; due.Before(before.Add(d)) || due.After(after.Add(d+time.Millisecond)) {
				t.Fatalf("job %d due %v, want within [%v, %v] + %v", i, due, before, after, d)
			}
		}
		within(0, time.Minute)
		within(2, 0)
		within(4, time.Minute+time.Millisecond) // rounded up to the ms
		if !res[1].Due.Equal(at) || !res[3].Due.Equal(at) || res[3].Seq <= res[1].Seq {
			t.Fatalf("At jobs: %+v, %+v", res[1], res[3])
		}
		if !res[4].Due.After(res[0].Due) {
			t.Fatalf("After(1m+0.5ms) due %v not after After(1m) %v", res[4].Due, res[0].Due)
		}
	})
}

// Large payloads split a batch into several script calls (bounded
// arguments); order and contents are kept.
func TestEnqueueBatchLargePayloads(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, _ *testredis.Backend, q *Queue) {
		at := time.Now().Add(-time.Second).Truncate(time.Millisecond)
		var jobs []Job
		for i := range 5 {
			jobs = append(jobs, Job{Key: "big" + strconv.Itoa(i), Payload: bytes.Repeat([]byte{byte('a' + i)}, 400<<10), When: At(at)})
		}
		res, err := q.EnqueueBatch(ctx, jobs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Seq != int64(i) {
				t.Fatalf("job %d: %+v", i, r)
			}
		}
		tk := mustTake(t, ctx, q, 10)
		if len(tk.Tasks) != 5 {
			t.Fatalf("took %d", len(tk.Tasks))
		}
		for i, task := range tk.Tasks {
			if task.Key != jobs[i].Key || !bytes.Equal(task.Payload, jobs[i].Payload) {
				t.Fatalf("task %d: key %s, payload %d bytes", i, task.Key, len(task.Payload))
			}
		}
	})
}

// MaxBatch jobs go in one round trip once the script is loaded.
func TestEnqueueBatchOneRoundTrip(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		mustEnqueue(t, ctx, q, Job{Key: "warm"})
		if _, err := q.EnqueueBatch(ctx, []Job{{Key: "warm2"}}); err != nil {
			t.Fatal(err)
		}
		rt, err := testredis.CountRoundTrips(ctx, b.Client)
		if err != nil {
			t.Fatal(err)
		}
		jobs := jobsOf(MaxBatch, func(i int) Job { return Job{Key: "rt" + strconv.Itoa(i), When: After(time.Hour)} })
		rt.Reset()
		mustEnqueueBatch(t, ctx, q, jobs)
		if n := rt.Total(); n != 1 {
			t.Fatalf("%d round trips for %d jobs, want 1", n, MaxBatch)
		}
		if n, _ := b.Client.ZCard(ctx, q.k.due).Result(); n != MaxBatch+2 {
			t.Fatalf("due set holds %d", n)
		}
	})
}
