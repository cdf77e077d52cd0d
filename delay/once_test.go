package delay

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// TestReplyKeptExactly: a call sent again under the same request ID gets
// the first run's reply, value for value and type for type (integers to
// 2^53, strings with zero bytes, nested arrays, nil), without running the
// body again; an error reply is not kept, so its call runs again. Each
// way of keeping (rp_enc, rp_codes, rp_ints, with their fallbacks) is
// covered, on every backend.
func TestReplyKeptExactly(t *testing.T) {
	t.Parallel()
	const counted = "local n = redis.call('INCR', KEYS[1])\n" +
		"if ARGV[1] == 'err' then return redis.error_reply('refused') end\n"
	cases := []struct {
		name, body, keep, grow string
		mark                   byte // how the kept reply starts: which way kept it
	}{
		{"generic", `local r = {n, 9007199254740992, -3, 'a\0b', string.rep('y', 150) .. '\0z', '', {1, 'two', {3, false}}, false, true, 1.9, -1.9}
for i = 1, 1200 do r[#r + 1] = (i % 2 == 0) and i * 7 or ('s' .. i) end
return r`, "", "", '*'},
		{"codes", `local r = {n}
for i = 1, 999 do r[#r + 1] = i % 11 end
return r`, "rp_codes", "rp_uncodes", '#'},
		{"codes falling back", `return {n, 300, 'x'}`, "rp_codes", "rp_uncodes", '*'},
		{"ints", `local r = {n, 9007199254740992, -5}
for i = 1, 998 do r[#r + 1] = 1839268000000000 + i end
r[#r + 1] = 9007199254740991
r[#r + 1] = 7
return r`, "rp_ints", "rp_unints", '+'},
		{"take, nothing due", `return {0, n, '', '1796158162753', 0, 0, ''}`, "take_keep", "take_grow", '0'},
		{"take, lost records", `return {0, n, '1839265927938048', '', {2, 1}, '17', ''}`, "take_keep", "take_grow", '0'},
		{"take, paused", `return {14, n, '1839265927938048', '', 0, 0, '1796158162000'}`, "take_keep", "take_grow", '1'},
		{"take, waiting for a token", `return {0, n, '1839265927938048', '', 0, 0, '1796158162753'}`, "take_keep", "take_grow", '0'},
		{"ints falling back", `return {n, 5, {1, 'dup', 'pending', '123'}, {6}}`, "rp_ints", "rp_unints", '*'},
	}
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				s := redis.NewScript(testOnce(t, counted+tc.body, tc.keep, tc.grow))
				counter := q.k.rp + "test:" + tc.name
				req := q.req.next()
				first, err := q.mutate(ctx, s, "test", req, []string{counter}, "ok")
				if err != nil {
					t.Fatal(err)
				}
				again, err := q.mutate(ctx, s, "test", req, []string{counter}, "ok")
				if err != nil {
					t.Fatal(err)
				}
				hash, field := q.k.replyAt(req)
				if kept := b.Client.HGet(ctx, hash, field).Val(); kept == "" || kept[0] != tc.mark {
					t.Fatalf("kept reply starts %.1q, want %q", kept, tc.mark)
				}
				if !reflect.DeepEqual(first, again) {
					t.Fatalf("kept reply differs:\nfirst %#v\nagain %#v", first, again)
				}
				if b.Client.Get(ctx, counter).Val() != "1" {
					t.Fatalf("body ran %s times, want once", b.Client.Get(ctx, counter).Val())
				}
				if len(first) < 3 {
					t.Fatalf("short reply %#v", first)
				}
				errReq := q.req.next()
				for range 2 {
					if _, err := q.mutate(ctx, s, "test", errReq, []string{counter}, "err"); err == nil {
						t.Fatal("error reply: no error")
					}
				}
				if got := b.Client.Get(ctx, counter).Val(); got != "3" {
					t.Fatalf("an error reply was kept: body ran %s times in all, want 3", got)
				}
			})
		}
	})
}

