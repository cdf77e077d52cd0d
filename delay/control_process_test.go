package delay

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

// Environment of the line helper (child) process.
const (
	envLineHelper = "DELAY_LINE_HELPER"
	envLinePrefix = "DELAY_LINE_PREFIX"
	envLineWho    = "DELAY_LINE_WHO"
	envLineWork   = "DELAY_LINE_WORK_MS"
	envLineBatch  = "DELAY_LINE_BATCH"   // the worker's BatchSize; unset: default
	envLineIdle   = "DELAY_LINE_IDLE_MS" // the worker's IdleCheck; unset: default
)

// lineLog is the list each child's handler logs its deliveries to.
func lineLog(prefix string) string { return prefix + ":linelog" }

// takeLog is the list each child logs its take calls to (takeLogger).
func takeLog(prefix string) string { return prefix + ":takelog" }

// takeLogger is a go-redis hook that logs every run of the take script:
// "who|Redis TIME ms|asked|granted|gate", gate being the next token's ms
// when the rate limit left less than one token (see take.lua's reply).
// It sees the script's raw reply, so what it records does not depend on
// the library's reading of it.
type takeLogger struct {
	c       *redis.Client
	key     string
	who     string
	onError func(error)
}

func (takeLogger) DialHook(next redis.DialHook) redis.DialHook { return next }
func (takeLogger) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h takeLogger) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if err != nil || len(args) < 3 || !isTakeCall(args) {
			return err
		}
		v, rerr := cmd.(*redis.Cmd).Slice()
		nkeys, _ := strconv.Atoi(fmt.Sprint(args[2]))
		if rerr != nil || len(v) < 7 || len(args) <= 3+nkeys {
			return err
		}
		entry := fmt.Sprintf("%s|%v|%v|%d|%v", h.who, v[1], args[3+nkeys], (len(v)-7)/3, v[6])
		// the take ran: log it even when the worker is stopping
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if perr := h.c.RPush(lctx, h.key, entry).Err(); perr != nil {
			h.onError(perr)
		}
		return err
	}
}

func isTakeCall(args []any) bool {
	switch strings.ToLower(fmt.Sprint(args[0])) {
	case "evalsha":
		return args[1] == scriptTake.Hash()
	case "eval":
		return args[1] == luaTake
	}
	return false
}

// TestLineHelperProcess is a worker process of the pause and rate tests;
// it does nothing unless started by them. Its worker has Concurrency 4,
// BatchSize DELAY_LINE_BATCH and IdleCheck DELAY_LINE_IDLE_MS (unset:
// the defaults). Its handler logs
// "who|id|start (Unix ns, this machine's clock)|delivered ms|due ms"
// (both ms by Redis TIME) and then works DELAY_LINE_WORK_MS.
func TestLineHelperProcess(t *testing.T) {
	if os.Getenv(envLineHelper) != "1" {
		t.Skip("helper process only")
	}
	opt := childOptions()
	c := redis.NewClient(opt)
	prefix, who := os.Getenv(envLinePrefix), os.Getenv(envLineWho)
	c.AddHook(takeLogger{c: redis.NewClient(opt), key: takeLog(prefix), who: who, onError: func(err error) {
		fmt.Fprintln(os.Stderr, "take log:", err)
		os.Exit(2)
	}})
	work, _ := strconv.Atoi(os.Getenv(envLineWork))
	batch, _ := strconv.Atoi(os.Getenv(envLineBatch))
	idle, _ := strconv.Atoi(os.Getenv(envLineIdle))
	q, err := New(c, "line", Options{Prefix: prefix})
	exitOn(err)
	h := func(ctx context.Context, tk *Task) error {
		entry := fmt.Sprintf("%s|%s|%d|%d|%d", who, tk.ID, time.Now().UnixNano(), tk.DeliveredAt.UnixMilli(), tk.Due.UnixMilli())
		if err := c.RPush(ctx, lineLog(prefix), entry).Err(); err != nil {
			return err
		}
		time.Sleep(time.Duration(work) * time.Millisecond)
		return nil
	}
	w, err := newWorker(q, h, workerOpts{Concurrency: 4, BatchSize: batch, IdleCheck: time.Duration(idle) * time.Millisecond})
	exitOn(err)
	runChild(w)
}

