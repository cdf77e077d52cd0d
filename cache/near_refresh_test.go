package cache

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// rereadCheck matches the version check of a re-read of key's promotion
// (HGET meta version and ZCARD tiers in one pipeline).
func rereadCheck(tiersKey string) faultproxy.Match {
	key := bytes.ToLower([]byte(tiersKey))
	return func(req []byte) bool {
		req = bytes.ToLower(req)
		return bytes.Contains(req, []byte("zcard")) && bytes.Contains(req, key)
	}
}

// flightOf returns the re-read in flight of id, nil when none is.
func flightOf(nc *near, id string) *refreshFlight {
	sh := nc.shard(nc.hash(id))
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	return sh.flights[id]
}

// waitFor polls cond every millisecond, up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFaultNearRereadCoalesced: a held ladder is invalidated by a write
// elsewhere and its background re-read's reply is held past staleServe,
// so carts can no longer be answered from the held ladder. Eight carts
// asking at once all wait for that one re-read: one version check and
// one ladder read in the process, and each answers the new version.
func TestFaultNearRereadCoalesced(t *testing.T) {
	t.Parallel()
	f := newOrderFixture(t)
	ctx := f.ctx
	// MaxStaleness 3 s: the background re-read gives up after
	// MaxStaleness, and the carts then read on their own. The test holds
	// the reply for staleServe (1 s here) and until eight goroutines have
	// joined, which a busy machine can stretch past a shorter bound.
	nc := newNearCache(t, f.client, f.b.Prefix, Options{NearCache: &NearCacheOptions{MaxStaleness: 3 * time.Second}})
	waitHeld(t, nc)
	before := nc.NearStats()
	hold := f.px.HoldNext(rereadCheck(nc.tiersKey("s")))
	t.Cleanup(hold.Release)
	if _, err := f.writer.Refresh(ctx, f.cur); err != nil {
		t.Fatal(err)
	}
	awaitHeld(t, hold, "the re-read's version check")
	fl := flightOf(nc.near, "s")
	if fl == nil {
		t.Fatal("no re-read in flight while its reply is held")
	}
	waitFor(t, "the held ladder past staleServe", func() bool {
		_, st := nc.near.lookup("s", time.Now().UnixNano())
		return st == nearReread
	})
	const carts = 8
	gate := make(chan struct{})
	got := make(chan Result, carts)
	var wg sync.WaitGroup
	for range carts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			r, _ := nc.Match(ctx, QuantityQuery("s", 4), MatchOptions{})
			got <- r
		}()
	}
	close(gate)
	waitFor(t, "every cart waiting for the re-read", func() bool { return fl.joined.Load() == carts })
	hold.Release()
	wg.Wait()
	close(got)
	for r := range got {
		if r.Version != f.curV {
			t.Errorf("cart answered version %q (err %v), want the new %q", r.Version, r.Err, f.curV)
		}
	}
	after := nc.NearStats()
	if n := after.Rereads - before.Rereads; n != 1 {
		t.Errorf("%d re-reads for one invalidation and %d carts, want 1", n, carts)
	}
	if n := after.LadderReads - before.LadderReads; n != 1 {
		t.Errorf("%d ladder reads for one invalidation and %d carts, want 1", n, carts)
	}
}

