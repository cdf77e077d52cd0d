package cache

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// TestFaultNearOldReplyAfterNewer: read A reaches Redis before a Refresh
// elsewhere (revision 2) and its reply is held; the Refresh writes
// revision 3; read B, sent after it, is answered revision 3; then A's
// reply arrives. No read that starts after B returned may answer revision
// 2: a read that started before a write never installs the old ladder
// over the new one, and the process never answers a revision older than
// one it already answered. Run with the invalidation of the Refresh
// delivered as it comes, and held until after A's reply.
func TestFaultNearOldReplyAfterNewer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		holdInvals bool
	}{{"invalidation delivered", false}, {"invalidation held", true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newOrderFixture(t)
			b, px, client, ctx, writer := f.b, f.px, f.client, f.ctx, f.writer
			cur, oldV, curV := f.cur, f.oldV, f.curV
			// MaxStaleness a minute: no re-validation pass hides the order.
			nc := newNearCache(t, client, b.Prefix, Options{NearCache: &NearCacheOptions{MaxStaleness: time.Minute}})
			read := func() Result {
				r, err := nc.Match(ctx, QuantityQuery("s", 4), MatchOptions{})
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				return r
			}

			holdA := px.HoldNext(faultproxy.Contains(nc.tiersKey("s")))
			doneA := make(chan Result, 1)
			go func() {
				r, _ := nc.Match(ctx, QuantityQuery("s", 4), MatchOptions{})
				doneA <- r
			}()
			awaitHeld(t, holdA, "read A's reply")
			var holdInval *faultproxy.Hold
			if tc.holdInvals {
				key := []byte(nc.tiersKey("s"))
				holdInval = px.HoldNextReply(func(b []byte) bool {
					return bytes.Contains(b, []byte(invalidateChannel)) && bytes.Contains(b, key)
				})
				t.Cleanup(holdInval.Release)
			}
			if _, err := writer.Refresh(ctx, cur); err != nil {
				t.Fatal(err)
			}
			if holdInval != nil {
				awaitHeld(t, holdInval, "the invalidation")
			}
			if r := read(); r.Version != curV {
				t.Fatalf("read B after the Refresh: version %q (err %v), want revision 3's %q", r.Version, r.Err, curV)
			}
			holdA.Release()
			if r := <-doneA; r.Version != oldV {
				t.Fatalf("read A: version %q (err %v), want revision 2's %q (it reached Redis first)", r.Version, r.Err, oldV)
			}
			check := func(when string) {
				t.Helper()
				for k := 0; k < 20; k++ {
					if r := read(); r.Version != curV {
						t.Fatalf("%s, read %d: version %q (err %v), want revision 3's %q: an older revision after a newer one",
							when, k, r.Version, r.Err, curV)
					}
				}
			}
			check("after read A's old reply arrived")
			if holdInval != nil {
				holdInval.Release()
				check("after the invalidation arrived")
			}
		})
	}
}

// awaitHeld waits, up to 5 s, until h holds a reply.
// orderFixture is what the ordering tests share: a client through a fault
// proxy, a writer on the backend itself, and promotion "s" stored at
// revision 2 (old) whose revision 3 (cur) the test publishes.
type orderFixture struct {
	b          *testredis.Backend
	px         *faultproxy.Proxy
	client     *redis.Client
	ctx        context.Context
	writer     *Cache
	cur        gradient.Promotion
	oldV, curV string
}

func newOrderFixture(t *testing.T) *orderFixture {
	t.Helper()
	f := &orderFixture{b: testredis.Redis(t), ctx: testCtx(t)}
	px, err := faultproxy.Start(f.b.Client.(*redis.Client).Options().Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close() })
	f.px = px
	f.client = redis.NewClient(&redis.Options{Addr: px.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = f.client.Close() })
	f.writer = newCache(t, f.b, Options{})
	old, cur := stalePromotion(2), stalePromotion(3)
	old.Revision, cur.Revision = 2, 3
	f.cur, f.oldV, f.curV = cur, mustVersion(t, old), mustVersion(t, cur)
	if _, err := f.writer.Refresh(f.ctx, old); err != nil {
		t.Fatal(err)
	}
	return f
}

func awaitHeld(t *testing.T, h *faultproxy.Hold, what string) {
	t.Helper()
	select {
	case <-h.Held():
	case <-time.After(5 * time.Second):
		t.Fatalf("%s not held in 5 s", what)
	}
}

func mustVersion(t *testing.T, p gradient.Promotion) string {
	t.Helper()
	v, err := Version(&p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// holdSend blocks, once armed, the first command that reads key with
// ZRANGE ... BYSCORE (a Redis-path line) before it is sent, until release
// closes: a Redis-path read that chose its path before tracking came up
// and reaches Redis late.
type holdSend struct {
	key     string
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
}

func (h *holdSend) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdSend) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.wait(ctx, []redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}
func (h *holdSend) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.wait(ctx, cmds)
		return next(ctx, cmds)
	}
}

func (h *holdSend) wait(ctx context.Context, cmds []redis.Cmder) {
	for _, c := range cmds {
		a := c.Args()
		if c.Name() != "zrange" || len(a) < 5 || a[1] != h.key || a[4] != "byscore" {
			continue
		}
		if h.armed.CompareAndSwap(true, false) {
			close(h.held)
			select {
			case <-h.release:
			case <-ctx.Done():
			}
		}
		return
	}
}