// startLineWorkers starts n worker processes on the queue "line" under
// prefix, their worker's BatchSize batch and IdleCheck idleMs (0: the
// defaults); the returned stop ends them (SIGTERM: they finish their
// tasks) and t.Cleanup kills any left.
func startLineWorkers(t *testing.T, prefix string, n, workMs, batch, idleMs int) (stop func()) {
	t.Helper()
	var cmds []*exec.Cmd
	for i := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLineHelperProcess$", "-test.count=1")
		cmd.Env = testredis.ChildEnv(envLineHelper+"=1", envLinePrefix+"="+prefix,
			envLineWho+"=w"+strconv.Itoa(i), envLineWork+"="+strconv.Itoa(workMs),
			envLineBatch+"="+strconv.Itoa(batch), envLineIdle+"="+strconv.Itoa(idleMs))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		for _, c := range cmds {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
		for _, c := range cmds {
			done := make(chan struct{})
			go func() { _ = c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = c.Process.Kill()
				<-done
				t.Errorf("worker process %d did not stop within 20 s of SIGTERM", c.Process.Pid)
			}
		}
	}
	t.Cleanup(stop)
	return stop
}

type lineDelivery struct {
	who, id        string
	start          time.Time // handler start, this machine's clock
	delivered, due int64     // Unix ms, Redis TIME
}

func readLineLog(t *testing.T, ctx context.Context, c redis.UniversalClient, prefix string) []lineDelivery {
	t.Helper()
	entries, err := c.LRange(ctx, lineLog(prefix), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]lineDelivery, 0, len(entries))
	for _, e := range entries {
		f := strings.Split(e, "|")
		if len(f) != 5 {
			t.Fatalf("log entry %q", e)
		}
		ns, _ := strconv.ParseInt(f[2], 10, 64)
		d, _ := strconv.ParseInt(f[3], 10, 64)
		due, _ := strconv.ParseInt(f[4], 10, 64)
		out = append(out, lineDelivery{who: f[0], id: f[1], start: time.Unix(0, ns), delivered: d, due: due})
	}
	return out
}

func enqueueLineBacklog(t *testing.T, ctx context.Context, q *Queue, n int) map[string]bool {
	t.Helper()
	return enqueueLineKeys(t, ctx, q, 0, n)
}

// enqueueLineKeys enqueues n tasks due now, keys line:<from>..line:<from+n-1>,
// and returns their IDs.
func enqueueLineKeys(t *testing.T, ctx context.Context, q *Queue, from, n int) map[string]bool {
	t.Helper()
	jobs := jobsOf(n, func(i int) Job { return Job{Key: "line:" + strconv.Itoa(from+i)} })
	ids := make(map[string]bool, n)
	for _, r := range mustEnqueueBatch(t, ctx, q, jobs) {
		ids[r.ID] = true
	}
	return ids
}

// TestPauseStopsEveryProcess: three worker processes drain a backlog;
// Pause stops all of them. No take that ran after Pause returned handed
// out a task (every delivery's Redis TIME is at or before the pause's
// start), the last handler start is at most 100 ms after Pause returned
// (the tasks taken just before it), the tasks in flight finish and are
// acked, the rest wait; after Resume every task is handled exactly once.
// With the default BatchSize, and with BatchSize 200, where each process
// holds up to 200 tasks it took before the pause (a 10 ms handler: 500
// ms of work each) and must give them back. The backlog comes once every
// process has taken once (a process that started late could otherwise
// find it drained), and an IdleCheck of 50 ms brings the two processes
// the wake-up missed. A soak: three processes under -race on a loaded
// 2-core host once put the last start at 102 ms; TestPauseStopsPrefetched
// and TestFaultPauseDuringSlowTake hold the same bound in one process.
func TestPauseStopsEveryProcess(t *testing.T) {
	soak.Require(t, "three worker processes and a 100 ms bound that needs a quiet machine")
	for _, tc := range []struct {
		name          string
		batch, workMs int
	}{
		{"default BatchSize", 0, 2},
		{"BatchSize 200", 200, 10},
	} {
		t.Run(tc.name, func(t *testing.T) { pauseStopsEveryProcess(t, tc.batch, tc.workMs) })
	}
}

