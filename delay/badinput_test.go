package delay

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/score"
)

// Every bad input gets a typed error and writes nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		epoch := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
		codec, err := score.NewTimeCodec(epoch, 10)
		if err != nil {
			t.Fatal(err)
		}
		q := newQ(t, b, Options{MaxPayload: 16, Codec: codec})
		// some state to protect: one pending, one in flight
		mustEnqueue(t, ctx, q, Job{Key: "live", Token: "t"})
		flying := mustTake(t, ctx, q, 1).Tasks[0]
		mustEnqueue(t, ctx, q, Job{Key: "pending", When: After(time.Hour)})

		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = down.Close() })
		qDown, err := New(down, "q1", Options{Prefix: b.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		codec20, _ := score.NewTimeCodec(time.Now().Add(-time.Hour), 20) // about 99 days of range
		q20 := newQ(t, b, Options{Codec: codec20})
		enq := func(j Job) func() error {
			return func() error { _, err := q.Enqueue(ctx, j); return err }
		}
		newQueue := func(name string, o Options) func() error {
			return func() error { _, err := New(b.Client, name, o); return err }
		}
		rows := []struct {
			name string
			call func() error
			want error
		}{
			{"empty key", enq(Job{Key: ""}), &ValidationError{Field: "key"}},
			{"oversized key", enq(Job{Key: strings.Repeat("k", MaxKeyBytes+1)}), &ValidationError{Field: "key"}},
			{"key with control char", enq(Job{Key: "a\nb"}), &ValidationError{Field: "key"}},
			{"key with invalid utf8", enq(Job{Key: "a\xffb"}), &ValidationError{Field: "key"}},
			{"oversized token", enq(Job{Key: "k", Token: strings.Repeat("t", MaxTokenBytes+1)}), &ValidationError{Field: "token"}},
			{"token with control char", enq(Job{Key: "k", Token: "a\x00"}), &ValidationError{Field: "token"}},
			{"token with comma", enq(Job{Key: "k", Token: "a,b"}), &ValidationError{Field: "token"}},
			{"payload over cap", enq(Job{Key: "k", Payload: make([]byte, 17)}), &ValidationError{Field: "payload"}},
			{"due beyond codec range", enq(Job{Key: "k", When: At(codec.MaxTime().Add(time.Hour))}), score.ErrOutOfRange},
			{"due before epoch", enq(Job{Key: "k", When: At(epoch.Add(-time.Hour))}), score.ErrBeforeEpoch},
			{"delay beyond codec range", func() error {
				_, err := q20.Enqueue(ctx, Job{Key: "k", When: After(200 * 24 * time.Hour)})
				return err
			}, score.ErrOutOfRange},
			{"negative delay", enq(Job{Key: "k", When: After(-time.Second)}), &ValidationError{Field: "delay"}},
			{"both At and After", enq(Job{Key: "k", When: When{At: time.Now(), After: time.Second}}), &ValidationError{Field: "when"}},
			{"take 0", func() error { _, err := q.takeN(ctx, 0); return err }, &ValidationError{Field: "batch"}},
			{"take -1", func() error { _, err := q.takeN(ctx, -1); return err }, &ValidationError{Field: "batch"}},
			{"take 1001", func() error { _, err := q.takeN(ctx, 1001); return err }, &ValidationError{Field: "batch"}},
			{"ack empty lease", func() error { return q.ackTask(ctx, &Task{lease: leaseRef{}}) }, &ValidationError{Field: "lease"}},
			{"ack empty id", func() error { return q.ackTask(ctx, &Task{lease: leaseRef{Fence: flying.lease.Fence}}) }, &ValidationError{Field: "lease"}},
			{"ack nil task", func() error { return q.ackTask(ctx, nil) }, &ValidationError{Field: "task"}},
			{"ack many nil task", func() error {
				errs, err := q.ackTasks(ctx, []*Task{nil})
				return errors.Join(err, errors.Join(errs...))
			}, &ValidationError{Field: "task"}},
			{"kill nil task", func() error { _, err := q.killTask(ctx, nil, nil); return err }, &ValidationError{Field: "task"}},
			{"retry nil task", func() error { _, err := q.retry(ctx, nil, nil); return err }, &ValidationError{Field: "task"}},
			{"extend nil task", func() error { _, err := q.extend(ctx, nil, time.Second); return err }, &ValidationError{Field: "task"}},
			{"ack wrong fence", func() error {
				return q.ackTask(ctx, &Task{lease: leaseRef{ID: flying.ID, Fence: flying.lease.Fence + 1}})
			}, ErrLeaseLost},
			{"retry wrong fence", func() error {
				_, err := q.retryAfter(ctx, &Task{Attempt: 1, lease: leaseRef{ID: flying.ID, Fence: 999999}}, 0, nil)
				return err
			}, ErrLeaseLost},
			{"ack unknown task", func() error { return q.ackTask(ctx, &Task{lease: leaseRef{ID: "nosuch", Fence: 1}}) }, ErrNotFound},
			{"extend zero", func() error { _, err := q.extend(ctx, flying, 0); return err }, &ValidationError{Field: "lease"}},
			{"sweep 0", func() error { _, err := q.Sweep(ctx, 0); return err }, &ValidationError{Field: "batch"}},
			{"list limit -1", func() error { _, err := q.List(ctx, ListOptions{State: StateDead, Limit: -1}); return err }, &ValidationError{Field: "batch"}},
			{"list key with cursor", func() error { _, err := q.List(ctx, ListOptions{Key: "pending", Cursor: "1:a"}); return err }, &ValidationError{Field: "batch"}},
			{"list key with limit", func() error { _, err := q.List(ctx, ListOptions{Key: "pending", Limit: 5}); return err }, &ValidationError{Field: "batch"}},
			{"list no state", func() error { _, err := q.List(ctx, ListOptions{}); return err }, &ValidationError{Field: "batch"}},
			{"list bad cursor", func() error { _, err := q.List(ctx, ListOptions{State: StateDue, Cursor: "x"}); return err }, &ValidationError{Field: "batch"}},
			{"requeue 1001 ids", func() error { _, err := q.Requeue(ctx, Selector{IDs: make([]string, 1001)}); return err }, &ValidationError{Field: "batch"}},
			{"cancel empty selector", func() error { _, err := q.Cancel(ctx, Selector{}); return err }, &ValidationError{Field: "selector"}},
			{"cancel key and IDs", func() error { _, err := q.Cancel(ctx, Selector{Key: "pending", IDs: []string{"1"}}); return err }, &ValidationError{Field: "selector"}},
			{"cancel token without key", func() error { _, err := q.Cancel(ctx, Selector{Token: "t"}); return err }, &ValidationError{Field: "selector"}},
			{"cancel all", func() error { _, err := q.Cancel(ctx, Selector{All: true}); return err }, &ValidationError{Field: "selector"}},
			{"cancel key too long", func() error { _, err := q.Cancel(ctx, Selector{Key: strings.Repeat("k", MaxKeyBytes+1)}); return err }, &ValidationError{Field: "key"}},
			{"requeue by key", func() error { _, err := q.Requeue(ctx, Selector{Key: "pending"}); return err }, &ValidationError{Field: "selector"}},
			{"purge all and IDs", func() error { _, err := q.Purge(ctx, Selector{All: true, IDs: []string{"1"}}); return err }, &ValidationError{Field: "selector"}},
			{"reschedule negative", func() error { _, err := q.Reschedule(ctx, Selector{Key: "pending"}, After(-1)); return err }, &ValidationError{Field: "delay"}},
			{"queue name with braces", newQueue("a{b}", Options{}), &ValidationError{Field: "name"}},
			{"queue name with space", newQueue("a b", Options{}), &ValidationError{Field: "name"}},
			{"queue name empty", newQueue("", Options{}), &ValidationError{Field: "name"}},
			{"queue name too long", newQueue(strings.Repeat("n", maxNameBytes+1), Options{}), &ValidationError{Field: "name"}},
			{"prefix with brace", newQueue("q", Options{Prefix: "x{"}), &ValidationError{Field: "prefix"}},
			{"negative max payload", newQueue("q", Options{MaxPayload: -1}), &ValidationError{Field: "options"}},
			{"reschedule empty selector", func() error { _, err := q.Reschedule(ctx, Selector{}, After(time.Minute)); return err }, &ValidationError{Field: "selector"}},
			{"lookup key with control char", func() error { _, err := lookup(ctx, q, "a\tb"); return err }, &ValidationError{Field: "key"}},
			{"cancel token with comma", func() error { _, err := q.Cancel(ctx, Selector{Key: "pending", Token: "a,b"}); return err }, &ValidationError{Field: "token"}},
			{"batch job with empty key", func() error {
				res, err := q.EnqueueBatch(ctx, []Job{{Key: ""}, {Key: "k", Token: "a,b"}})
				return errors.Join(err, res[0].Err, res[1].Err)
			}, &ValidationError{Field: "key"}},
			{"extend wrong fence", func() error {
				_, err := q.extend(ctx, &Task{lease: leaseRef{ID: flying.ID, Fence: flying.lease.Fence + 1}}, time.Minute)
				return err
			}, ErrLeaseLost},
			{"cancelled context", func() error { _, err := q.Enqueue(cancelled, Job{Key: "k"}); return err }, context.Canceled},
			{"cancelled context take", func() error { _, err := q.takeN(cancelled, 1); return err }, context.Canceled},
			{"redis down", func() error { _, err := qDown.Enqueue(ctx, Job{Key: "k"}); return err }, ErrRedis},
		}
		if len(rows) < 15 {
			t.Fatalf("only %d rows", len(rows))
		}
		for _, r := range rows {
			t.Run(strings.ReplaceAll(r.name, " ", "_"), func(t *testing.T) {
				before := snapshot(t, ctx, b)
				err := r.call()
				if !errors.Is(err, r.want) {
					t.Fatalf("err = %v, want %v", err, r.want)
				}
				if after := snapshot(t, ctx, b); after != before {
					t.Fatalf("state changed:\nbefore:\n%s\nafter:\n%s", before, after)
				}
			})
		}
	})
}

