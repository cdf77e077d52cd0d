package delay

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// The bulk ack script gives, lease by lease, what acking one by one
// gives: fenced, duplicates acked once, cancelled tasks deleted, index
// entries of other tasks of the same key kept.
func TestAckManyBulkSemantics(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		mustEnqueue(t, ctx, q, Job{Key: "shared", Token: "a"})
		mustEnqueue(t, ctx, q, Job{Key: "shared", Token: "b"})
		mustEnqueue(t, ctx, q, Job{Key: "solo"})
		mustEnqueue(t, ctx, q, Job{Key: "gone"})
		mustEnqueue(t, ctx, q, Job{Key: "byhand"})
		bt := mustTake(t, ctx, q, 10)
		if len(bt.Tasks) != 5 {
			t.Fatalf("took %d", len(bt.Tasks))
		}
		byTok := map[string]*Task{}
		for _, tk := range bt.Tasks {
			byTok[tk.Key+"/"+tk.Token] = tk
		}
		a := byTok["shared/a"]
		var solo, gone, hand *Task
		for _, tk := range bt.Tasks {
			switch tk.Key {
			case "solo":
				solo = tk
			case "gone":
				gone = tk
			case "byhand":
				hand = tk
			}
		}
		if _, err := q.Cancel(ctx, Selector{Key: "gone"}); err != nil {
			t.Fatal(err)
		}
		wrong := a.lease
		wrong.Fence++
		rows := []struct {
			name  string
			lease leaseRef
			want  error
		}{
			{"wrong fence", wrong, ErrLeaseLost},
			{"ok", a.lease, nil},
			{"twice in one batch", a.lease, ErrNotFound},
			{"unknown", leaseRef{ID: "nosuch", Fence: 1}, ErrNotFound},
			{"cancelled in flight", gone.lease, nil},
			{"solo", solo.lease, nil},
			// a Lease kept outside the process has no key digest: the ack reads it from the record
			{"built by hand", leaseRef{ID: hand.ID, Fence: hand.lease.Fence}, nil},
			{"empty", leaseRef{}, &ValidationError{Field: "lease"}},
		}
		tasks := make([]*Task, len(rows))
		for i, r := range rows {
			tasks[i] = &Task{lease: r.lease}
		}
		errs, err := q.ackTasks(ctx, tasks)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			if (r.want == nil) != (errs[i] == nil) || (r.want != nil && !errors.Is(errs[i], r.want)) {
				t.Errorf("%s: got %v, want %v", r.name, errs[i], r.want)
			}
		}
		// "shared/b" is still in flight and still found by its key.
		infos, err := lookup(ctx, q, "shared")
		if err != nil || len(infos) != 1 || infos[0].State != StateInFlight {
			t.Fatalf("shared after ack: %+v %v", infos, err)
		}
		for _, k := range []string{"solo", "gone", "byhand"} {
			if infos, err := lookup(ctx, q, k); err != nil || len(infos) != 0 {
				t.Errorf("%s after ack: %+v %v", k, infos, err)
			}
		}
		if err := q.ackTask(ctx, byTok["shared/b"]); err != nil {
			t.Fatal(err)
		}
		st, err := q.Stats(ctx)
		if err != nil || st.Acked != 5 {
			t.Errorf("acked %d (%v), want 5", st.Acked, err)
		}
		assertOnlyCounters(t, b, q)
	})
}

// The bulk take script's effects: corrupt records parked in dead, records
// that vanished parked in dead and reported as lost, counters, states and the lateness histogram kept,
// a fresh fence per take.
func TestTakeBulkEffects(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		type result struct {
			keys                    string
			attempts                string
			corrupt, due, fly, dead int64
			delivered               string
			lat                     int // deliveries filed by lateness (buckets depend on timing)
			errCorrupt, errLost     bool
			lost                    int
		}
		takeWith := func(name string, take func(*Queue, context.Context, int) (takeBatch, error)) result {
			q, err := New(b.Client, name, Options{Prefix: b.Prefix})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 6 {
				mustEnqueue(t, ctx, q, Job{Key: "k" + strconv.Itoa(i), Payload: []byte("p" + strconv.Itoa(i))})
			}
			mustEnqueue(t, ctx, q, Job{Key: "later", When: After(time.Hour)})
			past, _ := q.o.Codec.EncodeTime(time.Now().Add(-time.Minute), 0)
			b.Client.HSet(ctx, q.k.taskBucket("c1"), "c1", "garbage")
			b.Client.ZAdd(ctx, q.k.due, redis.Z{Score: float64(past), Member: "c1"})
			b.Client.ZAdd(ctx, q.k.due, redis.Z{Score: float64(past + 1), Member: "norecord"})
			bt, err := take(q, ctx, 5) // c1, norecord and three good ones
			r := result{errCorrupt: errors.Is(err, ErrCorrupt), errLost: errors.Is(err, ErrRecordLost),
				corrupt: int64(bt.Corrupt), lost: bt.Lost}
			bt2, err := take(q, ctx, 10)
			if err != nil {
				t.Fatal(err)
			}
			// one fence per take: the same within a batch, fresh in the next
			for k, batch := range []takeBatch{bt, bt2} {
				for _, tk := range batch.Tasks {
					if tk.lease.Fence != batch.Tasks[0].lease.Fence || tk.lease.Fence <= 0 {
						t.Errorf("%s: take %d: fence %d, first %d", name, k, tk.lease.Fence, batch.Tasks[0].lease.Fence)
					}
				}
			}
			if len(bt.Tasks) == 0 || len(bt2.Tasks) == 0 || bt2.Tasks[0].lease.Fence <= bt.Tasks[0].lease.Fence {
				t.Errorf("%s: second take's fence not fresh: %+v then %+v", name, bt.Tasks, bt2.Tasks)
			}
			for _, tk := range append(bt.Tasks, bt2.Tasks...) {
				r.keys += tk.Key + ":" + string(tk.Payload) + " "
				r.attempts += strconv.Itoa(tk.Attempt)
				if tk.Deadline.Sub(tk.DeliveredAt) != q.o.Lease {
					t.Errorf("%s: lease %v", name, tk.Deadline.Sub(tk.DeliveredAt))
				}
			}
			if bt2.NextDue.IsZero() || bt2.NextExpiry.IsZero() {
				t.Errorf("%s: next due %v, next expiry %v", name, bt2.NextDue, bt2.NextExpiry)
			}
			r.due = b.Client.ZCard(ctx, q.k.due).Val()
			r.fly = b.Client.ZCard(ctx, q.k.inflight).Val()
			r.dead = b.Client.ZCard(ctx, q.k.dead).Val()
			st := b.Client.HGetAll(ctx, q.k.stats).Val()
			r.delivered = st["delivered"] + "/" + st["corrupt"] + "/" + st["lost"]
			for k, v := range st {
				if strings.HasPrefix(k, "lat:") {
					n, _ := strconv.Atoi(v)
					r.lat += n
				}
			}
			return r
		}
		want := takeWith("viatake", (*Queue).takeN)
		if !want.errCorrupt || !want.errLost || want.corrupt != 1 || want.lost != 1 || want.fly != 6 || want.due != 1 ||
			want.dead != 2 || want.lat != 6 || want.delivered != "6/1/1" {
			t.Fatalf("unexpected baseline %+v", want)
		}
	})
}

