package delaybench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/measure"
)

// roundTrips counts, on a client of its own, the round trips of one
// EnqueueBatch of MaxBatch jobs, one Take of 100 and one AckMany of 100,
// each after a first call that loaded its script and opened the
// connection. The counts are the same on every server.
func (b *delayBench) roundTrips(ctx context.Context) error {
	c, err := measure.ClientLike(b.p.client, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	q, err := delay.New(c, "trips", delay.Options{Prefix: b.prefix})
	if err != nil {
		return fmt.Errorf("delay.New: %w", err)
	}
	rt, err := measure.CountRoundTrips(ctx, c)
	if err != nil {
		return err
	}
	count := func(name, want string, wantN int, call func() error) error {
		// The first call loads the script and opens connections.
		if err := call(); err != nil {
			return err
		}
		rt.Reset()
		if err := call(); err != nil {
			return err
		}
		n := rt.Total()
		b.floors.Judge(measure.Floor{Subject: "delay", Kind: measure.Robust, Name: "round trips per " + name, Want: want,
			Value: fmt.Sprint(n)}, n == wantN)
		return nil
	}
	next := 0
	jobs := func(n int) []delay.Job {
		js := b.jobs(n, next, delay.After(0))
		next += n
		return js
	}
	err = count(fmt.Sprintf("EnqueueBatch of %d jobs", delay.MaxBatch), "= 1", 1, func() error {
		_, err := enqueueAll(ctx, q, jobs(delay.MaxBatch), time.Time{})
		return err
	})
	if err != nil {
		return err
	}
	err = count("Take of 100 + AckMany of them", "= 2", 2, func() error {
		bt, err := delayraw.Take(ctx, q, 100)
		if err != nil {
			return err
		}
		if len(bt) != 100 {
			return fmt.Errorf("take: %d tasks, want 100", len(bt))
		}
		errs, err := delayraw.Ack(ctx, q, bt)
		if err != nil {
			return err
		}
		return errors.Join(errs...)
	})
	return err
}
