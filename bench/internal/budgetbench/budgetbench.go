// Package budgetbench is the budget phase of `go run ./bench -budget`:
// Redis memory per hold, per confirmed order and per customer counter,
// reservations per second at 1, 16 and 64 clients with their p99, and the
// cost of Options.Replicas (WAIT after each write) on a private master
// and replica.
package budgetbench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/measure"
	"github.com/tierset/tierset/internal/redisserver"
)

// Config is the phase's input.
type Config struct {
	Client  redis.UniversalClient
	Backend string
	Quick   bool
	Out     io.Writer
}

// Run runs the phase and prints its tables.
func Run(ctx context.Context, cfg Config) error {
	prefix := "tsbench-budget-" + measure.RunID()
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := measure.DeleteKeys(cctx, cfg.Client, prefix+":*"); err != nil {
			fmt.Fprintln(cfg.Out, "budget: cleanup:", err)
		}
	}()
	n, dur := 20_000, 3*time.Second
	if cfg.Quick {
		n, dur = 2_000, time.Second
	}
	fmt.Fprintf(cfg.Out, "\nbudget: backend %s, prefix %s\n", cfg.Backend, prefix)
	if err := memory(ctx, cfg, prefix, n); err != nil {
		return err
	}
	fmt.Fprintf(cfg.Out, "budget: reservations (one line, caps: total uses, uses per customer, spend per day), %v per row\n", dur)
	fmt.Fprintf(cfg.Out, "  %-28s %8s %12s %10s %10s\n", "case", "clients", "reserves/s", "p50", "p99")
	for _, conc := range []int{1, 16, 64} {
		bg, err := newBudget(ctx, cfg.Client, fmt.Sprintf("%s-c%d", prefix, conc), budget.Options{})
		if err != nil {
			return err
		}
		if err := throughput(ctx, cfg.Out, "shared client", bg, conc, dur); err != nil {
			return err
		}
	}
	return waitCost(ctx, cfg, dur)
}

func newBudget(ctx context.Context, c budget.Client, prefix string, o budget.Options) (*budget.Budget, error) {
	o.Prefix = prefix
	o.Promotions = []budget.Promotion{{ID: "p", Caps: []budget.Cap{
		{Measure: budget.Uses, Limit: budget.MaxAmount},
		{Measure: budget.Uses, Limit: 1_000_000, Per: "customer"},
		{Measure: budget.Spend, Limit: budget.MaxAmount, Period: budget.Day, Location: time.UTC},
	}}, {ID: "t", Caps: []budget.Cap{{Measure: budget.Uses, Limit: budget.MaxAmount}}}}
	bg, err := budget.New(c, "bench", o)
	if err != nil {
		return nil, err
	}
	_, err = bg.Rebuild(ctx, nil)
	return bg, err
}

// memory: MEMORY USAGE summed over the budget's keys (other clients of a
// shared server cannot disturb it) around n holds of promotion t (a total
// cap only: the hold's record and its holds entry), the same n confirmed,
// and n holds of p by n customers (each adds a customer counter field).
func memory(ctx context.Context, cfg Config, prefix string, n int) error {
	bg, err := newBudget(ctx, cfg.Client, prefix+"-mem", budget.Options{})
	if err != nil {
		return err
	}
	pattern := prefix + "-mem:*"
	size := func() (int64, error) {
		total, _, ok, err := measure.KeysMemory(ctx, cfg.Client, pattern)
		if err == nil && !ok {
			err = fmt.Errorf("MEMORY USAGE not supported on %s", cfg.Backend)
		}
		return total, err
	}
	base, err := size()
	if err != nil {
		return err
	}
	reserveAll := func(promo, orderPrefix string) error {
		return parallel(16, n, func(i int) error {
			_, err := bg.Reserve(ctx, budget.Request{Order: fmt.Sprintf("%s%d", orderPrefix, i),
				Attributes: map[string]string{"customer": fmt.Sprintf("cust-%08d", i)},
				Lines:      []budget.Line{{Promotion: promo, Uses: 1, Amount: 1250}}, Hold: time.Hour})
			return err
		})
	}
	if err := reserveAll("t", "order-t-"); err != nil {
		return err
	}
	held, err := size()
	if err != nil {
		return err
	}
	if err := parallel(16, n, func(i int) error {
		_, err := bg.Confirm(ctx, fmt.Sprintf("order-t-%d", i))
		return err
	}); err != nil {
		return err
	}
	confirmed, err := size()
	if err != nil {
		return err
	}
	if err := reserveAll("p", "order-p-"); err != nil {
		return err
	}
	perCust, err := size()
	if err != nil {
		return err
	}
	logLen, err := cfg.Client.XLen(ctx, bg.LogKey()).Result()
	if err != nil {
		return err
	}
	logMem, err := cfg.Client.MemoryUsage(ctx, bg.LogKey(), 0).Result()
	if err != nil {
		return err
	}
	f := func(d int64) float64 { return float64(d) / float64(n) }
	fmt.Fprintf(cfg.Out, "budget: memory (MEMORY USAGE over the budget's keys, %d orders, order IDs of ~13 B, customer IDs of 13 B)\n", n)
	fmt.Fprintf(cfg.Out, "  per hold (record + holds entry):                       %6.0f B\n", f(held-base))
	fmt.Fprintf(cfg.Out, "  per confirmed order (record kept RecordTTL + log entry): %6.0f B (log: %.0f B of it, %d entries)\n",
		f(confirmed-base), float64(logMem)/float64(logLen), logLen)
	fmt.Fprintf(cfg.Out, "  per hold on 3 caps with its customer's counter field:   %6.0f B (the counter field: %.0f B)\n",
		f(perCust-confirmed), f(perCust-confirmed)-f(held-base))
	return nil
}