// Corrupt bytes planted in Redis give typed errors, never a panic, and
// never block the queue head.
func TestCorruptRecords(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		good := mustEnqueue(t, ctx, q, Job{Key: "good"})
		past, _ := q.o.Codec.EncodeTime(time.Now().Add(-time.Minute), 0)
		planted := map[string]string{
			"c1": "garbage",
			"c2": "0AAAAAA0,999,0,0;abc",                           // lengths past the end
			"c3": "0AAAAAA0,3,0,0;a\x01b",                          // key invalid in Go
			"c4": "0AAAAAA" + strings.Repeat("9", 40) + ",1,0,0;k", // huge number
			"c5": "0AAAAAA0,1,0,0;k",                               // not the key's digest
			"c6": "0AAAAA0,1,0,0;k",                                // digest too short
		}
		for id, v := range planted {
			b.Client.HSet(ctx, q.k.taskBucket(id), id, v)
			b.Client.ZAdd(ctx, q.k.due, redis.Z{Score: float64(past), Member: id})
		}
		bt, err := q.takeN(ctx, 10)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("take err = %v, want ErrCorrupt", err)
		}
		if len(bt.Tasks) != 1 || bt.Tasks[0].ID != good.ID {
			t.Fatalf("good task not delivered: %+v", bt.Tasks)
		}
		if bt.Corrupt != 6 {
			t.Fatalf("corrupt = %d, want 6 parked in dead", bt.Corrupt)
		}
		if n, err := b.Client.ZCard(ctx, q.k.inflight).Result(); err != nil || n != 1 {
			t.Fatalf("%d in flight (%v), want only the good task", n, err)
		}
		p, err := listDead(ctx, q, 0, 10)
		if err != nil || len(p.Tasks) != 6 {
			t.Fatalf("dead = %+v %v", p, err)
		}
		for _, d := range p.Tasks {
			if !errors.Is(d.Err, ErrCorrupt) {
				t.Fatalf("dead %s err %v", d.ID, d.Err)
			}
		}
		b.Client.HSet(ctx, q.k.idx, digest("bad"), "c9")
		b.Client.HSet(ctx, q.k.taskBucket("c9"), "c9", "1,2,3")
		if _, err := lookup(ctx, q, "bad"); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("lookup err = %v", err)
		}
		if n, err := q.Purge(ctx, Selector{All: true}); err != nil || n != 6 {
			t.Fatalf("purge %d %v", n, err)
		}
	})
}

