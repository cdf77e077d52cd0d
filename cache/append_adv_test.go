package cache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// advSlot is what a test put in one slot of dst's backing array, kept
// apart so that a write into the slot, or into the TierHit and gift list
// it points to, shows.
type advSlot struct {
	r          Result
	tier, next TierHit
	gifts      []gradient.Gift
}

// advDirty returns a slice of length n over a backing array of n+extra
// slots, each a Result with every field set and a TierHit of its own whose
// gift list has spare capacity (an implementation that reused it would
// append into it), and the snapshot of every slot.
func advDirty(n, extra int) ([]Result, []advSlot) {
	buf := make([]Result, n+extra)
	snap := make([]advSlot, len(buf))
	for i := range buf {
		gifts := make([]gradient.Gift, 1, 8)
		gifts[0] = gradient.Gift{SKU: "junk-" + strconv.Itoa(i), Qty: 9}
		buf[i] = Result{
			Promotion: "junk",
			Tier:      &TierHit{ID: "junk-tier-" + strconv.Itoa(i), Score: 99, HasGifts: true, Gifts: gifts},
			Next:      &TierHit{ID: "junk-next-" + strconv.Itoa(i), Score: 100},
			Shortfall: decimal.NewFromInt(99),
			Version:   "junk-version",
			Err:       errors.New("junk"),
		}
		snap[i] = advSlot{r: buf[i], tier: *buf[i].Tier, next: *buf[i].Next, gifts: slices.Clone(gifts[:cap(gifts)])}
	}
	return buf[:n], snap
}

// advSlotChanged says how slot i of arr differs from its snapshot, ""
// when it does not: the Result itself, or the TierHits and gift array the
// snapshot's Result points to.
func advSlotChanged(arr []Result, snap []advSlot, i int) string {
	s, r := snap[i], arr[i]
	if r.Promotion != s.r.Promotion || r.Tier != s.r.Tier || r.Next != s.r.Next || r.Version != s.r.Version ||
		r.Err != s.r.Err || !r.Shortfall.Equal(s.r.Shortfall) {
		return fmt.Sprintf("slot %d rewritten: %+v", i, r)
	}
	if !reflect.DeepEqual(*s.r.Tier, s.tier) || !reflect.DeepEqual(*s.r.Next, s.next) {
		return fmt.Sprintf("slot %d: the caller's TierHit written: %+v", i, *s.r.Tier)
	}
	if g := s.r.Tier.Gifts; !reflect.DeepEqual(g[:cap(g)], s.gifts) {
		return fmt.Sprintf("slot %d: the caller's gift array written: %v", i, g[:cap(g)])
	}
	return ""
}

// TestFaultAdvAppendErrorSpare: a call that fails whole leaves dst's
// spare capacity as the AppendMatchCart doc says: like append's, it is
// the call's to write, and a failed call leaves the slots it used zeroed
// (nothing of a half-answered cart shows through), the rest untouched.
func TestFaultAdvAppendErrorSpare(t *testing.T) {
	t.Parallel()
	advWholeCallErrors(t, func(name string, dst []Result, snap []advSlot) {
		arr := dst[:cap(dst)]
		for i := len(dst); i < len(arr); i++ {
			if d := advSlotChanged(arr, snap, i); d != "" && !reflect.DeepEqual(arr[i], Result{}) {
				t.Errorf("%s: spare slot %d neither as it was nor zeroed: %s", name, i, d)
			}
		}
	})
}