func pauseStopsEveryProcess(t *testing.T, batch, workMs int) {
	b := testredis.Redis(t) // child processes need a real server
	ctx := testCtx(t)
	q, err := New(b.Client, "line", Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	const n = 600
	stop := startLineWorkers(t, b.Prefix, 3, workMs, batch, 50)
	waitFor(t, 30*time.Second, "a take from every process", func() bool {
		seen := map[string]bool{}
		for _, r := range readTakeLog(t, ctx, b.Client, b.Prefix) {
			seen[r.who] = true
		}
		return len(seen) == 3
	})
	ids := enqueueLineBacklog(t, ctx, q, n)
	waitFor(t, 30*time.Second, "deliveries from every process", func() bool {
		seen := map[string]bool{}
		for _, d := range readLineLog(t, ctx, b.Client, b.Prefix) {
			seen[d.who] = true
		}
		return len(seen) == 3
	})
	if err := q.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	st := mustStats(t, ctx, q)
	if !st.Paused {
		t.Fatal("Stats: not paused")
	}
	since := st.PausedSince.UnixMilli()
	// what was in flight finishes and is acked; nothing new is taken
	waitFor(t, 30*time.Second, "in-flight tasks acked", func() bool { return mustStats(t, ctx, q).InFlight == 0 })
	log := readLineLog(t, ctx, b.Client, b.Prefix)
	var last time.Time
	perWho := map[string]int{}
	for _, d := range log {
		perWho[d.who]++
		if d.delivered > since {
			t.Errorf("task %s taken at %d ms by %s, after the pause began at %d ms", d.id, d.delivered, d.who, since)
		}
		if d.start.After(last) {
			last = d.start
		}
	}
	after := last.Sub(paused)
	st = mustStats(t, ctx, q)
	t.Logf("paused after %d deliveries %v; last handler start %v after Pause returned; %d pending wait",
		len(log), perWho, after.Round(time.Microsecond), st.Pending)
	if after > 100*time.Millisecond {
		t.Errorf("a handler started %v after Pause returned, want ≤ 100 ms", after)
	}
	if st.Pending == 0 || st.Pending+int64(len(log)) != n {
		t.Errorf("%d pending + %d handled, want %d in all with some left waiting", st.Pending, len(log), n)
	}

	if err := q.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "every task handled after Resume", func() bool {
		st := mustStats(t, ctx, q)
		return st.Pending == 0 && st.InFlight == 0
	})
	stop()
	seen := map[string]int{}
	for _, d := range readLineLog(t, ctx, b.Client, b.Prefix) {
		seen[d.id]++
	}
	for id := range ids {
		if seen[id] != 1 {
			t.Errorf("task %s handled %d times, want once", id, seen[id])
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct tasks handled, want %d", len(seen), n)
	}
	b.Client.Del(ctx, lineLog(b.Prefix), takeLog(b.Prefix))
}

type takeRec struct {
	who            string
	at, gate       int64 // Redis TIME ms; gate 0: the take left a token or more
	asked, granted int
}

func readTakeLog(t *testing.T, ctx context.Context, c redis.UniversalClient, prefix string) []takeRec {
	t.Helper()
	entries, err := c.LRange(ctx, takeLog(prefix), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]takeRec, 0, len(entries))
	for _, e := range entries {
		f := strings.Split(e, "|")
		if len(f) != 5 {
			t.Fatalf("take log entry %q", e)
		}
		var r takeRec
		r.who = f[0]
		r.at, _ = strconv.ParseInt(f[1], 10, 64)
		r.asked, _ = strconv.Atoi(f[2])
		r.granted, _ = strconv.Atoi(f[3])
		r.gate, _ = strconv.ParseInt(f[4], 10, 64) // '' (no gate) reads as 0
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at < out[j].at })
	return out
}

