// Package delay is a Redis delay queue: a task runs at a time judged by
// Redis TIME, is handed to one consumer at a time under a fenced lease,
// is retried with backoff, dead-lettered after its last attempt, and can
// be cancelled or rescheduled by its business key.
//
// # Enqueue
//
// [New] builds a [Queue] on a go-redis client (no I/O). A [Job] names a
// business key (an order ID, say), an optional token that makes (key,
// token) idempotent, a payload and a due time ([At] or [After]):
//
//	q, err := delay.New(rdb, "orders", delay.Options{})
//	e, err := q.Enqueue(ctx, delay.Job{Key: "order:42", Token: "expire",
//		When: delay.After(30 * time.Minute)})
//
// Enqueueing the same (key, token) again changes nothing and reports
// [Enqueued].Duplicate. [Queue.EnqueueBatch] sends many jobs in one
// pipeline per [MaxBatch]. [Sharded] spreads one logical queue over K
// shard queues (so over the masters of a Redis Cluster); [Sharded.For]
// is the shard of a business key.
//
// # Run
//
// A [Pool] runs a [Handler] for every due task of the queues (lines) it
// serves, sharing one set of handlers among them by weight or priority:
//
//	p, err := delay.NewPool(delay.PoolOptions{Concurrency: 8})
//	err = p.Add(q, func(ctx context.Context, t *delay.Task) error {
//		return expire(ctx, t.Key) // nil acks; an error retries with backoff
//	}, delay.QueueOptions{})
//	err = p.Run(ctx) // until ctx ends
//
// A handler's error retries the task after Options.Backoff ([RetryAfter]
// picks the delay); [Permanent] (or [ErrSkipRetry]) dead-letters it at
// once; after Options.MaxAttempts deliveries it is dead-lettered. A pool
// never polls: it wakes on a wake list and on a timer for the next due
// task. Running pools register themselves ([ListWorkers],
// [Queue.Workers]).
//
// # Cancel by business key
//
// Cancel, Reschedule, Requeue and Purge take one [Selector]: every task
// of a key, one (key, token), or the exact tasks some IDs name:
//
//	r, err := q.Cancel(ctx, delay.Selector{Key: "order:42"}) // paid: never expire it
//	_, err = q.Reschedule(ctx, delay.Selector{Key: "order:42", Token: "expire"},
//		delay.After(time.Hour))
//
// A pending or dead task is removed; one in flight is marked, so its ack
// removes it and it is never retried ([CancelResult]). By key, a call
// costs O(log N) a task through the key's index, never a scan. By ID, a
// call acts only on the task each ID names when it runs, never on a task
// enqueued since under the same key and token.
//
// # Operate
//
// [Queue.List] reads one [Page] of [TaskInfo] by [State] (due now,
// scheduled, in flight, dead, done) from a cursor, with a due range and
// filters ([ListOptions]), or the tasks of one key; [Queue.Task] reads
// one task by ID. [Queue.Stats] and [Queue.Health] read depths, counters
// and whether live workers keep up. [Queue.Pause], [Queue.Resume] and
// [Queue.SetRate] ([Rate]) act on every worker of every process.
// [Queue.Requeue] and [Queue.Purge] manage the dead letters.
// [Queue.Reconcile] re-adds what Redis lost from a [Source] of truth,
// and [Queue.Repair] and [Queue.Check] look after the keys and the
// server's eviction policy. [Discover] lists the queues under a prefix.
//
// An [Observer] (a struct of optional funcs) receives events
// (deliveries with lateness, retries, dead letters, errors); whatever the Observer, errors, losses and warnings
// are logged through log/slog (Options.Logger), rate-limited per kind.
// A refused input is a [*ValidationError] naming it and matching
// [ErrInvalid]; nothing is sent for it. The other sentinels name states
// ([ErrNotFound], [ErrLeaseLost], ...).
//
// # Guarantees
//
// Tasks due in one millisecond run in enqueue order; a delivery is fenced,
// so a late ack of an expired lease is refused ([ErrLeaseLost]); every
// mutating call has one outcome however often go-redis re-sends it; a
// lost record, counter or index is reported and repaired, never silently
// dropped. Each guarantee, with the tests that prove it, is listed in
// docs/guarantees.md (section "delay"); the key layout and the scripts
// are described in docs/design.md.
package delay