// TestReplyIntsOlderForm: a reply an older version kept of enqueue_batch
// ('=' and every integer whole) is what a call re-sent across an upgrade
// gets back, read by this version's rp_unints, without the body running.
func TestReplyIntsOlderForm(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		ctx := testCtx(t)
		q := newQ(t, b, Options{})
		s := redis.NewScript(testOnce(t, "return {redis.call('INCR', KEYS[1])}", "rp_ints", "rp_unints"))
		counter := q.k.rp + "test:older"
		req := q.req.next()
		hash, field := q.k.replyAt(req)
		if err := b.Client.HSet(ctx, hash, field, "=:1796158162753;:41;:1839268000000001;:-3;:1839268000000000;").Err(); err != nil {
			t.Fatal(err)
		}
		got, err := q.mutate(ctx, s, "test", req, []string{counter}, "ok")
		if err != nil {
			t.Fatal(err)
		}
		want := reply{int64(1796158162753), int64(41), int64(1839268000000001), int64(-3), int64(1839268000000000)}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("reply %#v, want %#v", got, want)
		}
		if n := b.Client.Exists(ctx, counter).Val(); n != 0 {
			t.Fatal("the body ran for a call whose reply was kept")
		}
	})
}

// TestReplySweptByTime: kept replies carry no TTL (so no volatile-*
// policy can evict them); the reply index holds each hash until its latest
// reply's ReplyTTL has passed by Redis TIME, and the calls that file new
// hashes delete the ones past it, two each, whichever Queue made them.
func TestReplySweptByTime(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{ReplyTTL: time.Second}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		hashes := func() []string {
			t.Helper()
			keys, err := testredis.Keys(ctx, b.Client, q.k.rp)
			if err != nil {
				t.Fatal(err)
			}
			var hs []string
			for _, k := range keys {
				if k != q.k.rpIdx {
					hs = append(hs, k)
				}
			}
			sort.Strings(hs)
			return hs
		}
		for i := range 3 * replyBucket {
			mustEnqueue(t, ctx, q, Job{Key: "k" + strconv.Itoa(i)})
		}
		old := hashes()
		if len(old) < 2 {
			t.Fatalf("%d reply hashes after %d calls", len(old), 3*replyBucket)
		}
		for _, h := range old {
			if ttl := b.Client.PTTL(ctx, h).Val(); ttl != -1*time.Nanosecond && ttl != -1*time.Millisecond {
				t.Fatalf("reply hash %s has a TTL (%v): a volatile-* policy could evict it", h, ttl)
			}
		}
		if n := b.Client.ZCard(ctx, q.k.rpIdx).Val(); n != int64(len(old)) {
			t.Fatalf("index holds %d hashes, want %d", n, len(old))
		}
		// wait for Redis TIME to pass the latest end in the index
		last := b.Client.ZRangeWithScores(ctx, q.k.rpIdx, -1, -1).Val()[0].Score
		setTime(b, time.UnixMilli(int64(last)+1))
		deadline := time.Now().Add(10 * time.Second)
		for {
			now, err := b.Client.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			if float64(now.UnixMilli()) > last {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Redis TIME %v never passed %v", now, last)
			}
		}
		// another Queue of the same queue (a new nonce, as a new process
		// has) files new hashes, and each sweeps up to two old ones
		q2 := newQ(t, b, Options{ReplyTTL: time.Second})
		for i := range 2 * replyBucket {
			mustEnqueue(t, ctx, q2, Job{Key: "n" + strconv.Itoa(i)})
		}
		left := map[string]bool{}
		for _, h := range hashes() {
			left[h] = true
		}
		for _, h := range old {
			if left[h] {
				t.Errorf("reply hash %s outlived its ReplyTTL by three new hashes", h)
			}
		}
		if n := b.Client.ZCard(ctx, q.k.rpIdx).Val(); n != int64(len(left)) {
			t.Errorf("index holds %d hashes, %d are left", n, len(left))
		}
	})
}