// bucketReplay replays the takes between from and to (Redis TIME ms;
// the bucket full at from, as it is at the first delivery) through a
// token bucket of its own, independent of the limiter's stored state:
// each take refills perSecond·Δt, capped at burst, and pays what it was
// given. It returns the tokens the cap threw away (overflow: accrued
// while no process asked for them, the processes stalled or busy), and
// the tokens refused takes did not get although the replayed bucket had
// them (short: a limiter throttling below its rate while asked), and
// the takes told to wait for a token (gate) more than 1 ms past the
// replayed bucket's next one (lateGates: a limiter that holds its
// askers back while tokens are thrown away). The
// takes of one millisecond are replayed as one, since the log's order
// among them may differ from the server's: their refill is the same.
func bucketReplay(takes []takeRec, from, to int64, perSecond, burst float64) (overflow, short float64, lateGates int) {
	level, at := burst, from
	for i := 0; i < len(takes); {
		ms := takes[i].at
		asked, granted, refused, gate := 0, 0, false, int64(0)
		for ; i < len(takes) && takes[i].at == ms; i++ {
			asked += takes[i].asked
			granted += takes[i].granted
			refused = refused || takes[i].granted < takes[i].asked
			gate = max(gate, takes[i].gate)
		}
		if ms < from || ms > to {
			continue
		}
		level += perSecond * float64(ms-at) / 1000
		at = ms
		if level > burst {
			overflow += level - burst
			level = burst
		}
		if refused {
			short += max(0, min(float64(asked), math.Floor(level+1e-6))-float64(granted))
		}
		level -= float64(granted)
		if next := ms + int64(math.Ceil((1-level)*1000/perSecond-1e-6)); gate > next+1 {
			lateGates++
		}
	}
	return overflow, short, lateGates
}