// parallel runs f(0..n-1) on conc goroutines and returns the first error.
func parallel(conc, n int, f func(i int) error) error {
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || first.Load() != nil {
					return
				}
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return *e
	}
	return nil
}

// throughput reserves unique orders (one line on 3 caps, a customer per
// 100 orders) from conc goroutines for dur.
func throughput(ctx context.Context, out io.Writer, name string, bg *budget.Budget, conc int, dur time.Duration) error {
	var samples measure.Samples
	var seq atomic.Int64
	var first atomic.Pointer[error]
	end := time.Now().Add(dur)
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for time.Now().Before(end) && first.Load() == nil {
				i := seq.Add(1)
				t0 := time.Now()
				_, err := bg.Reserve(ctx, budget.Request{Order: fmt.Sprintf("o%d", i),
					Attributes: map[string]string{"customer": fmt.Sprintf("c%d", i/100)},
					Lines:      []budget.Line{{Promotion: "p", Uses: 1, Amount: 1250}}, Hold: time.Hour})
				samples.Add(time.Since(t0))
				if err != nil && !errorsIsNotReplicated(err) {
					first.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return *e
	}
	s := samples.Summary()
	el := time.Since(start)
	fmt.Fprintf(out, "  %-28s %8d %12.0f %10v %10v\n", name, conc, float64(s.N)/el.Seconds(),
		s.P50.Round(time.Microsecond), s.P99.Round(time.Microsecond))
	return nil
}

func errorsIsNotReplicated(err error) bool { return err != nil && isNotReplicated(err) }

// waitCost: the same reservations on a private master with one replica,
// without and with Options.Replicas = 1, side by side.
func waitCost(ctx context.Context, cfg Config, dur time.Duration) error {
	if !redisserver.Have() {
		fmt.Fprintln(cfg.Out, "budget: WAIT cost skipped: redis-server not on PATH")
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	master, err := redisserver.Start(sctx, "")
	if err != nil {
		return err
	}
	defer master.Close()
	replica, err := redisserver.Start(sctx, "", "--replicaof", "127.0.0.1", master.Addr()[len("127.0.0.1:"):])
	if err != nil {
		return err
	}
	defer replica.Close()
	c := redis.NewClient(&redis.Options{Addr: master.Addr(), ContextTimeoutEnabled: true, PoolSize: 80})
	defer c.Close()
	for deadline := time.Now().Add(20 * time.Second); ; {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && contains(info, "connected_slaves:1") && contains(info, "state=online") {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("budget: replica not online in 20s: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // a poll with a deadline
	}
	fmt.Fprintf(cfg.Out, "budget: Options.Replicas on a private master + 1 replica (loopback), %v per row\n", dur)
	fmt.Fprintf(cfg.Out, "  %-28s %8s %12s %10s %10s\n", "case", "clients", "reserves/s", "p50", "p99")
	for _, conc := range []int{1, 16} {
		for _, r := range []int{0, 1} {
			bg, err := newBudget(ctx, c, fmt.Sprintf("tsbench-budget-wait-%d-%d", conc, r), budget.Options{Replicas: r})
			if err != nil {
				return err
			}
			if err := throughput(ctx, cfg.Out, fmt.Sprintf("Replicas=%d", r), bg, conc, dur); err != nil {
				return err
			}
		}
	}
	return nil
}
