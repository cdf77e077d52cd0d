package delay_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/exampleredis"
)

func ExampleQueue_Enqueue() {
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	mr.SetTime(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)) // Redis TIME
	ctx := context.Background()

	q, _ := delay.New(rdb, "orders", delay.Options{})
	e, _ := q.Enqueue(ctx, delay.Job{Key: "order:42", Token: "expire", When: delay.After(30 * time.Minute)})
	fmt.Println(e.ID, e.Due.UTC().Format(time.TimeOnly), e.Duplicate)

	again, _ := q.Enqueue(ctx, delay.Job{Key: "order:42", Token: "expire", When: delay.After(time.Hour)})
	fmt.Println(again.ID, again.Due.UTC().Format(time.TimeOnly), again.Duplicate, again.State)
	// Output:
	// 1 12:30:00 false
	// 1 12:30:00 true pending
}

// One queue is a pool of one line. The handler sees the task's key,
// payload, attempt and lateness; returning nil acks it.
func ExamplePool_Run() {
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	ctx, cancel := context.WithCancel(context.Background())

	q, _ := delay.New(rdb, "orders", delay.Options{})
	done := make(chan string)
	p, _ := delay.NewPool(delay.PoolOptions{Concurrency: 2})
	p.Add(q, func(ctx context.Context, t *delay.Task) error {
		done <- fmt.Sprint(t.Key, " ", string(t.Payload), " attempt ", t.Attempt)
		return nil
	}, delay.QueueOptions{})
	stopped := make(chan error)
	go func() { stopped <- p.Run(ctx) }()

	q.Enqueue(ctx, delay.Job{Key: "reservation:9", Payload: []byte("release"), When: delay.After(20 * time.Millisecond)})
	fmt.Println(<-done)
	cancel()
	fmt.Println(errors.Is(<-stopped, context.Canceled))
	// Output:
	// reservation:9 release attempt 1
	// true
}

// A handler chooses what happens to a failed task: Permanent
// dead-letters it, RetryAfter puts it back after the delay given, any
// other error retries it with Options.Backoff.
func ExampleRetryAfter() {
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	ctx, cancel := context.WithCancel(context.Background())

	q, _ := delay.New(rdb, "mails", delay.Options{})
	q.Enqueue(ctx, delay.Job{Key: "mail:1"})
	q.Enqueue(ctx, delay.Job{Key: "mail:2"})
	handled := make(chan struct{}, 2)
	p, _ := delay.NewPool(delay.PoolOptions{})
	p.Add(q, func(ctx context.Context, t *delay.Task) error {
		defer func() { handled <- struct{}{} }()
		if t.Key == "mail:1" {
			return delay.RetryAfter(time.Hour, errors.New("mailbox full"))
		}
		return delay.Permanent(errors.New("no such address"))
	}, delay.QueueOptions{})
	stopped := make(chan error)
	go func() { stopped <- p.Run(ctx) }()
	<-handled
	<-handled
	cancel()
	<-stopped // Run applies every outcome before it returns

	st, _ := q.Stats(context.Background())
	fmt.Println("pending", st.Pending, "ready", st.Ready, "dead", st.Dead)
	// Output:
	// pending 1 ready 0 dead 1
}

func ExampleQueue_Cancel() {
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	ctx := context.Background()

	q, _ := delay.New(rdb, "orders", delay.Options{})
	q.Enqueue(ctx, delay.Job{Key: "order:7", Token: "expire", When: delay.After(30 * time.Minute)})
	q.Enqueue(ctx, delay.Job{Key: "order:7", Token: "remind", When: delay.After(10 * time.Minute)})

	r, _ := q.Cancel(ctx, delay.Selector{Key: "order:7"}) // the order was paid
	fmt.Printf("pending %d, in flight %d, dead %d\n", r.Pending, r.InFlight, r.Dead)
	// Output:
	// pending 2, in flight 0, dead 0
}