// TestRepairFilesReplies: kept-reply hashes whose index entry was lost
// (a stray DEL) would never be swept; Repair files them again, and on an
// intact index files nothing.
func TestRepairFilesReplies(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		obs := &lossRecorder{}
		q := newQ(t, b, Options{Observer: obsOf(obs)})
		for i := range 2 * replyBucket {
			mustEnqueue(t, ctx, q, Job{Key: "k" + strconv.Itoa(i)})
		}
		if res, err := q.Repair(ctx); err != nil || res.RepliesFiled != 0 {
			t.Fatalf("repair with the index intact: %+v %v, want nothing filed", res, err)
		}
		hashes := b.Client.ZCard(ctx, q.k.rpIdx).Val()
		if err := b.Client.Del(ctx, q.k.rpIdx).Err(); err != nil {
			t.Fatal(err)
		}
		res, err := q.Repair(ctx)
		if err != nil || int64(res.RepliesFiled) != hashes || hashes < 2 {
			t.Fatalf("repair after the index was lost: %+v %v, want %d (>= 2) filed", res, err, hashes)
		}
		// the repair's own reply joined one of them
		if n := b.Client.ZCard(ctx, q.k.rpIdx).Val(); n != hashes && n != hashes+1 {
			t.Errorf("index holds %d hashes, want %d", n, hashes)
		}
		if obs.Warnings.Load() != 1 {
			t.Errorf("%d warnings, want 1", obs.Warnings.Load())
		}
	})
}

// TestReplyTTLOption: bad values are refused, zero is the default.
func TestReplyTTLOption(t *testing.T) {
	t.Parallel()
	b := testredis.Mini(t)
	for _, d := range []time.Duration{-time.Millisecond, time.Microsecond} {
		if _, err := New(b.Client, "q", Options{ReplyTTL: d}); !errors.Is(err, &ValidationError{Field: "options"}) {
			t.Fatalf("ReplyTTL %v: %v, want invalid options", d, err)
		}
	}
	q, err := New(b.Client, "q", Options{})
	if err != nil || q.Options().ReplyTTL != defaultReplyTTL || q.keepMs != "30000" {
		t.Fatalf("default: %v %v %q", q.Options().ReplyTTL, err, q.keepMs)
	}
}

// TestMemoryPerKeptReply: what a kept reply holds while Options.ReplyTTL
// runs, by INFO used_memory on a private redis-server, with the replies
// and after dropping them (so the tasks themselves cancel out): a
// one-job Enqueue, a 250-job batch call, a 100-task Take and a 100-lease
// ack. The budgets are the figures measured on Redis 7.0 plus a quarter.
func TestMemoryPerKeptReply(t *testing.T) {
	t.Parallel()
	r := testredis.StartServer(t)
	ctx := testCtx(t)
	c := r.Client(nil)
	q, err := New(c, "kept", Options{})
	if err != nil {
		t.Fatal(err)
	}
	const calls = 2000
	var leases []*Task
	cases := []struct {
		name   string
		budget float64 // B per kept reply
		call   func(i int)
	}{
		{"enqueue", 57, func(i int) {
			mustEnqueue(t, ctx, q, Job{Key: fmt.Sprintf("order:2024-12-01:%08d", i)})
		}},
		{"enqueue batch of 250", 6600, func(i int) {
			if i >= 200 {
				return
			}
			jobs := make([]Job, 250)
			for k := range jobs {
				jobs[k] = Job{Key: fmt.Sprintf("order:2024-12-02:%08d", i*250+k)}
			}
			if _, err := q.EnqueueBatch(ctx, jobs); err != nil {
				t.Fatal(err)
			}
		}},
		{"take of 100", 3400, func(i int) {
			if i >= 200 {
				return
			}
			leases = append(leases, mustTake(t, ctx, q, 100).Tasks...)
		}},
		{"ack of 100", 210, func(i int) {
			if i >= 200 {
				return
			}
			mustAckMany(t, ctx, q, leases[i*100:(i+1)*100])
		}},
	}
	for _, tc := range cases {
		dropReplies(t, ctx, c, q)
		for i := range calls {
			tc.call(i)
		}
		keys, err := testredis.Keys(ctx, c, q.k.rp)
		if err != nil {
			t.Fatal(err)
		}
		replies := int64(0) // fields: a hash keeps the replies of up to replyBucket calls
		for _, k := range keys {
			replies += c.HLen(ctx, k).Val()
		}
		with := usedMemory(t, ctx, c)
		dropReplies(t, ctx, c, q)
		per := float64(with-usedMemory(t, ctx, c)) / float64(replies)
		t.Logf("%s: %.0f B per kept reply (%d replies in %d hashes)", tc.name, per, replies, len(keys))
		if per > tc.budget {
			t.Errorf("%s: %.0f B per kept reply, budget %.0f", tc.name, per, tc.budget)
		}
	}
}
