package periodic_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/exampleredis"
	"github.com/tierset/tierset/periodic"
)

// Two processes declare the same job; one task per tick results.
func Example() {
	rdb, mr := exampleredis.Start()
	defer exampleredis.Stop(rdb, mr)
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	defer func() { cancel(); running.Wait() }() // each Run deletes its declarations

	q, _ := delay.New(rdb, "jobs", delay.Options{})
	for range 2 { // two processes, each with its own Scheduler
		s, _ := periodic.New(q, periodic.Options{})
		// CatchUpAll: a tick both processes were too slow for still comes
		// (a busy machine), so the first three ticks are 100ms apart.
		job := periodic.Job{Name: "report", Schedule: periodic.Every(100 * time.Millisecond), CatchUp: periodic.CatchUpAll}
		if err := s.Add(job); err != nil {
			fmt.Println(err)
			return
		}
		running.Go(func() { _ = s.Run(ctx) })
	}
	// a pool runs the tick tasks; here its handler records the first three
	due := make(chan *delay.Task, 16)
	pool, _ := delay.NewPool(delay.PoolOptions{Concurrency: 1})
	_ = pool.Add(q, func(_ context.Context, t *delay.Task) error { due <- t; return nil }, delay.QueueOptions{})
	running.Go(func() { _ = pool.Run(ctx) })
	var ticks []time.Time
	tokens := map[string]int{}
	for len(ticks) < 3 {
		t := <-due
		ticks = append(ticks, t.Due)
		tokens[t.Token]++
	}
	slices.SortFunc(ticks, time.Time.Compare)
	fmt.Println("one task per tick:", len(tokens) == len(ticks))
	fmt.Println("100ms apart:", ticks[1].Sub(ticks[0]), ticks[2].Sub(ticks[1]))

	jobs, _ := periodic.List(ctx, q)
	fmt.Println(jobs[0].Name, jobs[0].Spec, "processes:", len(jobs[0].Definitions[0].Processes))

	err := periodic.Pause(ctx, q, "nightly")
	fmt.Println(err)
	// Output:
	// one task per tick: true
	// 100ms apart: 100ms 100ms
	// report every 100ms processes: 2
	// periodic: job not found: "nightly" on queue "jobs"
}
