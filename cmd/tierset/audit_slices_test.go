package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// writeAfterFirstSlice is a go-redis hook that, once the first ZRANGE
// of key has replied, runs write: a write landing between two slices.
// With name set, it waits for that command of key instead, sent alone or
// in a pipeline.
type writeAfterFirstSlice struct {
	key   string
	name  string // default "zrange"
	write func(ctx context.Context) error
	done  atomic.Bool
	err   error
}

func (h *writeAfterFirstSlice) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *writeAfterFirstSlice) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.after(ctx, cmd)
		return err
	}
}

func (h *writeAfterFirstSlice) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.after(ctx, cmd)
		}
		return err
	}
}

func (h *writeAfterFirstSlice) after(ctx context.Context, cmd redis.Cmder) {
	name := h.name
	if name == "" {
		name = "zrange"
	}
	if a := cmd.Args(); cmd.Name() == name && len(a) > 1 && a[1] == h.key && h.done.CompareAndSwap(false, true) {
		h.err = h.write(ctx)
	}
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

// TestAuditKeyRetyped: a key that SCAN listed as a sorted set and that a
// write replaced by another type before or while audit read it is
// skipped as gone (like one deleted meanwhile), not an error that ends
// the whole audit without a report.
func TestAuditKeyRetyped(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		members int
		hookOn  string // the command after which the key becomes a string; "": before ZCARD
	}{
		{"before ZCARD", 10, ""},
		{"before the first slice", 10, "ttl"},
		{"between slices", auditChunk + 1, "zrange"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := testredis.Mini(t)
			ctx := testredis.Ctx(t)
			key := b.Prefix + ":retyped"
			zs := make([]redis.Z, c.members)
			for i := range zs {
				zs[i] = redis.Z{Score: float64(i), Member: fmt.Sprint(i)}
			}
			if err := b.Client.ZAdd(ctx, key, zs...).Err(); err != nil {
				t.Fatal(err)
			}
			retype := func(ctx context.Context) error { return b.Client.Set(ctx, key, "now a string", 0).Err() }
			h := &writeAfterFirstSlice{key: key, name: c.hookOn, write: retype}
			if c.hookOn == "" {
				h.done.Store(true)
				h.err = retype(ctx)
			}
			b.Client.AddHook(h)
			_, err := auditOne(ctx, b.Client, key, 1024, 3)
			if !h.done.Load() || h.err != nil {
				t.Fatalf("the write never ran: %v", h.err)
			}
			if !errors.Is(err, errAuditGone) {
				t.Fatalf("auditOne of a key retyped %s: %v, want errAuditGone", c.name, err)
			}
		})
	}
}
