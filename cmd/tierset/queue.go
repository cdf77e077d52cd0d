package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/deadletters"
	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/internal/opsview"
	"github.com/tierset/tierset/internal/text"
)

const queueSynopsis = "tierset queue ls|workers|stats|tasks|task|dead|requeue|purge|cancel|reschedule|run|pause|resume [-queue NAME] -redis URL [-prefix P] [-state S] [-id ID] [-ids ID,...] [-key K [-token T]] [-at TIME | -in D] [-limit N] [-json] [-payload] [-yes]"

// queueCmd is tierset queue: its subcommands, in the order help lists
// them, each with the flags it reads besides -redis, -prefix and -queue.
var queueCmd = command{name: "queue", common: []string{"redis", "prefix", "queue"}, flags: queueFlags, subs: []subcommand{
	{"ls", []string{"json"}}, {"workers", []string{"json"}}, {"stats", []string{"json"}},
	{"tasks", []string{"state", "limit", "json"}}, {"task", []string{"id", "json", "payload"}}, {"dead", []string{"limit", "json"}},
	{"requeue", []string{"ids", "yes"}}, {"purge", []string{"ids", "yes"}},
	{"cancel", []string{"key", "token"}}, {"reschedule", []string{"key", "at", "in"}}, {"run", []string{"key"}},
	{"pause", nil}, {"resume", nil},
}}

func cmdQueue(ctx context.Context, args []string, e *env) error {
	sub, fs, err := queueCmd.parse(args, e)
	if err != nil {
		return err
	}
	str := func(name string) string { return fs.Lookup(name).Value.String() }
	name, prefix := str("queue"), str("prefix")
	if sub != "ls" && (sub != "workers" || name != "") {
		if name == "" {
			return usagef("-queue is required")
		}
		if err := keyname.Check(name); err != nil {
			return usagef("-queue %s: invalid queue name: %v", quoteArg(name), err)
		}
	}
	redisURL := str("redis")
	if !redisGiven(redisURL) {
		return usagef("-redis (or $TIERSET_REDIS_URL) is required: a queue lives in a real Redis")
	}
	limit := fs.Lookup("limit").Value.(interface{ Get() any }).Get().(int)
	if limit <= 0 || limit > delay.MaxBatch {
		return usagef("-limit %d: want 1 to %d", limit, delay.MaxBatch)
	}
	// Every flag is checked before Redis is reached.
	var when delay.When
	switch sub {
	case "cancel", "reschedule", "run":
		if str("key") == "" {
			return usagef("%s needs -key (the business key of the task)", sub)
		}
	}
	if sub == "task" && str("id") == "" {
		return usagef("task needs -id (the task's ID, as tasks and dead list it)")
	}
	if sub == "reschedule" {
		w, err := parseWhen(str("at"), str("in"))
		if err != nil {
			return err
		}
		when = w
	}
	ids, err := parseIDs(str("ids"))
	if err != nil {
		return err
	}
	be, err := connect(ctx, redisURL, e)
	if err != nil {
		return err
	}
	defer be.close()
	names, err := delay.Discover(ctx, be.client, prefix)
	if err != nil {
		return err
	}
	out := output{w: e.stdout, json: str("json") == "true"}
	if sub == "ls" {
		return queueList(ctx, be, prefix, names, out)
	}
	if sub == "workers" {
		if name != "" && !slices.Contains(names, name) {
			return fmt.Errorf("no queue %s under prefix %s (%s)", quoteArg(name), quoteArg(prefix), knownQueues(names))
		}
		return queueWorkers(ctx, be, prefix, name, out)
	}
	if !slices.Contains(names, name) {
		return fmt.Errorf("no queue %s under prefix %s (%s)", quoteArg(name), quoteArg(prefix), knownQueues(names))
	}
	q, err := delay.New(be.client, name, delay.Options{Prefix: prefix})
	if err != nil {
		return usagef("%v", err)
	}
	yes := str("yes") == "true"
	switch sub {
	case "stats":
		return queueStats(ctx, q, out)
	case "tasks":
		return queueTasks(ctx, q, str("state"), limit, out)
	case "task":
		return queueTask(ctx, q, str("id"), str("payload") == "true", out)
	case "dead":
		return queueDead(ctx, q, limit, out)
	case "pause", "resume":
		return queuePause(ctx, q, sub == "pause", e.stdout)
	case "cancel", "reschedule", "run":
		if sub == "run" {
			when = delay.When{} // now, by Redis TIME
		}
		return queueKeyChange(ctx, q, sub, str("key"), str("token"), when, e.stdout)
	default:
		return queueChange(ctx, q, sub, ids, yes, e)
	}
}

