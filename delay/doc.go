// Package delay is a Redis delay queue on the shared score codec: tasks
// run at a time judged by Redis TIME, are handed to exactly one consumer per
// lease, are fenced on completion, retried with backoff, dead-lettered,
// cancelled or rescheduled by business key, and rebuilt from a source of
// truth.
//
// # Use
//
//	q, _ := delay.New(rdb, "orders", delay.Options{})
//	q.Enqueue(ctx, delay.Job{Key: "order:42", Token: "expire", When: delay.After(30 * time.Minute)})
//	w, _ := delay.NewWorker(q, handle, delay.WorkerOptions{Concurrency: 8})
//	err := w.Run(ctx) // until ctx ends
//	q.Cancel(ctx, "order:42") // paid: never expire it
//
// [New] builds a [Queue] (no I/O). [Queue.Enqueue] and [Queue.EnqueueBatch]
// (one pipeline per [MaxBatch] jobs) add tasks; [At] and [After] build the
// due time ([When]). [Queue.Take] takes a [Batch] of due [Task]s, each
// under a [Lease]; [Queue.Ack], [Queue.AckMany], [Queue.Retry],
// [Queue.RetryAfter], [Queue.Kill] and [Queue.Extend] take the *Task (see
// also [Queue.KeepAlive]), as the same methods of [Sharded] do.
// [Queue.Sweep] returns expired leases. [Queue.Cancel], [Queue.CancelToken],
// [Queue.Reschedule], [Queue.RescheduleToken] and [Queue.Lookup] work by
// business key; [Queue.CancelIDs] and [Queue.RescheduleIDs] by task ID,
// acting only on the task an ID still names. [Queue.ListDead], [Queue.Requeue], [Queue.Purge] and
// [Queue.PurgeAll] manage the dead-letter set. [Queue.Reconcile] compares
// with a [Source]. [Queue.Stats] returns [Stats]; an [Observer] (default
// [NopObserver]; [Recorder] is a ready one with a lateness [Histogram])
// receives events, and whatever the Observer, errors, losses and warnings
// are logged through [log/slog] (Options.Logger, rate-limited per kind).
// A worker that Redis refuses (NOAUTH, WRONGPASS or NOPERM, before its
// first take or wake-up) returns the refusal from Run instead of
// retrying; a refusal later in the run is retried and logged.
// [Worker] runs a [Handler] with [WorkerOptions]; a
// [Pool] ([NewPool], [PoolOptions], [Pool.Add] with [QueueOptions]) serves
// several queues or sharded queues ([Line]) from one set of handlers, by
// weight ([Weighted]) or priority ([Strict]), each with an optional cap;
// a Worker is a Pool of one line. Running pools register themselves
// on every server their queues use ([ListWorkers], [Queue.Workers]);
// [Queue.Health] tells "no live worker" from "workers behind" and from
// "paused".
// [Queue.Pause], [Queue.Resume] and [Queue.SetRate] ([Rate]) control a
// queue for every worker of every process. A refused input is a
// [*ValidationError] naming it, matching [ErrInvalid]; the other sentinels
// name states ([ErrNotFound], [ErrLeaseLost], ...).
//
// # Guarantees, and the tests that prove them
//
// Every guarantee is tested on miniredis and on real Redis (TIERSET_REDIS_URL,
// or a private redis-server when one is on PATH), and on Redis Cluster when
// TIERSET_REDIS_CLUSTER is set (internal/testredis.Each).
//
//  1. Ordering. A due score is score.TimeCodec's (ms << bits) | seq, computed
//     in the enqueue script as (ms - epoch) * 2^bits + seq, and checked in Go
//     with the same codec before sending. The seq is assigned inside the
//     script, after the last seq handed out for that ms and after every task
//     already pending in that ms, so tasks due in one ms come out in enqueue
//     order. The 1025th task of a ms spills into the next ms (still unique,
//     still valid, counted in Stats.SeqOverflows); the next task that asks
//     for the same ms starts where the last one landed, so a burst of any
//     size at one instant costs one step a task. Every score stays ≤ 2^53.
//     Tests: TestOrderingSameMillisecond (1100 tasks in one ms),
//     TestBurstBeyond64FullMs (67,036 tasks at one instant, batched then
//     one by one),
//     TestInterleavedDueTimesKeepOrder, TestLuaScoreArithmeticNear2p53 (real
//     Redis: Lua's scores equal the codec's at the last ms before 2^53, and a
//     spill past it is refused), TestBadInput (range rows).
//  2. Idempotent enqueue. A task is (business key, token); with no token the
//     library makes one (the task ID, returned as Enqueued.Token). The same
//     (key, token) again changes nothing and reports Duplicate with the
//     existing ID, due time and State; another token is another task (at
//     most maxTasksPerKey per key). Test: TestIdempotentEnqueue (incl. 100
//     goroutines, one task). The idempotency window is the task's life in
//     Redis, plus Options.DoneTTL after its ack: with DoneTTL set, an acked
//     task enqueued with a caller's token leaves a tombstone (its record
//     without payload, in its index entry, and its end in a done ZSET), so
//     the same (key, token) reports Duplicate with StateDone until the
//     sweep after DoneTTL deletes it. Without it (the default), or after
//     it, the same (key, token) enqueues a new task: a producer that
//     retries an enqueue it could not confirm (for example across a
//     failover, as TestFailover's does) can then create a second task after
//     the first was handled; handlers must be idempotent anyway under
//     at-least-once delivery. Tests: TestDoneTTL, TestDoneTTLWorker,
//     TestNothingLeaks10k/doneTTL=300ms.
//  3. Due by Redis TIME. Every script reads redis.call('TIME'); At(T) runs
//     at T, After(D) at Redis TIME + D (rounded up to the ms, never early).
//     The client clock (Options.Now) only arms the worker's timer, through an
//     offset measured on every reply. Tests: TestDueByServerTime (miniredis
//     SetTime, a day away from the client clock), TestWorkerClockSkew (client
//     clock ±1 h, delivery still on time).
//  4. Atomic, bounded take. One script takes ≤ N (1..1000) due tasks with
//     payloads, in one round trip, moving each to in-flight with deadline
//     Redis TIME + Lease and a fresh fence (a counter, one per take: two
//     deliveries of a task are two takes). Tests:
//     TestEnqueueTakeAck, TestFencing, TestEightConsumers100k (8 workers,
//     100k tasks: 0 lost, 0 twice).
//  5. Fenced completion. Ack, Retry, Kill and Extend run only if the task is
//     in flight with the caller's fence; otherwise ErrLeaseLost (ErrNotFound
//     once the task is gone). Tests: TestFencing, TestDueByServerTime,
//     TestBadInput (wrong fence rows), TestWorkerAutoExtend.
//  6. Recovery. A bounded sweep (any worker runs it when the earliest lease
//     expires) returns expired leases to due with the attempt counted; at
//     MaxAttempts the task is dead-lettered. Test:
//     TestSIGKILLMidHandler (a child process killed with SIGKILL mid-handler
//     20 times; every task handled, redeliveries only after the lease
//     deadline), TestSweepDeadLetters, TestWorkerSurvivesRedisRestart.
//  7. Retry and dead letter. Retry delays by Options.Backoff (default
//     exponential, equal jitter, capped: DefaultBackoff / ExpBackoff); after
//     MaxAttempts deliveries the task goes to the dead set with its last
//     error; ListDead pages it, Requeue and Purge act on it. Handler errors
//     retry, panics retry, Permanent(err) / ErrSkipRetry dead-letter at once.
//     Tests: TestRetryDeadLetter, TestWorkerOutcomes.
//  8. Cancel and reschedule by business key through the reverse index
//     (a field per key digest): O(log N) per task, no scan. Pending tasks
//     are removed with their record and index entry; in-flight ones are
//     marked so that their ack removes them and Retry, Kill or the sweep
//     delete them instead of retrying; CancelResult says what was found.
//     Reschedule moves pending tasks and reports in-flight ones untouched.
//     Reschedule, Requeue and Retry find every new score before their
//     first write: an error leaves every task where and as it was
//     (TestFaultMoveFails).
//     Tests: TestCancelReschedule, TestSweepDeletesCancelled,
//     TestNothingLeaks10k (10k tasks through every path, then only the
//     counter keys remain), TestIndexFollowsTasks (the index entry of a key
//     through every way a second task can join or leave it, alone and
//     beside a key with the same digest), TestDigestCollisions.
//  9. Reconcile. Queue.Reconcile lists a Source in pages, re-adds what Redis
//     lacks (idempotent, same key and token) and removes pending tasks due
//     before the bound that the source lacks, in batches, never one enqueued
//     after its listing began. Tests: TestReconcile,
//     TestReconcileKeepsTasksEnqueuedMeanwhile, TestShardedReconcile.
//  10. Lost keys (eviction, a stray DEL). IDs are never reused and records
//     never overwritten: an enqueue that finds the ID counter or the index
//     gone while the queue holds tasks writes nothing, Queue.Repair puts
//     it back, and the enqueue is sent again. A due or in-flight ID whose
//     record is gone goes to the dead set (ErrRecordLost), a record whose
//     due entry is gone is put back in due by its next enqueue (ErrDueLost);
//     each is counted in Stats and sent to Observer.OnLoss, and Reconcile
//     restores what was lost. Check (run by Worker.Run) refuses allkeys-*
//     eviction; under volatile-* no queue key but wake has a TTL, kept
//     replies included. Tests: TestFaultKeyLoss, TestFaultEvictionLoss,
//     TestFaultEvictionPolicy, TestFaultVolatileEvictionKeepsReplies;
//     docs/operations.md.
//
// # One outcome per call, whatever the network did
//
// go-redis sends a command again when its connection fails before the
// reply arrives (MaxRetries, 3 by default), and the Worker sends a failed
// take or ack again: a script that ran may run a second time. So every
// mutating script runs under a request ID (a random nonce per Queue and a
// counter): its first run keeps its reply for Options.ReplyTTL in a small
// hash shared by 64 calls, <prefix>:{q:<name>}:rp:<nonce>:<bucket>, with no TTL
// (so no volatile-* policy evicts it) and deleted by later calls once its
// time in the reply index rp:idx has passed, and a run
// with the same ID returns
// that reply without running again (reply.lua). One Enqueue makes one task
// and reports Duplicate=false for it; an Ack, Retry or Cancel that took
// effect reports success; a Take whose reply was lost hands over its tasks
// under their lease. Error replies are never kept. docs/design.md ("Fault
// model") gives the mechanism, its limits and its cost. Tests:
// TestFaultCutReplyEveryScript (one reply cut for every script, repair
// included), TestFaultRetriesExhausted,
// TestFaultWorkerCutReplies, TestFaultWorkerClientKill,
// TestFaultWorkerRestarts, TestFaultWorkerLatency (5,000 tasks each: 0
// lost, 0 handled twice within a lease, 0 false errors),
// TestReplyKeptExactly, TestMemoryPerKeptReply.
//
// Bad input (TestBadInput) gets a typed error and writes nothing;
// corrupt records planted in Redis give ErrCorrupt and never a panic or a
// stuck head (TestCorruptRecords, TestDecodeRecordNeverPanics, FuzzDecodeRecord).
//
// # Keys
//
// All keys of a queue share the hash tag {q:<name>}, so every
// script touches one slot (TestKeysShareOneSlot, TestBucketLayout on a
// cluster); a sharded queue composes K queues named <name>:0..<name>:K-1.
// The table of every key, its type and what it holds is written once, on
// the keys type in keys.go; [Queue.Keys] lists a queue's fixed keys.
//
// Task IDs are base-36 counters. Records live in bucket hashes: <b> is
// the task ID without its last digit (36 consecutive tasks per bucket).
// Scripts get the fixed keys and the tasks base name in KEYS and append
// the bucket suffix; the suffix comes after the hash tag, so a bucket is
// always on the slot of its base name. An emptied bucket disappears by
// itself. The base name itself never exists, which is what keeps every
// script off a queue whose slot is half moved between two cluster nodes
// (Redis checks only declared keys); a call refused then is sent again
// until the slot has moved (docs/cluster.md, "Live resharding";
// TestFaultLiveReshard, TestClusterMigrationChecksOnlyDeclaredKeys).
//
// The reverse index is one hash whose field is a 6-character digest of the
// business key (computed in Go and kept in each record). Keys that share a
// digest share its entry, and every script that reads one tells them apart
// by the key in each record, so a collision costs a few reads, never a
// wrong answer. An entry holds at most 4 × maxTasksPerKey tasks
// (ErrTooManyTasks past it).
//
// # Memory
//
// There is no key per task: records live in bucket hashes of 36 records,
// which Redis keeps listpack-encoded while a record fits
// hash-max-listpack-value (64 B by default); larger records still work, at
// a higher cost per task. The measured figures are in docs/benchmarks.md
// (TestMemoryPerPendingTask; TestMemoryPerPart by part).
//
// # Pool: several lines, one set of handlers
//
// A [Pool] runs a taker per queue (per shard) and Concurrency handler
// goroutines that pick the next task by Mode among the lines with a task
// waiting and a free MaxConcurrent: smooth weighted round robin
// ([Weighted], over the backlogged lines, a line's turn waiting for its
// take in flight) or highest weight first ([Strict]). Run returns only
// when ctx ends, or at once on ErrEvictionPolicy (or ErrDuplicateID:
// another live pool holds its ID in the registry); every Redis error
// (start-up Check included) is reported, counted in [Pool.Stats] and
// retried by its queue alone. After ShutdownTimeout (from ctx's end) a
// handler that returns is completed directly; one that never returns
// leaves its task to its lease. Design and figures: docs/design.md,
// "Workers". Tests: TestPoolWeightedShares,
// TestFaultPoolWeightsDefaultOptions, TestFaultDeadlineReleasesTake,
// TestFaultCancelDuringTake, TestFaultPauseDuringSlowTake,
// TestPoolShutdownWithinTimeout, TestPauseStopsPrefetched, TestPoolStrict,
// TestPoolCaps, TestPoolSharded, TestPoolLineIsolation,
// TestFaultWorkerStartOutage, TestFaultShutdownAcks, TestPoolRegistry,
// TestFaultHeartbeatKilledWorker, TestRegistryEveryServer,
// TestFaultHeartbeatFrozenServer, TestFaultHeartbeatErrorsChargedToTheirLine,
// TestRegistryDuplicateID, TestRegistryRedisClock, TestHealthPaused,
// TestRegistryHeartbeatBounds, TestRegistryEntryListsItsServersLines,
// TestFaultRegistryLostKeysKeepOwner, TestRegistrySplitClaim.
//
// # Worker timing
//
// A worker never polls on an interval to find due tasks. After each take
// it arms a client-side timer for the earliest due time (and the earliest
// lease expiry, for the sweep), both returned by the take script, converted
// to the client clock through the measured offset. A BLPOP on the wake list,
// on its own connection (WorkerOptions.WakeClient), only signals "an earlier
// task arrived": Redis checks blocking timeouts only every 1/hz (100 ms by
// default), so a BLPOP timeout would be up to 100 ms late. IdleCheck (5 s)
// is only a safety net for a wake-up consumed by a busy worker.
//
// # Worker throughput
//
// A take brings up to WorkerOptions.BatchSize tasks whatever the number of
// free handlers; with BatchSize > Concurrency the surplus waits in a
// bounded prefetch buffer (WorkerOptions.Prefetch) and the next take goes
// out when half the batch has drained, so the network overlaps handling. A
// buffered task is started only while at least half its lease is left;
// otherwise, and at shutdown, it is released back to due at its original
// score, not counted as an attempt (release.lua, fenced). Acks are
// gathered for up to 1 ms or 64 leases and sent as one AckMany. The take,
// ack and enqueue-batch scripts make a constant number of Redis calls per
// batch, and EnqueueBatch packs up to 250 jobs into each script call.
// Tests: TestWorkerPrefetchReleasedOnShutdown,
// TestWorkerPrefetchNeverStartsNearlyExpired, TestAckManyBulkSemantics,
// TestTakeBulkEffects, TestEnqueueBatchEqualsOneByOne.
//
// # Concurrent Enqueue
//
// Enqueue calls made at the same time on one Queue are grouped (group
// commit): a call that finds fewer than two calls of that Queue on their
// way goes at once, alone, as before; calls that arrive meanwhile queue,
// and when a call returns, the queued ones go together as one
// EnqueueBatch (up to MaxBatch a round trip), which shares the fixed
// server cost of a script call among them. Each call's outcome
// is the one it would have had alone (duplicates, codes, errors); calls
// from one goroutine keep their order. A call whose ctx ends while it
// queues sends nothing; one whose batch is already on its way returns
// ctx.Err() with its outcome unknown, as a call cancelled on the wire
// does. A batch runs without its callers' cancellation, under the latest
// of their deadlines, so one caller's cancel cannot fail the others.
// Tests: TestEnqueueGroup, TestEnqueueGroupTransportFailure,
// TestEnqueueGroupConcurrent, TestBatchContext.
//
// # Sharded queue (Redis Cluster)
//
// One hash tag pins a [Queue] to one master. [NewSharded] spreads one
// logical queue over K shard queues named <name>:0 … <name>:K-1, so their
// tags {q:<name>:i} land on different slots and masters. The shard of a
// task is [Sharded.ShardOf] its business key, so Cancel, Reschedule and Lookup by
// key go to one shard in O(1) through [Sharded.For]; [NewShardedWorker] runs one taker per
// shard, each with its own wake-up and backoff, feeding one set of
// handlers, so every shard drains and a shard that is down holds back no
// other. [Sharded.Reconcile] routes each source task to its shard; a
// shard's own Reconcile skips other shards' tasks
// (ReconcileResult.OtherShard). Every guarantee above holds inside a
// shard; ordering is per shard.
//
// # Pause, rate limit, high-water mark
//
// A queue's line of business can be paused and throttled on its own, for
// every worker of every process, because the take script reads the
// queue's ctl hash on every take (docs/design.md, "Business lines").
//
//   - Pause: once [Queue.Pause] returns, no take hands out a task of the
//     queue ([Batch.Paused]; the Worker idles on the wake list, which
//     [Queue.Resume] pushes, or polls once a second). Tasks in flight
//     finish and are acked, expired leases go back to due and wait, and
//     Enqueue, Cancel, Reschedule and the dead-letter calls keep working;
//     Stats.Paused and Stats.PausedSince tell it. Tests: TestPauseResume,
//     TestPauseStopsEveryProcess (3 worker processes: no take after the
//     pause began, the last handler start ≤ 100 ms after Pause returned),
//     TestFaultPauseResumeClientKill, TestFaultCutReplyEveryScript.
//   - Rate limit: [Queue.SetRate] sets a token bucket (Rate.PerSecond,
//     Rate.Burst) judged by Redis TIME: over any window W at most
//     PerSecond × W + Burst tasks are handed out, and a take that finds
//     no whole token tells when the next comes ([Batch.NextToken], at
//     most a day ahead), so a taker waits instead of asking again. It
//     only holds due tasks back, never makes one early. PerSecond is 0
//     (off) or [minRatePerSecond]..[maxRatePerSecond], Burst at most
//     MaxBatch (the default is capped there; more is refused). Tests:
//     TestRateTokenBucket, TestRateEdgeValues, TestRateTinyNoSpin (at the
//     least rate a worker sends a handful of takes a second, not a spin),
//     TestRateBurstCappedAfterIdle, TestRateAcrossProcesses (a soak: 3
//     worker processes for 10 s, within ±5% of the limit, never above it
//     in any window), TestFaultRateLimitRestart.
//   - High-water mark: a millisecond holds 2^bits seqs. The enqueue
//     scripts keep the most seqs of one millisecond in use they met, per
//     minute of Redis TIME; Stats.HighWater shows the current and last
//     minute's, [Observer].OnHighWater what this process's enqueues were
//     given, and OnWarning ([ErrHighWater]) fires once a minute past
//     Options.HighWaterWarn (80% by default). Test: TestHighWater.
//
// # Stats
//
// [Queue.Stats] reads depths, the oldest-due age, the counters and the
// server-side lateness histogram ([LatenessBuckets], kept by the take
// script by Redis TIME, so it covers every worker of the queue).
// [Queue.History] returns the last 24 hours per minute (tasks handled ok,
// retried, dead-lettered, and their lateness), which workers add to one
// hash per queue at most once a second: no command per task, at most
// about 740 KiB per queue (docs/benchmarks.md, "Queue history").
//
// # For benchmarks
//
//   - Batched enqueue: Queue.EnqueueBatch (one pipeline per 1000 jobs).
//   - Take+ack loop: b, _ := q.Take(ctx, 100); q.AckMany(ctx, b.Tasks).
//   - Lateness: Task.Lateness (Redis TIME at take minus due time), or a
//     Recorder as Options.Observer and Recorder.Lateness.Percentile(99).
//   - Memory: measure INFO used_memory around an EnqueueBatch of N tasks
//     (Queue.Keys lists the fixed keys and the bucket base name).
package delay
