package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// writeAfterFirstSlice is a go-redis hook that, once the first ZRANGE
// of key has replied, runs write: a write landing between two slices.
type writeAfterFirstSlice struct {
	key   string
	write func(ctx context.Context) error
	done  atomic.Bool
	err   error
}

func (h *writeAfterFirstSlice) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *writeAfterFirstSlice) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if a := cmd.Args(); cmd.Name() == "zrange" && len(a) > 1 && a[1] == h.key && h.done.CompareAndSwap(false, true) {
			h.err = h.write(ctx)
		}
		return err
	}
}

func (h *writeAfterFirstSlice) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAuditWriteBetweenSlices: a set written to while audit reads it in
// slices (a live server) does not make a member a run of equal scores
// with itself. Members added before the next slice's offset push the end
// of the slice just read into the next one; a member read twice is
// counted once (it once reported "equal scores 999.5 (2 members)" of one
// member, and counted its fraction twice).
func TestAuditWriteBetweenSlices(t *testing.T) {
	t.Parallel()
	for _, add := range []int{1, 3} {
		t.Run(fmt.Sprint("add=", add), func(t *testing.T) {
			b := testredis.Mini(t)
			ctx := testredis.Ctx(t)
			key := b.Prefix + ":live"
			zs := make([]redis.Z, auditChunk+1)
			for i := range zs {
				zs[i] = redis.Z{Score: float64(i) + 0.5, Member: fmt.Sprintf("m%04d", i)}
			}
			if err := b.Client.ZAdd(ctx, key, zs...).Err(); err != nil {
				t.Fatal(err)
			}
			h := &writeAfterFirstSlice{key: key, write: func(ctx context.Context) error {
				for i := range add {
					if err := b.Client.ZAdd(ctx, key, redis.Z{Score: float64(-1 - i), Member: fmt.Sprint("new", i)}).Err(); err != nil {
						return err
					}
				}
				return nil
			}}
			b.Client.AddHook(h)
			k, err := auditOne(ctx, b.Client, key, 1024, 3)
			if err != nil || h.err != nil {
				t.Fatal(err, h.err)
			}
			if !h.done.Load() {
				t.Fatal("the write between slices never ran")
			}
			if k.TiesTotal != 0 || k.NonInteger != len(zs) {
				t.Errorf("%d distinct scores with a fraction: %d runs of equal scores %+v, %d non-integer; want none, %d",
					len(zs), k.TiesTotal, k.Ties, k.NonInteger, len(zs))
			}
		})
	}
}
