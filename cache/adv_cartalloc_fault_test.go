package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/faultproxy"
)

// afLine is one line a fault cart may hold: a promotion and a score.
type afLine struct {
	m *gradient.Matcher
	s int64
}

// afWorld is faultPromos stored behind a fault proxy, and every line
// (promotion and boundary score) carts are drawn from.
type afWorld struct {
	env   *faultEnv
	lines []afLine
}

func newAFWorld(t *testing.T, ctx context.Context) *afWorld {
	t.Helper()
	env := newFaultEnv(t)
	ps := faultPromos(23, 12, 25)
	if _, err := env.direct.Refresh(ctx, ps...); err != nil {
		t.Fatal(err)
	}
	ms := matchers(t, ps...)
	w := &afWorld{env: env}
	for id, vs := range faultVals(ms) {
		for _, s := range vs {
			w.lines = append(w.lines, afLine{ms[id], s})
		}
	}
	return w
}

// cart draws n lines, mixed over the promotions, some repeated.
func (w *afWorld) cart(rng *rand.Rand, n int) ([]Query, []afLine) {
	ls := make([]afLine, n)
	qs := make([]Query, n)
	for i := range ls {
		ls[i] = w.lines[rng.Intn(len(w.lines))]
		qs[i] = queryFor(ls[i].m.Promotion(), ls[i].s)
	}
	return qs, ls
}

// check returns the first wrong line of rs (a cart that succeeded).
func afCheck(ls []afLine, rs []Result, opt MatchOptions) string {
	if len(rs) != len(ls) {
		return fmt.Sprintf("%d results for %d lines", len(rs), len(ls))
	}
	for i, r := range rs {
		if r.Promotion != ls[i].m.Promotion().ID {
			return fmt.Sprintf("line %d: promotion %q, want %q", i, r.Promotion, ls[i].m.Promotion().ID)
		}
		if k, d := verdict(ls[i].m, ls[i].s, r, opt); k != vOK {
			return fmt.Sprintf("line %d %s: %s %s", i, r.Promotion, k, d)
		}
	}
	return ""
}

// TestFaultAdvCartAllocFaultThenCart fails a cart on the cut client in
// each way a pipelined cart can fail (a reply cut, the connection killed
// while its reply is held, the deadline or a cancel while it is held),
// then prices more carts on the same goroutine, so the pooled scratch and
// Pipeliner the failed cart left are the ones reused. The faulted cart is
// right or fails with a typed error; every later cart is right.
func TestFaultAdvCartAllocFaultThenCart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	w := newAFWorld(t, ctx)
	env := w.env
	// held arms a hold on the next request holding match, and returns the
	// cart's context; once the reply is held, during runs, then the hold
	// is released.
	held := func(match string, cctx context.Context, during func()) context.Context {
		h := env.proxy.HoldNext(faultproxy.Contains(match))
		go func() {
			select {
			case <-h.Held():
				during()
			case <-cctx.Done():
			}
			h.Release()
		}()
		t.Cleanup(h.Release)
		return cctx
	}
	kill := func() {
		_ = env.rdb.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Err()
	}
	for _, tc := range []struct {
		name string
		opt  MatchOptions
		// fault arms the fault and returns the faulted cart's context.
		fault func() context.Context
		want  error // the faulted cart's error when it fails; nil: any but a server reply
	}{
		{"cut zrange", MatchOptions{Next: true}, func() context.Context {
			env.proxy.CutNext(1, faultproxy.Contains("zrange"))
			return ctx
		}, nil},
		{"cut hmget", MatchOptions{Gifts: true}, func() context.Context {
			env.proxy.CutNext(1, faultproxy.Contains("hmget"))
			return ctx
		}, nil},
		{"client kill, zrange held", MatchOptions{Next: true, Gifts: true}, func() context.Context {
			return held("zrange", ctx, kill)
		}, nil},
		{"client kill, hmget held", MatchOptions{Gifts: true}, func() context.Context {
			return held("hmget", ctx, kill)
		}, nil},
		{"deadline, zrange held", MatchOptions{}, func() context.Context {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
			t.Cleanup(cancel)
			return held("zrange", cctx, func() { <-cctx.Done() })
		}, context.DeadlineExceeded},
		{"deadline, hmget held", MatchOptions{Gifts: true, Next: true}, func() context.Context {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
			t.Cleanup(cancel)
			return held("hmget", cctx, func() { <-cctx.Done() })
		}, context.DeadlineExceeded},
		{"cancel, zrange held", MatchOptions{Next: true}, func() context.Context {
			cctx, cancel := context.WithCancel(ctx)
			t.Cleanup(cancel)
			return held("zrange", cctx, cancel)
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(len(tc.name))))
			failed := 0
			for round := range 6 {
				qs, ls := w.cart(rng, 2+rng.Intn(120))
				rs, err := env.cut.MatchCart(tc.fault(), qs, tc.opt)
				env.proxy.CutNext(0, nil)
				if err != nil {
					failed++
					var rerr interface{ RedisError() }
					if errors.As(err, &rerr) {
						t.Fatalf("round %d: a server error for the whole call: %v", round, err)
					}
					if tc.want != nil && !errors.Is(err, tc.want) {
						t.Fatalf("round %d: %v, want %v", round, err, tc.want)
					}
				} else if d := afCheck(ls, rs, tc.opt); d != "" {
					t.Fatalf("round %d, the faulted cart: %s", round, d)
				}
				for k := range 3 {
					opt := matchOpts[(round+k)%len(matchOpts)]
					qs, ls := w.cart(rng, 1+rng.Intn(200))
					rs, err := env.cut.MatchCart(ctx, qs, opt)
					if err != nil {
						t.Fatalf("round %d, cart %d after the fault: %v", round, k, err)
					}
					if d := afCheck(ls, rs, opt); d != "" {
						t.Fatalf("round %d, cart %d after the fault %+v: %s", round, k, opt, d)
					}
				}
			}
			t.Logf("%d of 6 faulted carts failed as a whole", failed)
		})
	}
}