// TestFaultNearServedDuringReread: while the re-read after an
// invalidation is held, carts are answered from the held ladder with no
// read of their own; once the process has answered the new version by
// another path (Info) or by the re-read landing, no cart is answered the
// old one again.
func TestFaultNearServedDuringReread(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		newer func(t *testing.T, ctx context.Context, nc *Cache, hold *faultproxy.Hold, curV string)
	}{
		{"re-read lands", func(t *testing.T, ctx context.Context, nc *Cache, hold *faultproxy.Hold, curV string) {
			hold.Release()
			waitVersion(t, nc, curV)
		}},
		{"Info answers first", func(t *testing.T, ctx context.Context, nc *Cache, hold *faultproxy.Hold, curV string) {
			in, err := nc.Info(ctx, "s")
			if err != nil || in.Version != curV {
				t.Fatalf("Info: version %q, err %v, want %q", in.Version, err, curV)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newOrderFixture(t)
			ctx := f.ctx
			// MaxStaleness a minute: staleServe is 1 s, longer than the
			// reads below take.
			nc := newNearCache(t, f.client, f.b.Prefix, Options{NearCache: &NearCacheOptions{MaxStaleness: time.Minute}})
			waitHeld(t, nc)
			hold := f.px.HoldNext(rereadCheck(nc.tiersKey("s")))
			t.Cleanup(hold.Release)
			if _, err := f.writer.Refresh(ctx, f.cur); err != nil {
				t.Fatal(err)
			}
			awaitHeld(t, hold, "the re-read's version check")
			before := nc.NearStats()
			for k := 0; k < 20; k++ {
				r, err := nc.Match(ctx, QuantityQuery("s", 4), MatchOptions{})
				if err != nil || r.Version != f.oldV {
					// Past staleServe on a stalled machine a cart waits for
					// the re-read; it must never get an error.
					t.Logf("read %d during the re-read: version %q (err %v %v)", k, r.Version, err, r.Err)
					break
				}
			}
			if st := nc.NearStats(); st.LadderReads != before.LadderReads {
				t.Fatalf("%d ladder reads while the re-read was held, want 0", st.LadderReads-before.LadderReads)
			}
			tc.newer(t, ctx, nc, hold, f.curV)
			for k := 0; k < 20; k++ {
				r, err := nc.Match(ctx, QuantityQuery("s", 4), MatchOptions{})
				if err != nil || r.Version != f.curV {
					t.Fatalf("read %d after the new version was answered: version %q (err %v %v), want %q",
						k, r.Version, err, r.Err, f.curV)
				}
			}
			hold.Release()
		})
	}
}

// TestFaultNearUnchangedRepublish: a republish elsewhere at a newer
// revision invalidates the held ladder; with the same content it is kept
// (adopted, no ladder read), with other content it is read once.
func TestFaultNearUnchangedRepublish(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		k         int // content of the republish: 0 is the held content
		unchanged int64
		reads     int64
	}{
		{"same content", 0, 1, 0},
		{"other content", 1, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
				writer := newCache(t, b, Options{})
				p := stalePromotion(0)
				p.Revision = 2
				if _, err := writer.Refresh(ctx, p); err != nil {
					t.Fatal(err)
				}
				nc := newNearCache(t, nearClient(t, b), b.Prefix, Options{NearCache: &NearCacheOptions{MaxStaleness: time.Minute}})
				waitHeld(t, nc)
				before := nc.NearStats()
				next := stalePromotion(tc.k)
				next.Revision = 3
				rep, err := writer.Refresh(ctx, next)
				if err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the re-read", func() bool {
					st := nc.NearStats()
					return st.Unchanged > before.Unchanged || st.LadderReads > before.LadderReads
				})
				waitVersion(t, nc, rep.Promotions[0].Version)
				st := nc.NearStats()
				if n := st.Unchanged - before.Unchanged; n != tc.unchanged {
					t.Errorf("%d re-reads found the content unchanged, want %d", n, tc.unchanged)
				}
				if n := st.LadderReads - before.LadderReads; n != tc.reads {
					t.Errorf("%d ladder reads after the republish, want %d", n, tc.reads)
				}
				if n := st.Rereads - before.Rereads; n != 1 {
					t.Errorf("%d re-reads, want 1", n)
				}
			})
		})
	}
}