// TestRateAcrossProcesses: three worker processes drain a backlog under a
// rate limit of 25 a second with a burst of 25. Each process logs its
// take calls from the script's raw reply (takeLogger), and the test
// replays them through a token bucket of its own (bucketReplay). The
// limiter is judged over 10 s at the limit from the first delivery: the
// span minus the time of the tokens the bucket's cap threw away while no
// process asked (all of them stalled on a loaded machine, -race, or busy
// with their tasks). Over that time the deliveries beyond the first burst
// come at the limit within ±5%. Because the excuse comes from the replay,
// that ±5% alone would only check that the granted tasks were delivered,
// so a limiter is also held to the replay take by take: the refused takes
// were denied at most 1% of the deliveries in tokens the replayed bucket
// held, and none was told to wait more than 1 ms past its next token (a
// limiter throttling below its rate while asked fails these, however its
// tokens are then excused). In no window W (from 10 ms to the whole run,
// starting at any delivery) are there more than 25·W + 25 deliveries, by
// the Redis TIME of each delivery, stalls or not; and no task is
// delivered before its due time. The rate is low because on the shared
// 2-core machine under load three -race worker processes deliver well
// under 100 tasks a second with no limit at all.
func TestRateAcrossProcesses(t *testing.T) {
	soak.Require(t, "three worker processes for 10 s at the rate limit")
	b := testredis.Redis(t)
	ctx := testCtx(t)
	q, err := New(b.Client, "line", Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	const (
		perSecond = 25
		burst     = 25
		span      = 10_000 // ms at the limit
	)
	enqueueLineBacklog(t, ctx, q, 1000)
	if err := q.SetRate(ctx, Rate{PerSecond: perSecond, Burst: burst}); err != nil {
		t.Fatal(err)
	}
	stop := startLineWorkers(t, b.Prefix, 3, 1, 0, 0)
	// start is the first delivery: the bucket was full then. end is the
	// last take that left less than a token (the bucket empty, so no
	// tokens are left over) once span ms at the limit have passed.
	var start, end int64
	var overflow, short float64
	var lateGates int
	var takes []takeRec
	var polled time.Time
	waitFor(t, 90*time.Second, "10 s at the rate limit", func() bool {
		if time.Since(polled) < 200*time.Millisecond {
			return false
		}
		polled = time.Now()
		log := readLineLog(t, ctx, b.Client, b.Prefix)
		if len(log) == 0 {
			return false
		}
		start = log[0].delivered
		for _, d := range log {
			start = min(start, d.delivered)
		}
		takes = readTakeLog(t, ctx, b.Client, b.Prefix)
		for i := len(takes) - 1; i >= 0; i-- {
			if tk := takes[i]; tk.gate > 0 && tk.granted > 0 {
				end = tk.at
				break
			}
		}
		overflow, short, lateGates = bucketReplay(takes, start, end, perSecond, burst)
		return float64(end-start)-overflow*1000/perSecond >= span
	})
	stop()
	// A process logs a take after its reply, so the poll's log could miss
	// a take just before end that a later one by another process beat to
	// the list: replay the whole log again.
	takes = readTakeLog(t, ctx, b.Client, b.Prefix)
	overflow, short, lateGates = bucketReplay(takes, start, end, perSecond, burst)
	log := readLineLog(t, ctx, b.Client, b.Prefix)
	ds := make([]int64, 0, len(log))
	perWho := map[string]int{}
	judged := 0
	for _, d := range log {
		ds = append(ds, d.delivered)
		if d.delivered < d.due {
			t.Errorf("task %s delivered at %d ms, before its due time %d", d.id, d.delivered, d.due)
		}
		if d.delivered <= end {
			judged++
			perWho[d.who]++
		}
	}
	refused := 0
	for _, tk := range takes {
		if tk.at >= start && tk.at <= end && tk.granted < tk.asked {
			refused++
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	atLimit := float64(end-start) - overflow*1000/perSecond // ms
	got := float64(judged-burst) / (atLimit / 1000)
	perSec := make([]int, (end-start)/1000+1)
	for _, d := range ds {
		if k := (d - start) / 1000; d <= end && k < int64(len(perSec)) {
			perSec[k]++
		}
	}
	t.Logf("%d deliveries in the %d ms from the first to the last take that emptied the bucket (%v), by second %v",
		judged, end-start, perWho, perSec)
	t.Logf("%d takes, %d given less than asked, denied %.0f tokens the replayed bucket held (summed over takes), %d told to wait past its next token; %.1f tokens thrown away by the cap while no process asked: %.0f ms at the limit",
		len(takes), refused, short, lateGates, overflow, atLimit)
	t.Logf("beyond the burst of %d: %.2f a second at the limit (%.2f over the whole span) for a limit of %d",
		burst, got, float64(judged-burst)/(float64(end-start)/1000), perSecond)
	if got < perSecond*0.95 || got > perSecond*1.05 {
		t.Errorf("delivered %.2f a second at the limit, want %d ± 5%%", got, perSecond)
	}
	if lateGates > 0 {
		t.Errorf("%d takes were told to wait for a token more than 1 ms past the replayed bucket's next one", lateGates)
	}
	if short > 0.01*float64(judged) {
		t.Errorf("refused takes were denied %.0f tokens the replayed bucket held (summed over takes), > 1%% of %d deliveries", short, judged)
	}
	if len(perWho) != 3 {
		t.Errorf("deliveries by %d processes, want 3", len(perWho))
	}
	checkRateWindows(t, ds, perSecond, burst, "", 10, 100, 1000, span, ds[len(ds)-1]-ds[0])
	b.Client.Del(ctx, lineLog(b.Prefix), takeLog(b.Prefix))
}