// advWholeCallErrors fails whole calls every way the docs name (a batch
// too big, a canceled context, a deadline while a reply is held, a reply
// cut on every try), on the Redis path and a near cache's first read, one
// line and several, with and without the gift fetch, into every shape of
// dst. The call must return dst itself with the error; check looks at
// dst's slots against their snapshot.
func advWholeCallErrors(t *testing.T, check func(name string, dst []Result, snap []advSlot)) {
	t.Helper()
	f := testredis.StartFaulty(t)
	ctx := testCtx(t)
	prefix := testredis.Prefix(t)
	direct, err := New(f.Server.Client(&redis.Options{}), Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	cut, err := New(f.Cut, Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	nearCl := redis.NewClient(&redis.Options{Addr: f.Proxy.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = nearCl.Close() })
	near := newNearCache(t, nearCl, prefix, Options{})
	seq := 0
	// fresh publishes a promotion no cache has read: a near cache's first
	// read of it goes to Redis.
	fresh := func() string {
		t.Helper()
		seq++
		id := "w" + strconv.Itoa(seq)
		if _, err := direct.Refresh(ctx, simplePromotion(id, 2, 5, 10)); err != nil {
			t.Fatal(err)
		}
		return id
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	type fault struct {
		ctx  context.Context
		done func(err error) (engaged bool)
	}
	for _, tc := range []struct {
		name  string
		gifts bool
		arm   func(id string) fault
		want  func(error) bool
		batch bool
	}{
		{"batch too big", false, func(string) fault { return fault{ctx, func(error) bool { return true }} }, func(err error) bool { return errors.Is(err, &ValidationError{Field: "batch"}) }, true},
		{"canceled", false, func(string) fault { return fault{canceled, func(error) bool { return true }} }, func(err error) bool { return errors.Is(err, context.Canceled) }, false},
		{"deadline, match reply held", false, func(id string) fault {
			h := f.Proxy.HoldNext(faultproxy.Contains(cut.tiersKey(id)))
			c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			// Under load the deadline may pass before the reply is held:
			// still a context failure mid-call.
			return fault{c, func(err error) bool { cancel(); return advReleased(h) || errors.Is(err, context.DeadlineExceeded) }}
		}, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }, false},
		{"deadline, gift reply held", true, func(id string) fault {
			h := f.Proxy.HoldNext(advGiftReads(cut, id))
			c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			// Under load the deadline may pass before the reply is held:
			// still a context failure mid-call.
			return fault{c, func(err error) bool { cancel(); return advReleased(h) || errors.Is(err, context.DeadlineExceeded) }}
		}, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }, false},
		{"match reply cut on every try", false, func(id string) fault {
			f.Proxy.CutNext(4, faultproxy.Contains(cut.tiersKey(id)))
			return fault{ctx, func(error) bool { engaged := f.Proxy.Armed() == 0; f.Proxy.CutNext(0, nil); return engaged }}
		}, func(err error) bool { return err != nil }, false},
		{"gift reply cut on every try", true, func(id string) fault {
			f.Proxy.CutNext(4, advGiftReads(cut, id))
			return fault{ctx, func(error) bool { engaged := f.Proxy.Armed() == 0; f.Proxy.CutNext(0, nil); return engaged }}
		}, func(err error) bool { return err != nil }, false},
	} {
		for _, cc := range []struct {
			name string
			c    *Cache
		}{{"redis", cut}, {"near", near}} {
			for _, lines := range []int{1, 5} {
				for _, sh := range []struct {
					name     string
					n, extra int
				}{{"nil", -1, 0}, {"full", 2, 0}, {"spare", 2, 10}, {"empty with capacity", 0, 8}} {
					name := fmt.Sprintf("%s/%s/%d lines/%s", tc.name, cc.name, lines, sh.name)
					id := fresh()
					qs := make([]Query, lines)
					for i := range qs {
						qs[i] = QuantityQuery(id, int64(5+i)) // hits with gifts
					}
					if tc.batch {
						qs = make([]Query, MaxCartLines+1)
					}
					var dst []Result
					var snap []advSlot
					if sh.n >= 0 {
						dst, snap = advDirty(sh.n, sh.extra)
					}
					fl := tc.arm(id)
					got, err := cc.c.AppendMatchCart(fl.ctx, dst, qs, MatchOptions{Next: true, Gifts: tc.gifts})
					if !fl.done(err) {
						t.Fatalf("%s: the fault never engaged (err %v)", name, err)
					}
					if !tc.want(err) {
						t.Fatalf("%s: err %v (%d results)", name, err, len(got))
					}
					if len(got) != len(dst) || cap(got) != cap(dst) || (got == nil) != (dst == nil) || cap(got) > 0 && &got[:1][0] != &dst[:1][0] {
						t.Errorf("%s: got len %d cap %d nil %v, want dst back (len %d cap %d nil %v)",
							name, len(got), cap(got), got == nil, len(dst), cap(dst), dst == nil)
						continue
					}
					check(name, dst, snap)
				}
			}
		}
	}
}

// advGiftReads matches the gift fetch of promotion id: HMGET on the
// Redis path, HGETALL from a near cache. Only this promotion's: a near
// cache's background reads of others must not take the fault.
func advGiftReads(c *Cache, id string) faultproxy.Match {
	key := faultproxy.Contains(c.prefix + tagOpen + id + suffixGifts)
	return func(req []byte) bool {
		return key(req) && (faultproxy.Contains("hmget")(req) || faultproxy.Contains("hgetall")(req))
	}
}

// advReleased releases h and reports whether it had held a reply.
func advReleased(h *faultproxy.Hold) bool {
	defer h.Release()
	select {
	case <-h.Held():
		return true
	default:
		return false
	}
}

// advDocumentedErr reports whether err is one the Result.Err doc lists.
func advDocumentedErr(err error) bool {
	for _, e := range []error{ErrNoTier, ErrNotFound, ErrNotActive, ErrDamaged, ErrMetricMismatch, ErrDigitsMismatch, ErrCorrupt, ErrGiftsGone, ErrLoad} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ve *ValidationError
	return errors.As(err, &ve) && (ve.Field == "query" || ve.Field == "id")
}

// TestAdvAppendLoaderFailures: a read-through Loader that fails, returns
// junk or outlives the call's context. Per the MatchCart and Result docs
// a failure is either the call's (a context failure: dst back unchanged)
// or a line's, and a line's Err is one the Result doc lists (ErrLoad for
// the loader's, the ctx's end while it waited included).
func TestAdvAppendLoaderFailures(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		good := simplePromotion("ok", 1, 4)
		for i, tc := range []struct {
			name    string
			load    func(ctx context.Context, id string) (*gradient.Promotion, error)
			timeout time.Duration
		}{
			{"source down", func(context.Context, string) (*gradient.Promotion, error) {
				return nil, errors.New("source down")
			}, 0},
			{"unknown", func(_ context.Context, id string) (*gradient.Promotion, error) {
				return nil, fmt.Errorf("%q: %w", id, ErrUnknownPromotion)
			}, 0},
			{"invalid promotion", func(_ context.Context, id string) (*gradient.Promotion, error) {
				return &gradient.Promotion{ID: id}, nil
			}, 0},
			{"another promotion's ID", func(context.Context, string) (*gradient.Promotion, error) {
				p := simplePromotion("someone-else", 1)
				return &p, nil
			}, 0},
			{"nil, nil", func(context.Context, string) (*gradient.Promotion, error) { return nil, nil }, 0},
			{"outlives the call", func(ctx context.Context, id string) (*gradient.Promotion, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}, 200 * time.Millisecond},
		} {
			prefix := b.Prefix + ":" + strconv.Itoa(i)
			c, err := New(b.Client, Options{Prefix: prefix, Loader: LoaderFunc(tc.load)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Refresh(ctx, good); err != nil {
				t.Fatal(err)
			}
			cctx := ctx
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				cctx, cancel = context.WithTimeout(ctx, tc.timeout)
				t.Cleanup(cancel)
			}
			dst, snap := advDirty(1, 4)
			qs := []Query{QuantityQuery("ok", 2), QuantityQuery("absent", 2)}
			got, err := c.AppendMatchCart(cctx, dst, qs, MatchOptions{Next: true})
			if err != nil {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					t.Errorf("%s: call error %v: not a batch, transport or context failure", tc.name, err)
				}
				if len(got) != len(dst) || advSlotChanged(got, snap, 0) != "" {
					t.Errorf("%s: call error, and dst not returned as it came", tc.name)
				}
				continue
			}
			if len(got) != 3 || got[1].Err != nil || got[1].Tier == nil {
				t.Fatalf("%s: %d results, line 0 %+v", tc.name, len(got), got[1])
			}
			if r := got[2]; r.Tier != nil || !advDocumentedErr(r.Err) {
				t.Errorf("%s: failed load's line: tier %+v err %v (%T): not an error the Result doc lists", tc.name, r.Tier, r.Err, r.Err)
			}
		}
	})
}