// TestNearAdoptGeneration: a re-read that found the held content
// unchanged confirms it only if nothing moved while it was in flight: an
// invalidation (a write it may have missed), tracking lost, or another
// read settling leaves the ladder stale.
func TestNearAdoptGeneration(t *testing.T) {
	t.Parallel()
	c, err := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}), Options{NearCache: &NearCacheOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	nc := c.near
	ladderOf := nearLadders(t, c, "g", 1)[0]
	for _, tc := range []struct {
		name    string
		between func()
		want    bool
	}{
		{"nothing in between", func() {}, true},
		{"invalidation of the promotion", func() { nc.softInvalidate("g", time.Now().UnixNano()) }, false},
		{"tracking dropped and back", func() { nc.setUp(false); nc.setUp(true) }, false},
		{"another read of the promotion settled", func() { nc.settle(nc.begin("g"), nil, false) }, false},
		{"invalidation of another promotion", func() { nc.softInvalidate("other", time.Now().UnixNano()) }, true},
	} {
		nc.setUp(true)
		if !nc.settle(nc.begin("g"), ladderOf(), false) {
			t.Fatalf("%s: install refused", tc.name)
		}
		held, _ := nc.get("g", time.Now().UnixNano())
		nc.softInvalidate("g", time.Now().UnixNano())
		f := nc.begin("g")
		tc.between()
		nc.adopt(f, held)
		l, _ := nc.lookup("g", time.Now().UnixNano())
		adopted := l == held && held.staleAt.Load() == 0
		if adopted != tc.want {
			t.Errorf("%s: adopted %v, want %v", tc.name, adopted, tc.want)
		}
	}
}

// TestNearRevalidatesUsedOnly: the re-validation pass checks only the
// ladders read since the previous pass began, so its commands do not
// grow with ladders held but unused; a ladder left unused stays served,
// confirmed by the tracking connection's answered PINGs, with no read.
func TestNearRevalidatesUsedOnly(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		writer := newCache(t, b, Options{})
		ids := make([]string, 20)
		for i := range ids {
			ids[i] = "u" + string(rune('a'+i))
			if _, err := writer.Refresh(ctx, simplePromotion(ids[i], 1, 2)); err != nil {
				t.Fatal(err)
			}
		}
		client := nearClient(t, b)
		rec := &hgetRecorder{}
		client.AddHook(rec)
		// 1 s, not less: an unused ladder stays served only while every
		// tracking connection answered a PING within MaxStaleness, and a
		// loaded machine (CI runs packages side by side) delays PONGs by
		// hundreds of ms; passes come every MaxStaleness/2.
		const maxStale = time.Second
		nc := newNearCache(t, client, b.Prefix, Options{NearCache: &NearCacheOptions{MaxStaleness: maxStale}})
		waitTracking(t, nc)
		qs := make([]Query, len(ids))
		for i, id := range ids {
			qs[i] = QuantityQuery(id, 1)
		}
		if _, err := nc.MatchCart(ctx, qs, MatchOptions{}); err != nil {
			t.Fatal(err)
		}
		rec.reset()
		lost := nc.NearStats().TrackingLost
		// Only ids[0] is read for n more passes.
		passesOfOne := func(n int) {
			t.Helper()
			want := rec.passes() + n
			deadline := time.Now().Add(15 * time.Second)
			for rec.passes() < want {
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d re-validation passes in 15 s", rec.passes(), want)
				}
				if _, err := nc.Match(ctx, QuantityQuery(ids[0], 1), MatchOptions{}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond)
			}
		}
		passesOfOne(4)
		// The first pass may still cover the cart's ladders (read in the
		// pass before it); every later one only ids[0].
		for k, pass := range rec.all()[1:] {
			if len(pass) != 1 || pass[0] != nc.metaKey(ids[0]) {
				t.Fatalf("pass %d checked %v, want only %s", k+1, pass, nc.metaKey(ids[0]))
			}
		}
		// An unused ladder is confirmed by the tracking connection's
		// answered PINGs: served, with no read of its own. What drops
		// ladders meanwhile (tracking lost when a node's connection
		// stalls on a loaded machine, a change of the cluster's masters)
		// is not what this checks: when fewer than the cart's ladders
		// were held before the read, or tracking was lost, the cart is
		// read again, two passes go by, and it runs again, at most 5
		// times. A held ladder read again fails at once.
		for attempt := 1; ; attempt++ {
			before := nc.NearStats()
			r, err := nc.Match(ctx, QuantityQuery(ids[1], 1), MatchOptions{})
			if err != nil || r.Err != nil {
				t.Fatalf("read of the unused ladder: %v %v", err, r.Err)
			}
			st := nc.NearStats()
			if st.Rereads == before.Rereads && st.LadderReads == before.LadderReads && st.Hits == before.Hits+1 {
				break
			}
			dropped := before.Promotions < len(ids) || st.TrackingLost != lost
			if !dropped || attempt == 5 {
				t.Fatalf("unused ladder read (attempt %d, %d of %d ladders held before it, tracking lost %d times since the cart): %d re-reads, %d ladder reads, %d hits; want 0, 0, 1",
					attempt, before.Promotions, len(ids), st.TrackingLost-lost, st.Rereads-before.Rereads, st.LadderReads-before.LadderReads, st.Hits-before.Hits)
			}
			t.Logf("attempt %d: %d of %d ladders held, tracking lost %d times: reading the cart again", attempt, before.Promotions, len(ids), st.TrackingLost-lost)
			waitTracking(t, nc)
			lost = nc.NearStats().TrackingLost
			if _, err := nc.MatchCart(ctx, qs, MatchOptions{}); err != nil {
				t.Fatal(err)
			}
			passesOfOne(2)
		}
	})
}