// TestFaultAdvCartAllocDeadlineStorm has goroutines price carts at once
// on the cut client, slowed by the proxy, half of them under deadlines
// that run out while their pipelines are in flight: their scratches go
// back to the pool mid-read and are taken by the others. A cart with no
// deadline never fails and is always right; one that fails fails with
// its deadline; each cart's line on its worker's wrong-typed key fails
// alone, with that key's own error.
func TestFaultAdvCartAllocDeadlineStorm(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	w := newAFWorld(t, ctx)
	w.env.proxy.SetLatency(time.Millisecond)
	const workers, rounds = 8, 20
	// Each worker's own wrong-typed promotion: its line's error must
	// name it, never another worker's.
	wrong := func(g int) string { return "af-wrong-" + strconv.Itoa(g) }
	for g := range workers {
		if err := w.env.rdb.Set(ctx, w.env.direct.tiersKey(wrong(g)), "not a zset", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	var expired, total int64
	var mu sync.Mutex
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g) + 77))
			for round := range rounds {
				opt := matchOpts[(g+round)%len(matchOpts)]
				qs, ls := w.cart(rng, 1+rng.Intn(150))
				at := rng.Intn(len(qs) + 1)
				qs = slices.Insert(qs, at, QuantityQuery(wrong(g), 3))
				cctx, cancel := ctx, context.CancelFunc(func() {})
				if g%2 == 0 {
					cctx, cancel = context.WithTimeout(ctx, time.Duration(500+rng.Intn(12000))*time.Microsecond)
				}
				rs, err := w.env.cut.MatchCart(cctx, qs, opt)
				cancel()
				mu.Lock()
				total++
				if err != nil {
					expired++
				}
				mu.Unlock()
				switch {
				case err != nil && g%2 == 0 && errors.Is(err, context.DeadlineExceeded):
				case err != nil:
					errs <- fmt.Sprintf("worker %d round %d: %v", g, round, err)
					return
				default:
					if e := rs[at].Err; rs[at].Promotion != wrong(g) || e == nil || !strings.Contains(e.Error(), "WRONGTYPE") || !strings.Contains(e.Error(), strconv.Quote(wrong(g))) {
						errs <- fmt.Sprintf("worker %d round %d: wrong-typed line %+v", g, round, rs[at])
						return
					}
					if d := afCheck(ls, slices.Delete(rs, at, at+1), opt); d != "" {
						errs <- fmt.Sprintf("worker %d round %d %+v: %s", g, round, opt, d)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if expired == 0 {
		t.Errorf("no cart ran out of time: nothing was tested")
	}
	t.Logf("%d of %d carts ran out of time", expired, total)
}