func ExampleQueue_History() {
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	mr.SetTime(start) // Redis TIME, which the history's minutes follow
	ctx, cancel := context.WithCancel(context.Background())

	q, _ := delay.New(rdb, "orders", delay.Options{})
	for _, k := range []string{"order:1", "order:2", "order:3"} {
		q.Enqueue(ctx, delay.Job{Key: k})
	}
	handled := make(chan struct{}, 3)
	p, _ := delay.NewPool(delay.PoolOptions{})
	p.Add(q, func(ctx context.Context, t *delay.Task) error {
		defer func() { handled <- struct{}{} }()
		if t.Key == "order:3" {
			return delay.Permanent(errors.New("no such order"))
		}
		return nil
	}, delay.QueueOptions{})
	stopped := make(chan error)
	go func() { stopped <- p.Run(ctx) }()
	for range 3 {
		<-handled
	}
	cancel()
	<-stopped // Run writes the last counts before it returns

	h, _ := q.History(context.Background(), start.Add(-time.Hour))
	last := h[len(h)-1]
	fmt.Println(len(h), "minutes; at", last.Start.UTC().Format(time.TimeOnly), "ok", last.OK, "dead", last.Dead)
	// Output:
	// 61 minutes; at 12:00:00 ok 2 dead 1
}

// With DoneTTL, a finished task's (key, token) stays known: a producer's
// late retry of the same enqueue is a duplicate in state done, not a
// second run.
func ExampleOptions_doneTTL() {
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	mr.SetTime(start)
	ctx := context.Background()

	q, _ := delay.New(rdb, "orders", delay.Options{DoneTTL: 24 * time.Hour})
	job := delay.Job{Key: "order:42", Token: "expire"}
	q.Enqueue(ctx, job)
	rctx, cancel := context.WithCancel(ctx)
	handled := make(chan string)
	p, _ := delay.NewPool(delay.PoolOptions{})
	p.Add(q, func(_ context.Context, t *delay.Task) error { handled <- t.Token; return nil }, delay.QueueOptions{})
	stopped := make(chan error)
	go func() { stopped <- p.Run(rctx) }()
	fmt.Println("handled", <-handled)
	cancel()
	<-stopped // Run sends the ack before it returns

	again, _ := q.Enqueue(ctx, job) // the producer retries
	fmt.Println(again.Duplicate, again.State)

	mr.SetTime(start.Add(25 * time.Hour))
	sw, _ := q.Sweep(ctx, 100)
	fmt.Println("tombstones ended:", sw.Tombstones)
	after, _ := q.Enqueue(ctx, job)
	fmt.Println(after.Duplicate, after.State)
	// Output:
	// handled expire
	// true done
	// tombstones ended: 1
	// false pending
}

// A refused input is a *ValidationError naming it; nothing is sent.
func ExampleValidationError() {
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	ctx := context.Background()

	q, _ := delay.New(rdb, "orders", delay.Options{})
	_, err := q.Enqueue(ctx, delay.Job{Key: "order:42", Token: "a,b"})
	var ve *delay.ValidationError
	fmt.Println(errors.Is(err, delay.ErrInvalid), errors.As(err, &ve) && ve.Field == "token")
	fmt.Println(errors.Is(err, &delay.ValidationError{Field: "key"}))
	// Output:
	// true true
	// false
}

func ExampleQueue_List() {
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	ctx := context.Background()

	q, _ := delay.New(rdb, "orders", delay.Options{})
	q.Enqueue(ctx, delay.Job{Key: "order:7", Token: "expire", When: delay.After(30 * time.Minute)})
	q.Enqueue(ctx, delay.Job{Key: "order:7", Token: "remind", When: delay.After(10 * time.Minute)})
	q.Enqueue(ctx, delay.Job{Key: "order:8", Token: "expire"})

	due, _ := q.List(ctx, delay.ListOptions{State: delay.StateDue})
	fmt.Println("due now:", due.Total, due.Tasks[0].Key)
	later, _ := q.List(ctx, delay.ListOptions{State: delay.StateScheduled, Limit: 1})
	fmt.Println("scheduled:", later.Total, "first", later.Tasks[0].Token, "next page", later.Next != "")
	byKey, _ := q.List(ctx, delay.ListOptions{Key: "order:7"})
	for _, t := range byKey.Tasks {
		fmt.Println(t.Key, t.Token, t.State)
	}
	// Output:
	// due now: 1 order:8
	// scheduled: 2 first remind next page true
	// order:7 expire scheduled
	// order:7 remind scheduled
}