// hgetRecorder records the meta keys of each pipeline of HGETs alone (a
// re-validation pass's).
type hgetRecorder struct {
	mu    sync.Mutex
	pipes [][]string
}

func (h *hgetRecorder) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *hgetRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *hgetRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var keys []string
		for _, c := range cmds {
			a := c.Args()
			if c.Name() != "hget" || len(a) != 3 || a[2] != metaVersion {
				return next(ctx, cmds)
			}
			keys = append(keys, a[1].(string))
		}
		slices.Sort(keys)
		h.mu.Lock()
		h.pipes = append(h.pipes, keys)
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (h *hgetRecorder) reset() {
	h.mu.Lock()
	h.pipes = nil
	h.mu.Unlock()
}

func (h *hgetRecorder) passes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.pipes)
}

func (h *hgetRecorder) all() [][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.pipes)
}

// TestFaultNearHeldInvalidationUnused: the invalidation of a held ladder
// nobody reads is held in transit, so every PONG behind it is too. The
// ladder was confirmed only by those PINGs (no read of it since, so no
// version check of its own): a read that starts MaxStaleness after the
// write returned must not be answered the replaced version.
func TestFaultNearHeldInvalidationUnused(t *testing.T) {
	t.Parallel()
	f := newOrderFixture(t)
	ctx := f.ctx
	const maxStale = 400 * time.Millisecond
	nc := newNearCache(t, f.client, f.b.Prefix, Options{NearCache: &NearCacheOptions{MaxStaleness: maxStale}})
	waitHeld(t, nc)
	key := []byte(nc.tiersKey("s"))
	hold := f.px.HoldNextReply(func(b []byte) bool {
		return bytes.Contains(b, []byte(invalidateChannel)) && bytes.Contains(b, key)
	})
	t.Cleanup(hold.Release)
	if _, err := f.writer.Refresh(ctx, f.cur); err != nil {
		t.Fatal(err)
	}
	wrote := time.Now()
	awaitHeld(t, hold, "the invalidation")
	// No read of "s" until the bound has passed: only the PINGs could
	// have confirmed it meanwhile.
	<-time.After(time.Until(wrote.Add(maxStale)))
	r, err := nc.Match(ctx, QuantityQuery("s", 4), MatchOptions{})
	if err != nil || r.Version != f.curV {
		t.Fatalf("read %v after the write returned: version %q (err %v %v), want the new %q",
			time.Since(wrote), r.Version, err, r.Err, f.curV)
	}
	hold.Release()
}
