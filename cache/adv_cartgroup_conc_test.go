package cache

import (
	"context"
	"errors"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// TestAdvCartGroupConcurrentScratch has many goroutines price different
// carts at once, each appending into its own reused slice, and checks
// every line against its answer matched alone beforehand: the pooled
// per-cart scratch must never mix two carts.
func TestAdvCartGroupConcurrentScratch(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		rng := rand.New(rand.NewSource(int64(len(b.Name)) + 4242))
		c := newCache(t, b, Options{})
		w := newAdvCartWorld(t, ctx, c, b, rng)
		const workers, carts, rounds = 8, 3, 6
		type job struct {
			qs   []Query
			opt  MatchOptions
			want []Result
		}
		jobs := make([][]job, workers)
		for g := range jobs {
			for k := range carts {
				qs := w.cart(rng, 200)
				opt := matchOpts[(g+k)%len(matchOpts)]
				jobs[g] = append(jobs[g], job{qs: qs, opt: opt, want: advAlone(t, ctx, c, qs, opt)})
			}
		}
		var wg sync.WaitGroup
		errs := make(chan string, workers)
		for g := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var buf []Result
				for r := range rounds {
					for k := range jobs[g] {
						j := &jobs[g][(k+r)%len(jobs[g])]
						var err error
						buf, err = c.AppendMatchCart(ctx, buf[:0], j.qs, j.opt)
						if err != nil {
							errs <- err.Error()
							return
						}
						for i := range j.qs {
							if d := sameResult(buf[i], j.want[i]); d != "" {
								errs <- "worker line " + j.qs[i].Promotion + ": " + d
								return
							}
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
	})
}

// cancelPipeline cancels arm's context as a pipeline is about to be
// sent, when armed: the cart fails mid-call, after its scratch is set up.
type cancelPipeline struct {
	arm atomic.Pointer[context.CancelFunc]
}

func (h *cancelPipeline) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *cancelPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *cancelPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cancel := h.arm.Swap(nil); cancel != nil {
			(*cancel)()
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return next(ctx, cmds)
	}
}

// TestFaultAdvCartGroupErrorThenCart fails a cart midway (its ctx
// cancelled before the call, or as its pipeline is sent) and then prices
// another cart on the same goroutine, so the pooled scratch the failed
// call left is the one reused: the failed call returns dst unchanged
// with its spare slots zeroed, and the next cart is answered right.
func TestFaultAdvCartGroupErrorThenCart(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		rng := rand.New(rand.NewSource(int64(len(b.Name)) + 99))
		c := newCache(t, b, Options{})
		w := newAdvCartWorld(t, ctx, c, b, rng)
		hook := &cancelPipeline{}
		b.Client.AddHook(hook)
		for _, tc := range []struct {
			name string
			fail func() context.Context
		}{
			{"cancelled before", func() context.Context {
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				return cctx
			}},
			{"cancelled in pipeline", func() context.Context {
				cctx, cancel := context.WithCancel(ctx)
				t.Cleanup(cancel)
				hook.arm.Store(&cancel)
				return cctx
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				failed := 0
				t.Cleanup(func() {
					if failed == 0 {
						t.Errorf("no cart failed: nothing was tested")
					}
				})
				for round := range 8 {
					opt := matchOpts[round%len(matchOpts)]
					bad := w.cart(rng, 300)
					for len(bad) < 2 {
						bad = w.cart(rng, 300)
					}
					good := w.cart(rng, 300)
					want := advAlone(t, ctx, c, good, opt)
					dst := make([]Result, 1, 1+len(bad)+len(good))
					dst[0] = Result{Promotion: "kept"}
					got, err := c.AppendMatchCart(tc.fail(), dst, bad, opt)
					hook.arm.Store(nil)
					if err == nil {
						// Every line of bad may have been refused before any
						// read: then nothing was sent and nothing can fail.
						continue
					}
					failed++
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("round %d: %v, want context.Canceled", round, err)
					}
					if len(got) != 1 || got[0].Promotion != "kept" {
						t.Fatalf("round %d: failed call returned %d results, dst[0] %q", round, len(got), got[0].Promotion)
					}
					for i, r := range got[1 : 1+len(bad)] {
						if r.Promotion != "" || r.Tier != nil || r.Err != nil || r.Version != "" {
							t.Fatalf("round %d: spare slot %d not zeroed: %+v", round, i, r)
						}
					}
					got, err = c.AppendMatchCart(ctx, got, good, opt)
					if err != nil {
						t.Fatalf("round %d: next cart: %v", round, err)
					}
					for i := range good {
						if d := sameResult(got[1+i], want[i]); d != "" {
							t.Fatalf("round %d %+v line %d (%+v): %s", round, opt, i, good[i], d)
						}
					}
				}
			})
		}
	})
}
