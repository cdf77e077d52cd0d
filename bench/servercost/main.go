// Command servercost drives one delay queue through its three hot paths
// (batched enqueue, take, ack) against a redis-server that runs under
// valgrind's callgrind, and dumps callgrind's counters after each phase,
// so each phase's server cost comes out as an instruction count: the same
// for the same build and inputs whatever else the machine is doing. Run it
// through scripts/delay-server-cost.sh, which starts that server.
package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/bench/internal/callgrind"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
)

func main() { callgrind.Main("servercost", "127.0.0.1:6393", 20000, "tasks (a multiple of 100)", run) }

func run(addr, pid string, n int) error {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: time.Minute, WriteTimeout: time.Minute, ContextTimeoutEnabled: true})
	defer c.Close()
	q, err := delay.New(c, "cost", delay.Options{Prefix: "servercost"})
	if err != nil {
		return err
	}
	jobs := make([]delay.Job, n)
	payload := make([]byte, 16)
	for i := range jobs {
		jobs[i] = delay.Job{Key: fmt.Sprintf("order:servercost:%012d", i), Payload: payload}
	}
	dump := func(phase string) error { return callgrind.Dump(pid, phase) }
	if err := dump("start"); err != nil {
		return err
	}
	if err := enqueueAll(ctx, q, jobs, delay.MaxBatch); err != nil {
		return err
	}
	if err := dump("enqueue"); err != nil {
		return err
	}
	// Enqueue one by one on a queue of its own, n/10 tasks: the fixed cost
	// of a one-job script call, next to the batched cost above.
	ones := n / 10
	q1, err := delay.New(c, "servercost1", delay.Options{})
	if err != nil {
		return err
	}
	for i := 0; i < ones; i++ {
		if _, err := q1.Enqueue(ctx, jobs[i]); err != nil {
			return err
		}
	}
	if err := dump(fmt.Sprintf("one:%d", ones)); err != nil {
		return err
	}
	// EnqueueBatch of 4 jobs a call, n/10 tasks: the batch script's fixed
	// cost per call, which grouped Enqueue calls pay at low concurrency.
	q4, err := delay.New(c, "servercost4", delay.Options{})
	if err != nil {
		return err
	}
	if err := enqueueAll(ctx, q4, jobs[:ones], 4); err != nil {
		return err
	}
	if err := dump(fmt.Sprintf("batch4:%d", ones)); err != nil {
		return err
	}
	taken, err := takeAll(ctx, q, n)
	if err != nil {
		return err
	}
	if err := dump("take"); err != nil {
		return err
	}
	if err := ackAll(ctx, q, taken); err != nil {
		return err
	}
	if err := dump("ack"); err != nil {
		return err
	}
	// Ack with Options.DoneTTL (tombstones kept), n/10 tasks with tokens,
	// 100 a call; their enqueue and take are dumped apart ("setup").
	qd, err := delay.New(c, "servercostdone", delay.Options{DoneTTL: time.Hour})
	if err != nil {
		return err
	}
	tokened := make([]delay.Job, ones)
	for i := range tokened {
		tokened[i] = jobs[i]
		tokened[i].Token = "expire"
	}
	if err := enqueueAll(ctx, qd, tokened, delay.MaxBatch); err != nil {
		return err
	}
	dl, err := takeAll(ctx, qd, ones)
	if err != nil {
		return err
	}
	if err := dump("setup"); err != nil {
		return err
	}
	if err := ackAll(ctx, qd, dl); err != nil {
		return err
	}
	if err := dump(fmt.Sprintf("ackdone:%d", ones)); err != nil {
		return err
	}
	fmt.Printf("servercost: %d tasks; keys left %d\n", n, c.DBSize(ctx).Val())
	return nil
}

// enqueueAll enqueues jobs through EnqueueBatch, per jobs a call, and
// fails on the first job that fails.
func enqueueAll(ctx context.Context, q *delay.Queue, jobs []delay.Job, per int) error {
	for i := 0; i < len(jobs); i += per {
		res, err := q.EnqueueBatch(ctx, jobs[i:min(i+per, len(jobs))])
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return r.Err
			}
		}
	}
	return nil
}

// takeAll takes n tasks from q, 100 a call, and returns them.
func takeAll(ctx context.Context, q *delay.Queue, n int) ([]*delay.Task, error) {
	var taken []*delay.Task
	for len(taken) < n {
		b, err := delayraw.Take(ctx, q, 100)
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			return nil, fmt.Errorf("take: nothing due after %d of %d", len(taken), n)
		}
		taken = append(taken, b...)
	}
	return taken, nil
}

// ackAll acks tasks, 100 a call.
func ackAll(ctx context.Context, q *delay.Queue, taken []*delay.Task) error {
	for i := 0; i < len(taken); i += 100 {
		errs, err := delayraw.Ack(ctx, q, taken[i:min(i+100, len(taken))])
		if err != nil {
			return err
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}