func queueFlags() *cmdFlags {
	fs := newFlags("queue", queueSynopsis)
	fs.String("queue", "", "queue `NAME`; required but for ls and workers (there it keeps the pools serving it)")
	fs.String("redis", "", "Redis: host:port, a redis:// or rediss:// `URL`, or comma-separated cluster seeds (default $TIERSET_REDIS_URL); required")
	fs.String("prefix", delay.DefaultPrefix, "key `prefix`")
	fs.String("state", "pending", "tasks: which tasks to list: due (due now), scheduled (due later), pending (both, soonest first), inflight (oldest lease first), dead or done")
	fs.String("id", "", "task: the task `ID` to show whole, its earlier errors included")
	fs.String("ids", "", "requeue/purge only these dead task `IDs` (comma-separated); default all")
	fs.String("key", "", "cancel/reschedule/run: the task's business `key`")
	fs.String("token", "", "cancel: only the task of this `token` (default every task of -key)")
	fs.String("at", "", "reschedule: the new due `time` (RFC 3339)")
	fs.String("in", "", "reschedule: the new due time as a `delay` from now (such as 90s, 2h or 3d)")
	fs.Int("limit", 50, "tasks/dead: list at most `N` tasks")
	fs.Bool("yes", false, "requeue/purge without asking for confirmation")
	fs.Bool("json", false, "ls/workers/stats/tasks/task/dead: print JSON (the field names of the console's /api answers)")
	fs.Bool("payload", false, "task: print the payload too (JSON as is, other bytes escaped); -json always includes it")
	return fs
}

// parseIDs reads -ids, task IDs as every listing prints them; any other
// text is a mistake reported before Redis is reached.
func parseIDs(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var ids, bad []string
	for _, id := range strings.Split(s, ",") {
		id = strings.TrimSpace(id)
		if !isTaskID(id) {
			bad = append(bad, quoteArg(id))
			continue
		}
		ids = append(ids, id)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("-ids: %s %s (task IDs are lower-case base-36 numbers, as the listings print them)", strings.Join(bad, ", "), plural(len(bad), "is not a task ID", "are not task IDs"))
	}
	return ids, nil
}

// isTaskID reports whether s is a task ID as delay writes it: a positive
// number in lower-case base 36 without leading zeros. "1A" or "01" would
// name the same number but match no task, so they are refused.
func isTaskID(s string) bool {
	if s == "" || s[0] == '0' || strings.ToLower(s) != s {
		return false
	}
	_, err := strconv.ParseUint(s, 36, 63)
	return err == nil
}

// parseWhen reads reschedule's -at or -in (exactly one).
func parseWhen(at, in string) (delay.When, error) {
	switch {
	case (at == "") == (in == ""):
		return delay.When{}, usagef("reschedule needs exactly one of -at TIME or -in DELAY")
	case at != "":
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return delay.When{}, usagef("-at %s: want an RFC 3339 time such as 2026-12-15T12:00:00+08:00", quoteArg(at))
		}
		return delay.At(t), nil
	}
	d, err := text.ParseDuration(in)
	if err != nil || d < 0 {
		return delay.When{}, usagef("-in %s: want a delay ≥ 0 such as 90s, 2h or 3d", quoteArg(in))
	}
	return delay.After(d), nil
}

func knownQueues(names []string) string {
	if len(names) == 0 {
		return "there is no queue under it"
	}
	return "queues: " + escapeJoin(names)
}

