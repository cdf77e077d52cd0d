package delay

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

// 10k tasks (1k without the soak switch) through every path (ack, retry, dead, requeue, purge, cancel
// pending, cancel in flight, reschedule, expired lease): afterwards no task
// record, index entry or set member is left; only the counters remain.
// With DoneTTL every acked task leaves a tombstone, and once they end the
// sweep leaves nothing either.
func TestNothingLeaks10k(t *testing.T) {
	t.Parallel()
	for _, doneTTL := range []time.Duration{0, 300 * time.Millisecond} {
		t.Run(fmt.Sprintf("doneTTL=%v", doneTTL), func(t *testing.T) { nothingLeaks(t, doneTTL) })
	}
}

func nothingLeaks(t *testing.T, doneTTL time.Duration) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		q := newQ(t, b, Options{Lease: 300 * time.Millisecond, MaxAttempts: 2,
			Backoff: func(int) time.Duration { return 0 }, DoneTTL: doneTTL})
		paths := []string{"ack", "retry", "dead", "requeue", "purge", "cancelpending", "cancelflight", "reschedule", "expire", "cancelflightretry"}
		n := soak.Pick(10_000, 1_000)
		if !b.Real() {
			n = 500 // miniredis sorts a sorted set on every range query: quadratic
			t.Logf("miniredis: %d tasks; the larger run is backend=redis", n)
		}
		jobs := make([]Job, n)
		for i := range jobs {
			p := paths[i%len(paths)]
			w := When{}
			if p == "cancelpending" || p == "reschedule" {
				w = After(time.Hour)
			}
			// two tokens per business key for half of them, to exercise multi-task keys
			jobs[i] = Job{Key: fmt.Sprintf("%s:%d", p, i/2), Token: fmt.Sprintf("t%d", i%2), Payload: []byte("payload"), When: w}
		}
		for i := 0; i < n; i += 200 {
			mustEnqueueBatch(t, ctx, q, jobs[i:min(i+200, n)])
		}
		pathOf := func(tk *Task) string {
			for _, p := range paths {
				if len(tk.Key) > len(p) && tk.Key[:len(p)+1] == p+":" {
					return p
				}
			}
			t.Fatalf("unknown key %s", tk.Key)
			return ""
		}
		// cancel pending, reschedule to now
		for i := 0; i < n; i++ {
			switch paths[i%len(paths)] {
			case "cancelpending":
				if _, err := q.Cancel(ctx, Selector{Key: jobs[i].Key, Token: jobs[i].Token}); err != nil {
					t.Fatal(err)
				}
			case "reschedule":
				if r, err := q.Reschedule(ctx, Selector{Key: jobs[i].Key, Token: jobs[i].Token}, After(0)); err != nil || r.Moved != 1 {
					t.Fatalf("reschedule %+v %v", r, err)
				}
			}
		}
		var deadIDs []string
		expired, requeued := 0, 0
		var lastDeadline time.Time // the latest lease deadline handed out
		for round := 0; ; round++ {
			if round > 200 {
				st, _ := q.Stats(ctx)
				t.Fatalf("did not drain: %+v", st)
			}
			bt, err := q.takeN(ctx, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(bt.Tasks) == 0 {
				st, _ := q.Stats(ctx)
				if st.Pending == 0 && st.InFlight == 0 {
					break
				}
				if st.InFlight > 0 { // expire-path tasks: past every lease, the sweep returns them
					passServerTime(t, ctx, b, lastDeadline)
					if _, err := q.Sweep(ctx, 1000); err != nil {
						t.Fatal(err)
					}
				}
				continue
			}
			var acks []*Task
			for _, tk := range bt.Tasks {
				if tk.Deadline.After(lastDeadline) {
					lastDeadline = tk.Deadline
				}
				switch p := pathOf(tk); {
				case p == "ack", p == "reschedule":
					acks = append(acks, tk)
				case p == "retry":
					if tk.Attempt == 1 {
						mustRetry(t, q, tk, outcomeRetried)
					} else {
						acks = append(acks, tk)
					}
				case p == "dead", p == "purge":
					if _, err := q.killTask(ctx, tk, errors.New("dead")); err != nil {
						t.Fatal(err)
					}
					if p == "purge" {
						deadIDs = append(deadIDs, tk.ID)
					}
				case p == "requeue":
					if tk.Attempt == 1 && tk.LastError == "" { // first delivery
						mustRetry(t, q, tk, outcomeRetried)
					} else if tk.Attempt == 2 {
						mustRetry(t, q, tk, outcomeDead) // MaxAttempts 2: dead, then requeued below
					} else {
						acks = append(acks, tk)
					}
				case p == "cancelflight", p == "cancelflightretry":
					if r, err := q.Cancel(ctx, Selector{Key: tk.Key, Token: tk.Token}); err != nil || r.InFlight != 1 {
						t.Fatalf("cancel in flight %+v %v", r, err)
					}
					if p == "cancelflight" {
						acks = append(acks, tk)
					} else {
						mustRetry(t, q, tk, outcomeCancelled)
					}
				case p == "expire":
					if tk.Attempt == 1 {
						expired++ // leave it: the lease expires and the sweep returns it
					} else {
						acks = append(acks, tk)
					}
				}
			}
			errs, err := q.ackTasks(ctx, acks)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range errs {
				if e != nil {
					t.Fatal(e)
				}
			}
			// requeue the requeue-path dead tasks (every page)
			var rq []string
			for off := 0; ; off += 1000 {
				page, err := listDead(ctx, q, off, 1000)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range page.Tasks {
					if len(d.Key) > 8 && d.Key[:8] == "requeue:" {
						rq = append(rq, d.ID)
					}
				}
				if len(page.Tasks) < 1000 {
					break
				}
			}
			for i := 0; i < len(rq); i += 1000 {
				if n, err := q.Requeue(ctx, Selector{IDs: rq[i:min(i+1000, len(rq))]}); err != nil || n != min(1000, len(rq)-i) {
					t.Fatalf("requeue %d %v", n, err)
				}
				requeued += min(1000, len(rq)-i)
			}
		}
		for i := 0; i < len(deadIDs); i += 1000 {
			if _, err := q.Purge(ctx, Selector{IDs: deadIDs[i:min(i+1000, len(deadIDs))]}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := q.Purge(ctx, Selector{All: true}); err != nil { // the "dead" path
			t.Fatal(err)
		}
		if expired != n/len(paths) || requeued != n/len(paths) {
			t.Fatalf("expired %d requeued %d, want %d each", expired, requeued, n/len(paths))
		}
		if doneTTL > 0 {
			st, err := q.Stats(ctx)
			if err != nil || st.Done == 0 {
				t.Fatalf("stats %+v %v: want tombstones of the acked tasks", st, err)
			}
			// every ack came before st's server time: past it plus DoneTTL, every tombstone has ended
			passServerTime(t, ctx, b, st.ServerTime.Add(doneTTL))
			for left := st.Done; left > 0; {
				sw, err := q.Sweep(ctx, 1000)
				if err != nil || sw.Tombstones == 0 {
					t.Fatalf("sweep: %+v %v with %d tombstones left", sw, err, left)
				}
				left -= int64(sw.Tombstones)
			}
		}
		assertOnlyCounters(t, b, q)
		st, _ := q.Stats(ctx)
		t.Logf("stats after %d tasks: %+v", n, st)
	})
}

func mustRetry(t *testing.T, q *Queue, tk *Task, want outcome) {
	t.Helper()
	out, err := q.retry(testCtx(t), tk, errors.New("retry me"))
	if err != nil || out != want {
		t.Fatalf("retry %s attempt %d = %v %v, want %v", tk.Key, tk.Attempt, out, err, want)
	}
}
