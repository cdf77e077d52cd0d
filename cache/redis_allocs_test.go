package cache

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// redisPathFixedAllocs bounds what a cart priced on the Redis path may
// allocate beyond go-redis's replies (a []string a command, a string a
// member): its tier copies (one slab), the pipeline and its command
// list, and little else (7 when this was written). Keys, arguments
// and commands are reused.
const redisPathFixedAllocs = 12

// redisPathRaceAllocs bounds what the race detector adds to a cart's
// allocations on average: sync.Pool drops a quarter of the scratches put
// back, and building one anew takes some 40 (a 150-line cart averaged
// 0 to 10 more in 30 runs).
const redisPathRaceAllocs = 24

// redisPathClusterAllocs bounds what go-redis's ClusterClient adds to a
// pipeline: it splits the commands by node (a map, a command slice and a
// goroutine a node, and the slot lookups), 34 at 20 lines and 40 at 150
// lines over 3 masters when this was written. The library's own share is
// the same as on one server, where the ceiling above is exact.
const redisPathClusterAllocs = 48

// TestAppendMatchCartRedisAllocs prices big carts on the Redis path
// (AppendMatchCart into a reused dst, no gifts) and checks that each
// allocates at most its replies (counted by a hook on another client)
// and redisPathFixedAllocs: nothing a line or a command. Not parallel:
// AllocsPerRun counts the process.
func TestAppendMatchCartRedisAllocs(t *testing.T) {
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		ps := bigCartPromos(100)
		if _, err := newCache(t, b, Options{}).Refresh(ctx, ps...); err != nil {
			t.Fatal(err)
		}
		for _, lines := range []int{20, 150} {
			t.Run(fmt.Sprintf("lines=%d", lines), func(t *testing.T) {
				qs := bigCarts(ps, 1, lines, 2)[0]
				replies := &countReplies{}
				counted := nearClient(t, b)
				counted.AddHook(replies)
				if _, err := newCacheOn(t, counted, b.Prefix).MatchCart(ctx, qs, MatchOptions{}); err != nil {
					t.Fatal(err)
				}
				c := newCache(t, b, Options{})
				buf, err := c.AppendMatchCart(ctx, nil, qs, MatchOptions{})
				if err != nil {
					t.Fatal(err)
				}
				var callErr error
				n := testing.AllocsPerRun(50, func() {
					buf, callErr = c.AppendMatchCart(ctx, buf[:0], qs, MatchOptions{})
				})
				if callErr != nil {
					t.Fatal(callErr)
				}
				for i, r := range buf {
					if r.Err != nil || r.Tier == nil {
						t.Fatalf("line %d: %+v", i, r)
					}
				}
				cmds, members := replies.cmds.Load(), replies.members.Load()
				max := float64(cmds + members + redisPathFixedAllocs)
				if raceEnabled {
					max += redisPathRaceAllocs
				}
				if _, ok := b.Client.(*redis.ClusterClient); ok {
					max += redisPathClusterAllocs
				}
				if n > max {
					t.Errorf("%.1f allocations a cart of %d lines (%d commands, %d members in replies), want ≤ %.0f", n, lines, cmds, members, max)
				}
				t.Logf("%.1f allocations a cart of %d lines (%d commands, %d members)", n, lines, cmds, members)
			})
		}
	})
}

// countReplies is a hook counting the ZRANGE commands a client's
// pipelines send and the members their replies hold.
type countReplies struct {
	cmds, members atomic.Int64
}

func (h *countReplies) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *countReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *countReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if c, ok := c.(*redis.StringSliceCmd); ok && c.Name() == "zrange" {
				h.cmds.Add(1)
				h.members.Add(int64(len(c.Val())))
			}
		}
		return err
	}
}