// queueList prints one line per queue under prefix.
func queueList(ctx context.Context, be *backend, prefix string, names []string, out output) error {
	qs := make([]*delay.Queue, len(names))
	for i, n := range names {
		q, err := delay.New(be.client, n, delay.Options{Prefix: prefix})
		if err != nil {
			return err
		}
		qs[i] = q
	}
	views, err := opsview.ReadQueues(ctx, qs)
	if err != nil {
		return err
	}
	if out.json {
		return out.encode(views)
	}
	w := out.w
	if len(views) == 0 {
		fmt.Fprintf(w, "no queue under prefix %s\n", text.Escape(prefix))
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "QUEUE\tREADY\tSCHEDULED\tIN FLIGHT\tDEAD\tOLDEST DUE\tSTATE\t")
	for _, v := range views {
		state := "running"
		if v.Paused {
			state = "paused"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t\n", text.Escape(v.Name), v.Ready, v.Scheduled, v.InFlight, v.Dead, v.OldestDueAge, state)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s\n", count(len(views), "queue", "queues"))
	return nil
}

// queueWorkers prints the live worker pools under prefix (those serving
// queue when it is not ""), from their heartbeats, ages by Redis TIME.
func queueWorkers(ctx context.Context, be *backend, prefix, queue string, out output) error {
	ws, err := delay.ListWorkers(ctx, be.client, prefix)
	if err != nil {
		return err
	}
	views := []opsview.Worker{}
	for _, w := range ws {
		if queue == "" || w.Serves(queue) {
			views = append(views, opsview.WorkerOf(w))
		}
	}
	if out.json {
		return out.encode(views)
	}
	tw := tabwriter.NewWriter(out.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tHOST\tPID\tMODE\tRUNNING\tQUEUES\tLAST BEAT\tVERSION")
	for _, w := range views {
		var qs []string
		for _, l := range w.Lines {
			qs = append(qs, l.Queues...)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d/%d\t%s\t%s ago\t%s\n", text.Escape(w.ID), text.Escape(w.Host), w.PID, w.Mode,
			w.Running, w.Concurrency, escapeJoin(qs), w.Age, text.Escape(w.Version))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out.w, "%s\n", count(len(views), "live worker pool", "live worker pools"))
	return nil
}

// queueTasks lists tasks of one state (at most limit, MaxBatch).
func queueTasks(ctx context.Context, q *delay.Queue, state string, limit int, out output) error {
	w := out.w
	label, ok := map[delay.State]string{delay.StateDue: "due now", delay.StateScheduled: "scheduled",
		delay.StatePending: "pending", delay.StateInFlight: "in flight", delay.StateDone: "done"}[delay.State(state)]
	switch {
	case state == string(delay.StateDead):
		return queueDead(ctx, q, limit, out)
	case !ok:
		return usagef("-state %s: want due, scheduled, pending, inflight, dead or done", quoteArg(state))
	}
	p, err := q.List(ctx, delay.ListOptions{State: delay.State(state), Limit: limit})
	if err != nil {
		return err
	}
	var ws []delay.WorkerInfo
	if state == string(delay.StateInFlight) {
		if ws, err = q.Workers(ctx); err != nil {
			return err
		}
	}
	if out.json {
		v := opsview.PageOf(q.Name(), delay.State(state), p)
		opsview.NameHolders(&v, ws)
		return out.encode(v)
	}
	tasks, total := p.Tasks, p.Total
	fmt.Fprintf(w, "queue %s: %s %s", text.Escape(q.Name()), count(int(total), "task", "tasks"), label)
	if int64(len(tasks)) < total {
		fmt.Fprintf(w, " (showing the first %d)", len(tasks))
	}
	fmt.Fprintln(w)
	if len(tasks) == 0 {
		return nil
	}
	when := map[string]string{"inflight": "LEASE ENDS", "done": "ACKED"}[state]
	if when == "" {
		when = "DUE"
	}
	if state == string(delay.StateInFlight) {
		return inflightTable(w, q.Name(), tasks, ws)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\tKEY\tATTEMPTS\t%s\tLAST ERROR\n", when)
	for _, t := range tasks {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", text.Escape(t.ID), strconv.Quote(t.Key), t.Attempt, t.When.UTC().Format(time.RFC3339Nano), text.Escape(t.LastError))
	}
	return tw.Flush()
}

// inflightTable lists in-flight tasks with the worker pool whose last
// heartbeat lists each (opsview.Holder), and says what an unlisted one
// can mean.
func inflightTable(w io.Writer, queue string, tasks []delay.TaskInfo, ws []delay.WorkerInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\tKEY\tATTEMPTS\tLEASE ENDS\tWORKER\tLAST ERROR\n")
	unlisted := 0
	for _, t := range tasks {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", text.Escape(t.ID), strconv.Quote(t.Key), t.Attempt,
			t.When.UTC().Format(time.RFC3339Nano), holderText(queue, t.ID, ws, &unlisted), text.Escape(t.LastError))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if unlisted > 0 {
		fmt.Fprintf(w, "%s: %s\n", opsview.NotListed, opsview.NotListedWhy)
	}
	return nil
}

// holderText is the pool holding task id as "ID (host)", or
// opsview.NotListed, counted in *unlisted.
func holderText(queue, id string, ws []delay.WorkerInfo, unlisted *int) string {
	worker, host := opsview.Holder(ws, queue, id)
	if worker == "" {
		*unlisted++
		return opsview.NotListed
	}
	return text.Escape(worker) + " (" + text.Escape(host) + ")"
}

// queueTask prints one task whole: its fields, its last error and the
// earlier ones its record keeps (newest first), and its payload's size.
func queueTask(ctx context.Context, q *delay.Queue, id string, payload bool, out output) error {
	w := out.w
	t, err := q.Task(ctx, id)
	if err != nil {
		return err
	}
	inflight := t.State == delay.StateInFlight || t.State == delay.StateCancelled
	var ws []delay.WorkerInfo
	if inflight && t.Err == nil {
		if ws, err = q.Workers(ctx); err != nil {
			return err
		}
	}
	if out.json {
		v := opsview.TaskOf(t, true)
		opsview.NameHolder(&v, q.Name(), ws)
		if err := out.encode(v); err != nil {
			return err
		}
		if t.Err != nil {
			return fmt.Errorf("task %s: %w", text.Escape(t.ID), t.Err)
		}
		return nil
	}
	fmt.Fprintf(w, "queue %s: task %s: %s\n", text.Escape(q.Name()), text.Escape(t.ID), t.State)
	if t.Err != nil {
		return fmt.Errorf("task %s: %w", text.Escape(t.ID), t.Err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	when := map[delay.State]string{delay.StateDue: "due", delay.StateScheduled: "due", delay.StateInFlight: "lease ends", delay.StateCancelled: "lease ends",
		delay.StateDead: "died", delay.StateDone: "forgotten at"}[t.State]
	fmt.Fprintf(tw, "key\t%s\n", strconv.Quote(t.Key))
	fmt.Fprintf(tw, "token\t%s\n", strconv.Quote(t.Token))
	fmt.Fprintf(tw, "attempts\t%d\n", t.Attempt)
	fmt.Fprintf(tw, "%s\t%s\n", when, t.When.UTC().Format(time.RFC3339Nano))
	if t.Fence != 0 {
		fmt.Fprintf(tw, "fence\t%d\n", t.Fence)
	}
	unlisted := 0
	if inflight {
		fmt.Fprintf(tw, "worker\t%s\n", holderText(q.Name(), t.ID, ws, &unlisted))
	}
	if unlisted > 0 {
		fmt.Fprintf(tw, "\t(%s)\n", opsview.NotListedWhy)
	}
	fmt.Fprintf(tw, "payload\t%d bytes\n", len(t.Payload))
	if payload && len(t.Payload) > 0 {
		fmt.Fprintf(tw, "\t%s\n", text.Escape(string(t.Payload)))
	}
	last := "-"
	if len(t.LastErrors) > 0 {
		last = errLine(t.LastError)
	}
	fmt.Fprintf(tw, "last error\t%s\n", last)
	for i := len(t.LastErrors) - 2; i >= 0; i-- {
		label := ""
		if i == len(t.LastErrors)-2 {
			label = "earlier errors"
		}
		fmt.Fprintf(tw, "%s\t%s\n", label, errLine(t.LastErrors[i]))
	}
	return tw.Flush()
}

// errLine is one stored error text for a terminal line: escaped, and
// named when a retry or kill gave none.
func errLine(s string) string {
	if s == "" {
		return "(no error given)"
	}
	return text.Escape(s)
}

// queueKeyChange cancels, reschedules or runs now the tasks of a key; a
// key with no task it could act on is an error.
func queueKeyChange(ctx context.Context, q *delay.Queue, sub, key, token string, when delay.When, w io.Writer) error {
	switch sub {
	case "cancel":
		r, err := q.Cancel(ctx, delay.Selector{Key: key, Token: token})
		if err != nil {
			return err
		}
		if r.Found == 0 && r.Already == 0 {
			return fmt.Errorf("queue %s: no task of key %s to cancel", text.Escape(q.Name()), strconv.Quote(key))
		}
		fmt.Fprintf(w, "queue %s: key %s: cancelled %s pending, %d dead; %d in flight marked (their ack removes them, they are never retried)",
			text.Escape(q.Name()), strconv.Quote(key), count(r.Pending, "task", "tasks"), r.Dead, r.InFlight)
		if r.Already > 0 {
			fmt.Fprintf(w, ", %d already marked", r.Already)
		}
		fmt.Fprintln(w)
		return nil
	}
	r, err := q.Reschedule(ctx, delay.Selector{Key: key}, when)
	if err != nil {
		return err
	}
	if r.Moved == 0 {
		return fmt.Errorf("queue %s: key %s has no pending task to %s (in flight %d, dead %d)", text.Escape(q.Name()), strconv.Quote(key), sub, r.InFlight, r.Dead)
	}
	verb := "rescheduled"
	if sub == "run" {
		verb = "made due now"
	}
	fmt.Fprintf(w, "queue %s: key %s: %s %s, due %s\n", text.Escape(q.Name()), strconv.Quote(key), verb, count(r.Moved, "task", "tasks"), r.Due.UTC().Format(time.RFC3339Nano))
	return nil
}

// queuePause pauses or resumes a queue: its workers stop taking (tasks
// in flight finish) or take again.
func queuePause(ctx context.Context, q *delay.Queue, pause bool, w io.Writer) error {
	before, err := q.Stats(ctx)
	if err != nil {
		return err
	}
	if pause {
		err = q.Pause(ctx)
	} else {
		err = q.Resume(ctx)
	}
	if err != nil {
		return err
	}
	name := text.Escape(q.Name())
	switch {
	case pause && before.Paused:
		fmt.Fprintf(w, "queue %s: already paused since %s\n", name, before.PausedSince.UTC().Format(time.RFC3339))
	case pause:
		fmt.Fprintf(w, "queue %s: paused; workers take nothing more (%s in flight finish)\n", name, count(int(before.InFlight), "task", "tasks"))
	case !before.Paused:
		fmt.Fprintf(w, "queue %s: was not paused\n", name)
	default:
		fmt.Fprintf(w, "queue %s: resumed; %s ready\n", name, count(int(before.Ready), "task", "tasks"))
	}
	return nil
}

// count is "1 task", "2 tasks".
func count(n int, one, many string) string {
	return strconv.Itoa(n) + " " + plural(n, one, many)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func queueStats(ctx context.Context, q *delay.Queue, out output) error {
	w := out.w
	st, err := q.Stats(ctx)
	if err != nil {
		return err
	}
	if out.json {
		return out.encode(opsview.QueueOf(q.Name(), st))
	}
	fmt.Fprintf(w, "queue %s at %s (Redis TIME)\n", q.Name(), st.ServerTime.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(w, "  depth:    pending %d (ready %d), in flight %d, dead %d, finished kept (DoneTTL) %d\n", st.Pending, st.Ready, st.InFlight, st.Dead, st.Done)
	fmt.Fprintf(w, "  oldest due task waiting: %s\n", text.Duration(st.OldestDueAge))
	switch {
	case st.Paused:
		fmt.Fprintf(w, "  paused since %s (tierset queue resume to let workers take again)\n", st.PausedSince.UTC().Format(time.RFC3339))
	default:
		fmt.Fprintln(w, "  running (not paused)")
	}
	if st.Rate.PerSecond > 0 {
		fmt.Fprintf(w, "  rate limit: %g tasks/s, burst %d\n", st.Rate.PerSecond, st.Rate.Burst)
	}
	fmt.Fprintf(w, "  counters: delivered %d, acked %d, retries %d, dead-lettered %d, expired leases %d, cancelled %d, corrupt %d, seq overflows %d\n",
		st.Delivered, st.Acked, st.Retries, st.DeadLettered, st.Expired, st.Cancelled, st.Corrupt, st.SeqOverflows)
	if l := st.Lateness; l.Total > 0 {
		// The buckets are powers of two, so each figure is an upper bound.
		fmt.Fprintf(w, "  lateness (Redis TIME at take - due, %d deliveries): p50 < %s, p99 < %s, p99.9 < %s, max < %s\n",
			l.Total, text.Duration(l.P50), text.Duration(l.P99), text.Duration(l.P999), text.Duration(l.Max))
	} else {
		fmt.Fprintln(w, "  lateness: no deliveries yet")
	}
	return nil
}

func queueDead(ctx context.Context, q *delay.Queue, limit int, out output) error {
	w := out.w
	if limit <= 0 {
		return usagef("-limit %d: want > 0", limit)
	}
	page, err := q.List(ctx, delay.ListOptions{State: delay.StateDead, Limit: limit})
	if err != nil {
		return err
	}
	if out.json {
		return out.encode(opsview.PageOf(q.Name(), delay.StateDead, page))
	}
	fmt.Fprintf(w, "queue %s: %s", text.Escape(q.Name()), count(int(page.Total), "dead letter", "dead letters"))
	if int64(len(page.Tasks)) < page.Total {
		fmt.Fprintf(w, " (showing %d)", len(page.Tasks))
	}
	fmt.Fprintln(w)
	if len(page.Tasks) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKEY\tATTEMPTS\tDIED\tLAST ERROR")
	for _, t := range page.Tasks {
		// IDs, keys and error texts are whatever producers and handlers
		// stored: escaped, so none can move the cursor or forge a line.
		if t.Err != nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\tcorrupt record: %s\n", text.Escape(t.ID), text.Escape(t.Err.Error()))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", text.Escape(t.ID), strconv.Quote(t.Key), t.Attempt, t.When.UTC().Format(time.RFC3339), text.Escape(t.LastError))
	}
	return tw.Flush()
}

func queueChange(ctx context.Context, q *delay.Queue, sub string, ids []string, yes bool, e *env) error {
	page, err := q.List(ctx, delay.ListOptions{State: delay.StateDead, Limit: 1})
	if err != nil {
		return err
	}
	what := "all " + count(int(page.Total), "dead letter", "dead letters")
	if len(ids) > 0 {
		// An ID that is not a dead letter of this queue is a mistake (a
		// typo, another queue's ID): refused before anything changes.
		dead, err := deadletters.AllIDs(ctx, q)
		if err != nil {
			return err
		}
		var unknown []string
		for _, id := range ids {
			if !slices.Contains(dead, id) {
				unknown = append(unknown, id)
			}
		}
		if len(unknown) > 0 {
			return fmt.Errorf("queue %s: %s %s not a dead letter (nothing changed)", text.Escape(q.Name()), escapeJoin(unknown), plural(len(unknown), "is", "are"))
		}
		what = fmt.Sprintf("%s (%s)", count(len(ids), "dead letter", "dead letters"), escapeJoin(ids))
	}
	if len(ids) == 0 && page.Total == 0 {
		fmt.Fprintf(e.stdout, "queue %s: no dead letters, nothing to %s\n", q.Name(), sub)
		return nil
	}
	if !yes {
		if err := confirm(e, fmt.Sprintf("%s %s of queue %s? [y/N] ", sub, what, q.Name())); err != nil {
			return err
		}
	}
	var n int
	switch {
	case sub == "purge" && len(ids) == 0:
		n, err = q.Purge(ctx, delay.Selector{All: true})
	case sub == "purge":
		n, err = q.Purge(ctx, delay.Selector{IDs: ids})
	default:
		if len(ids) == 0 {
			if ids, err = deadletters.AllIDs(ctx, q); err != nil {
				return err
			}
		}
		n, err = deadletters.Requeue(ctx, q, ids)
	}
	if err != nil {
		return err
	}
	verb := map[string]string{"requeue": "requeued", "purge": "purged"}[sub]
	fmt.Fprintf(e.stdout, "queue %s: %s %s\n", text.Escape(q.Name()), verb, count(n, "dead letter", "dead letters"))
	return nil
}

// confirm asks on stdout and reads one answer from stdin, which must be
// a terminal: a script that forgot -yes is refused rather than answered
// by whatever its stdin holds.
func confirm(e *env, question string) error {
	if f, ok := e.stdin.(*os.File); !ok || !isTerminal(f) {
		return fmt.Errorf("refusing without confirmation: stdin is not a terminal (pass -yes to %s)", strings.Fields(question)[0])
	}
	fmt.Fprint(e.stdout, question)
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil {
		return fmt.Errorf("refusing without confirmation: %v (pass -yes to skip the question)", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return fmt.Errorf("not confirmed, nothing changed")
}
