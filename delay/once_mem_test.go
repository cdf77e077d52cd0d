package delay

import (
	"fmt"
	"testing"

	"github.com/tierset/tierset/internal/testredis"
)

// TestMemoryPerKeptReply: what a kept reply holds while Options.ReplyTTL
// runs, by INFO used_memory on a private redis-server, with the replies
// and after dropping them (so the tasks themselves cancel out): a
// one-job Enqueue, a 250-job batch call, a 100-task Take and a 100-lease
// ack. The budgets are the figures measured on Redis 7.0 plus a quarter.
func TestMemoryPerKeptReply(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: fills a private redis-server with 2000 kept replies per case")
	}
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