// An ID repeated in one AckMany batch is acked at its first pair under
// its fence; every later pair of it is ErrNotFound, whatever its fence,
// and a pair before that first ack keeps its own answer. The task and its
// index entry are gone once, the other task of its key kept; a task in
// the lease hash but missing from inflight is acked all the same.
func TestAckManyRepeats(t *testing.T) {
	t.Parallel()
	type pair struct {
		task  string // "a", "b" (both key "shared"), "c" (key "solo")
		wrong bool   // a fence one past the task's
		hand  bool   // a Lease built by hand: no key digest
		want  error
	}
	cases := []struct {
		name     string
		pairs    []pair
		noFlight string // a task dropped from inflight (not the lease hash) first
		acked    int64
		left     string // Lookup("shared") after the batch
	}{
		{"wrong fence, then right, then again", []pair{
			{task: "a", wrong: true, want: ErrLeaseLost}, {task: "a"}, {task: "a", want: ErrNotFound},
		}, "", 1, "b=inflight"},
		{"right, then wrong fence", []pair{
			{task: "a"}, {task: "a", wrong: true, want: ErrNotFound}, {task: "c"},
		}, "", 2, "b=inflight"},
		{"both tasks of a key, each twice", []pair{
			{task: "a"}, {task: "b"}, {task: "b", want: ErrNotFound}, {task: "a", want: ErrNotFound},
		}, "", 2, ""},
		{"by hand twice", []pair{
			{task: "c", hand: true}, {task: "c", hand: true, want: ErrNotFound}, {task: "a"},
		}, "", 2, "b=inflight"},
		{"missing from inflight", []pair{
			{task: "a"}, {task: "c"},
		}, "a", 2, "b=inflight"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
				mustEnqueue(t, ctx, q, Job{Key: "shared", Token: "a"})
				mustEnqueue(t, ctx, q, Job{Key: "shared", Token: "b"})
				mustEnqueue(t, ctx, q, Job{Key: "solo", Token: "c"})
				bt := mustTake(t, ctx, q, 10)
				byTok := map[string]*Task{}
				for _, tk := range bt.Tasks {
					byTok[tk.Token] = tk
				}
				if len(byTok) != 3 {
					t.Fatalf("took %d", len(bt.Tasks))
				}
				if tc.noFlight != "" {
					if err := b.Client.ZRem(ctx, q.k.inflight, byTok[tc.noFlight].ID).Err(); err != nil {
						t.Fatal(err)
					}
				}
				tasks := make([]*Task, len(tc.pairs))
				for i, p := range tc.pairs {
					l := byTok[p.task].lease
					if p.wrong {
						l.Fence++
					}
					if p.hand {
						l = leaseRef{ID: l.ID, Fence: l.Fence}
					}
					tasks[i] = &Task{lease: l}
				}
				errs, err := q.ackTasks(ctx, tasks)
				if err != nil {
					t.Fatal(err)
				}
				for i, p := range tc.pairs {
					if (p.want == nil) != (errs[i] == nil) || (p.want != nil && !errors.Is(errs[i], p.want)) {
						t.Errorf("pair %d (%s): got %v, want %v", i, p.task, errs[i], p.want)
					}
				}
				if got := lookupTokens(t, ctx, q, "shared"); got != tc.left {
					t.Errorf("shared after the batch: %q, want %q", got, tc.left)
				}
				st, err := q.Stats(ctx)
				if err != nil || st.Acked != tc.acked {
					t.Errorf("acked %d (%v), want %d", st.Acked, err, tc.acked)
				}
			})
		})
	}
}