// TestFaultNearRedisPathNewerAnswer: a read R takes the Redis path
// (tracking not yet up) and reaches Redis late; meanwhile tracking comes
// up and a ladder read F is sent (its reply, revision 2, held), the
// promotion is refreshed to revision 3 (its invalidation held), and R is
// answered revision 3. When F's reply arrives it must not install
// revision 2: a read that starts after R returned must not be answered an
// older revision than R was, whichever path R took.
func TestFaultNearRedisPathNewerAnswer(t *testing.T) {
	t.Parallel()
	f := newOrderFixture(t)
	b, px, client, ctx, writer := f.b, f.px, f.client, f.ctx, f.writer
	cur, oldV, curV := f.cur, f.oldV, f.curV
	// Tracking is held down (its SUBSCRIBE confirmation held) while R
	// picks its path.
	holdSub := px.HoldNextReply(func(b []byte) bool {
		return bytes.Contains(b, []byte("subscribe")) && bytes.Contains(b, []byte(invalidateChannel))
	})
	t.Cleanup(holdSub.Release)
	hs := &holdSend{held: make(chan struct{}), release: make(chan struct{})}
	client.AddHook(hs)
	nc, err := New(client, Options{Prefix: b.Prefix, NearCache: &NearCacheOptions{MaxStaleness: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	hs.key = nc.tiersKey("s")
	hs.armed.Store(true)
	t.Cleanup(func() {
		select {
		case <-hs.release:
		default:
			close(hs.release)
		}
	})
	doneR := make(chan Result, 1)
	go func() {
		r, _ := nc.Match(ctx, QuantityQuery("s", 4), MatchOptions{})
		doneR <- r
	}()
	select {
	case <-hs.held:
	case <-time.After(5 * time.Second):
		t.Fatal("read R did not take the Redis path in 5 s")
	}
	awaitHeld(t, holdSub, "the tracking SUBSCRIBE confirmation")
	holdSub.Release()
	deadline := time.Now().Add(5 * time.Second)
	for !nc.NearStats().Tracking {
		if time.Now().After(deadline) {
			t.Fatal("tracking not up 5 s after its confirmation")
		}
		time.Sleep(time.Millisecond)
	}

	holdF := px.HoldNext(faultproxy.Contains(nc.tiersKey("s")))
	doneF := make(chan Result, 1)
	go func() {
		r, _ := nc.Match(ctx, QuantityQuery("s", 4), MatchOptions{})
		doneF <- r
	}()
	awaitHeld(t, holdF, "ladder read F's reply")
	key := []byte(nc.tiersKey("s"))
	holdInval := px.HoldNextReply(func(b []byte) bool {
		return bytes.Contains(b, []byte(invalidateChannel)) && bytes.Contains(b, key)
	})
	t.Cleanup(holdInval.Release)
	if _, err := writer.Refresh(ctx, cur); err != nil {
		t.Fatal(err)
	}
	awaitHeld(t, holdInval, "the invalidation")
	close(hs.release)
	if r := <-doneR; r.Version != curV {
		t.Fatalf("read R: version %q (err %v), want revision 3's %q", r.Version, r.Err, curV)
	}
	holdF.Release()
	if r := <-doneF; r.Version != oldV {
		t.Fatalf("read F: version %q (err %v), want revision 2's %q (it reached Redis first)", r.Version, r.Err, oldV)
	}
	for k := 0; k < 20; k++ {
		r, err := nc.Match(ctx, QuantityQuery("s", 4), MatchOptions{})
		if err != nil || r.Version != curV {
			t.Fatalf("read %d after R answered revision 3: version %q (err %v %v), want %q: an older revision after a newer one",
				k, r.Version, err, r.Err, curV)
		}
	}
}

// TestFaultNearLadderInfoNewerAnswer: a near cache holds revision 2; a
// Refresh elsewhere writes revision 3 and its invalidation is held. Once
// Ladder or Info of the same Cache has answered revision 3, Match must
// not answer revision 2 from the held ladder.
func TestFaultNearLadderInfoNewerAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		read func(ctx context.Context, c *Cache) (string, error)
	}{
		{"Ladder", func(ctx context.Context, c *Cache) (string, error) {
			l, err := c.Ladder(ctx, "s")
			return l.Version, err
		}},
		{"Info", func(ctx context.Context, c *Cache) (string, error) {
			in, err := c.Info(ctx, "s")
			return in.Version, err
		}},
		{"List", func(ctx context.Context, c *Cache) (string, error) {
			ins, err := c.List(ctx)
			if err != nil || len(ins) != 1 {
				return "", fmt.Errorf("List: %d promotions, err %v", len(ins), err)
			}
			return ins[0].Version, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newOrderFixture(t)
			b, px, client, ctx, writer := f.b, f.px, f.client, f.ctx, f.writer
			cur, curV := f.cur, f.curV
			nc := newNearCache(t, client, b.Prefix, Options{NearCache: &NearCacheOptions{MaxStaleness: time.Minute}})
			waitHeld(t, nc)
			key := []byte(nc.tiersKey("s"))
			holdInval := px.HoldNextReply(func(b []byte) bool {
				return bytes.Contains(b, []byte(invalidateChannel)) && bytes.Contains(b, key)
			})
			t.Cleanup(holdInval.Release)
			if _, err := writer.Refresh(ctx, cur); err != nil {
				t.Fatal(err)
			}
			awaitHeld(t, holdInval, "the invalidation")
			if v, err := tc.read(ctx, nc); err != nil || v != curV {
				t.Fatalf("%s: version %q, err %v, want revision 3's %q", tc.name, v, err, curV)
			}
			if r, err := nc.Match(ctx, QuantityQuery("s", 4), MatchOptions{}); err != nil || r.Version != curV {
				t.Fatalf("Match after %s answered revision 3: version %q (err %v %v), want %q", tc.name, r.Version, err, r.Err, curV)
			}
		})
	}
}
