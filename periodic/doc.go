// Package periodic runs periodic jobs on a delay queue: every process
// declares the same jobs and exactly one task per tick results, with no
// leader and no single scheduler.
//
// # Use
//
//	q, _ := delay.New(rdb, "jobs", delay.Options{})
//	s, _ := periodic.New(q, periodic.Options{})
//	s.Add(periodic.Job{Name: "report", Schedule: periodic.Every(time.Hour)})
//	go s.Run(ctx)                       // in every process, beside its pool
//	pool.Add(q, ...)                    // the ticks are tasks: Key "report",
//	                                    // Token the tick's Unix ms, Due the tick
//	jobs, _ := periodic.List(ctx, q)    // operators: schedule, ticks, processes
//	periodic.Pause(ctx, q, "report")    // and Resume; Forget once undeclared
//
// A [Schedule] is anything with Next(time.Time) time.Time: [Every] is
// built in, and contrib/cron (a nested module) parses cron specs in a
// time zone with robfig/cron/v3. [New] takes [Options] (the zero value is
// the default), [Scheduler.Add] a [Job], [Scheduler.Remove] a name;
// [Scheduler.Run] works until its ctx ends. A refused input is a
// [*ValidationError] naming it ("name", "schedule", "period", ...),
// matching [ErrInvalid]; nothing is written.
//
// # Exactly one task per tick
//
// A tick is a task whose business key is the job's name and whose token
// is the tick's instant. Each process computes the ticks from Redis TIME
// (never its own clock, which only arms timers) and sends each due tick
// to delay's Queue.EnqueueTick. That script checks, in the same atomic
// step as the enqueue, the job's guard: the last tick handled. A tick at
// or before it is refused ("stale"), so a process that lags, was
// SIGKILLed mid-call or had its reply cut cannot enqueue a tick again,
// even after that tick's task was acked and forgotten: delay's own
// (key, token) idempotency lasts only as long as the task (or its
// DoneTTL tombstone). The task is due at its tick by Redis TIME; a tick
// still in the future by Redis TIME is refused ("early"). Tests:
// TestTickGuardOutlivesTask, TestFaultTicksExactlyOnce (processes
// SIGKILLed and restarted, Redis restarted, replies cut, clocks skewed by
// ±10 s; 10 processes and 60 one-second ticks under TIERSET_SOAK=1).
//
// # Missed ticks
//
// Ticks that passed while no process could enqueue them (all down, Redis
// down) follow the job's [CatchUp]: [CatchUpOne] (the default) enqueues
// the latest and drops the others, [CatchUpSkip] enqueues it only while
// at most Job.Grace late, [CatchUpAll] enqueues each, at most
// Job.MaxCatchUp besides the latest. The tick due now is always enqueued.
// Test: TestCatchUp.
//
// # Declarations, schedule changes, removal
//
// Run declares each job in Redis every Options.TTL/3, with its
// definition (a digest of the schedule's ticks, the payload and the
// catch-up policy); a declaration not refreshed within TTL expires, and
// Run deletes its own when it returns. Only a process with a live
// declaration moves a job's guard, so a job no live process declares
// stops ticking (TestRemoveStopsTicks). Two definitions of one name live
// at once (a schedule changed in a rolling deploy) are logged through
// log/slog and shown by [List] (JobInfo.Conflict): the definition
// declared first keeps driving the ticks, the script refusing the other
// ("other"), until no live process declares it; then the next takes over
// from the guard. The ticks never double (TestRollingScheduleChange).
//
// # Operators
//
// [Discover] names the queues holding jobs (a job is declared before its
// queue's first task, which delay.Discover finds queues by); [List]
// returns every job declared on a queue with its spec, catch-up
// policy, last and next tick, last enqueued tick, pause state and the
// live processes per definition, each with when it last declared.
// [Pause] and [Resume] act on one job for every process, judged by the
// tick script in Redis, so processes started later obey too: a paused
// job's ticks pass without tasks and are not caught up whatever its
// CatchUp, so a resume brings no burst (TestPauseResume,
// TestFaultPauseHoldsAcrossProcesses: processes killed, started and
// Redis restarted while paused). [Forget] deletes a job's state once no
// live process declares it ([ErrDeclared] before); a process that
// declares it later starts it over from its next tick (TestForget,
// TestForgetThenFrozenProcess). An unknown name is [ErrNotFound].
// Options.Observer counts the ticks enqueued and missed (dropped by
// catch-up, or paused), each once across processes (TestObserverCounts);
// contrib/prometheus exports them. The console's Periodic page and
// "tierset periodic" are built on these calls.
//
// # Keys
//
// A job's state lives in one hash beside the queue's keys, under its
// hash tag (the table is on the keys type in state.go); docs/design.md
// ("Periodic jobs") gives the model.
package periodic
