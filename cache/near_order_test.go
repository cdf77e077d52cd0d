package cache

import (
	"bytes"
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
	for _, tc := range []struct {
		name       string
		holdInvals bool
	}{{"invalidation delivered", false}, {"invalidation held", true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := testredis.Redis(t)
			px, err := faultproxy.Start(b.Client.(*redis.Client).Options().Addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = px.Close() })
			client := redis.NewClient(&redis.Options{Addr: px.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = client.Close() })
			ctx := testCtx(t)
			writer := newCache(t, b, Options{})
			old, cur := stalePromotion(2), stalePromotion(3)
			old.Revision, cur.Revision = 2, 3
			oldV, curV := mustVersion(t, old), mustVersion(t, cur)
			if _, err := writer.Refresh(ctx, old); err != nil {
				t.Fatal(err)
			}
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