func TestDecodeRecordNeverPanics(t *testing.T) {
	t.Parallel()
	ok := encodeRecord(record{attempt: 2, flags: flagSole, digest: digest("order:1"), key: "order:1", token: "tok", err: "e", payload: []byte("pp")})
	rec, err := decodeRecord(ok, 0)
	if err != nil || rec.key != "order:1" || rec.token != "tok" || rec.err != "e" || string(rec.payload) != "pp" || rec.attempt != 2 || rec.flags != flagSole {
		t.Fatalf("round trip: %+v %v", rec, err)
	}
	if _, err := decodeRecord(ok, 1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("payload over cap: %v", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		buf := []byte(ok)
		for range 1 + rng.IntN(4) {
			buf[rng.IntN(len(buf))] = byte(rng.IntN(256))
		}
		if rng.IntN(4) == 0 {
			buf = buf[:rng.IntN(len(buf))]
		}
		_, _ = decodeRecord(string(buf), 64) // must not panic
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(record{digest: digest("k"), key: "k", payload: []byte("x")}))
	f.Add("2AAAAAA0,99999999,0,0;")
	f.Fuzz(func(t *testing.T, s string) {
		if r, err := decodeRecord(s, 1<<20); err == nil && (r.key == "" || len(r.payload) > 1<<20) {
			t.Fatalf("accepted %q", s)
		}
	})
}

// TestValidationErrorIs: a refused input matches ErrInvalid, a target of
// its own Field or of no Field, not another Field, and unwraps to its cause.
func TestValidationErrorIs(t *testing.T) {
	t.Parallel()
	cause := errors.New("cause")
	err := fmt.Errorf("wrapped: %w", invalid("key", "length %d: %w", 0, cause))
	rows := []struct {
		name   string
		target error
		want   bool
	}{
		{"ErrInvalid", ErrInvalid, true},
		{"same field", &ValidationError{Field: "key"}, true},
		{"any field", &ValidationError{}, true},
		{"other field", &ValidationError{Field: "token"}, false},
		{"cause", cause, true},
		{"state sentinel", ErrNotFound, false},
	}
	for _, r := range rows {
		if got := errors.Is(err, r.target); got != r.want {
			t.Errorf("%s: errors.Is = %v, want %v", r.name, got, r.want)
		}
	}
	if want := "wrapped: delay: invalid key: length 0: cause"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}
