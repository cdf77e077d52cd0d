package console

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/delayraw"
)

// The console benchmarks fill Redis the same way at different sizes: a
// queue of tasks, some taken and half of those killed, and promotions.

// enqueueBench enqueues n tasks, job(i) the i-th, in batches of
// delay.MaxBatch.
func enqueueBench(b *testing.B, ctx context.Context, q *delay.Queue, n int, job func(i int) delay.Job) {
	b.Helper()
	jobs := make([]delay.Job, 0, delay.MaxBatch)
	for i := range n {
		jobs = append(jobs, job(i))
		if len(jobs) == cap(jobs) || i == n-1 {
			if _, err := q.EnqueueBatch(ctx, jobs); err != nil {
				b.Fatal(err)
			}
			jobs = jobs[:0]
		}
	}
}

// killHalves takes rounds batches of delay.MaxBatch tasks and kills the
// first half of each, concurrently; the other half stays in flight.
func killHalves(b *testing.B, ctx context.Context, q *delay.Queue, rounds int) {
	b.Helper()
	killErr := errors.New("payment service said 503")
	for range rounds {
		batch, err := delayraw.Take(ctx, q, delay.MaxBatch)
		if err != nil || len(batch) != delay.MaxBatch {
			b.Fatalf("take: %d, %v", len(batch), err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, delay.MaxBatch/2)
		for _, t := range batch[:delay.MaxBatch/2] {
			wg.Go(func() {
				if _, err := delayraw.Kill(ctx, q, t, killErr); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// benchPromotions returns n promotions promo-00000 on, each of five
// quantity tiers (2, 5, 8, 11, 14 items for 5 to 25 % off).
func benchPromotions(n int) []gradient.Promotion {
	promos := make([]gradient.Promotion, n)
	for i := range promos {
		p := gradient.Promotion{ID: fmt.Sprintf("promo-%05d", i), Metric: gradient.Quantity}
		for k := range 5 {
			p.Tiers = append(p.Tiers, gradient.Tier{ID: fmt.Sprintf("t%d", k), Threshold: decimal.NewFromInt(int64(2 + 3*k)),
				Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(int64(5 + 5*k))}})
		}
		promos[i] = p
	}
	return promos
}
