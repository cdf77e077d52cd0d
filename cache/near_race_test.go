package cache

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// holdReply holds the first pipeline that reads key, once armed, after
// its reply is in hand and until release closes: a ladder read whose
// reply has arrived while the promotion changes.
type holdReply struct {
	key     string
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
}

func (h *holdReply) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *holdReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *holdReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if h.reads(cmds) && h.armed.CompareAndSwap(true, false) {
			close(h.held)
			select {
			case <-h.release:
			case <-ctx.Done():
			}
		}
		return err
	}
}

func (h *holdReply) reads(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if a := c.Args(); c.Name() == "zrange" && len(a) > 1 && a[1] == h.key {
			return true
		}
	}
	return false
}

// TestNearReadRacingInvalidation: a near cache's ladder read gets the old
// version's reply, then the promotion is refreshed and its invalidation
// arrives before the read installs: the read answers from what it read
// (it began before the write), installs nothing, and the next read is
// served the new version. MaxStaleness is a minute, so only the
// generation check keeps the old ladder out.
func TestNearReadRacingInvalidation(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		writer := newCache(t, b, Options{})
		old, next := versioned("old", 2, 4, 6), versioned("new", 3, 5, 7)
		rep, err := writer.Refresh(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		oldV := rep.Promotions[0].Version
		client := nearClient(t, b)
		hold := &holdReply{key: writer.tiersKey(old.ID), held: make(chan struct{}), release: make(chan struct{})}
		client.AddHook(hold)
		nc := newNearCache(t, client, b.Prefix, Options{NearCache: &NearCacheOptions{MaxStaleness: time.Minute}})

		hold.armed.Store(true)
		got := make(chan Result, 1)
		go func() {
			r, _ := nc.Match(ctx, QuantityQuery(old.ID, 4), MatchOptions{})
			got <- r
		}()
		select {
		case <-hold.held:
		case <-time.After(10 * time.Second):
			t.Fatal("the ladder read was not sent in 10 s")
		}
		before := fillGen(nc.near, old.ID)
		rep, err = writer.Refresh(ctx, next)
		if err != nil {
			close(hold.release)
			t.Fatal(err)
		}
		newV := rep.Promotions[0].Version
		deadline := time.Now().Add(5 * time.Second)
		for fillGen(nc.near, old.ID) == before {
			if time.Now().After(deadline) {
				close(hold.release)
				t.Fatal("no invalidation 5 s after the refresh")
			}
			time.Sleep(time.Millisecond)
		}
		close(hold.release)
		r := <-got
		if r.Err != nil || r.Version != oldV {
			t.Fatalf("the racing read: version %q err %v, want the old version %q it read", r.Version, r.Err, oldV)
		}
		if l, _ := nc.near.get(old.ID, time.Now().UnixNano()); l != nil {
			t.Fatalf("the racing read installed version %q after its invalidation", l.version)
		}
		if r, err := nc.Match(ctx, QuantityQuery(old.ID, 4), MatchOptions{}); err != nil || r.Version != newV {
			t.Fatalf("next read: version %q err %v %v, want %q", r.Version, err, r.Err, newV)
		}
	})
}

// fillGen is the generation of id's reads in flight (0 when none are).
func fillGen(nc *near, id string) uint64 {
	sh := nc.shard(nc.hash(id))
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	if k := sh.fills[id]; k != nil {
		return k.gen
	}
	return 0
}
