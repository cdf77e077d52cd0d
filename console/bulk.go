package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
)

// Filter-wide actions: "every task of this state matching this filter",
// however many. The confirm page (GET /confirm?scope=filter&queue&state
// [&key][&err]&action) counts the matches now; its POST (/act with
// scope=filter, the same CSRF checks as every change) starts a job and
// answers at once with a redirect to the job's page, which reloads each
// second until the job ends. The job pages through the matches with
// delay.Queue.List (by cursor, bulkBatch tasks a page) and acts on each
// page by task ID in one script (the actions' own scripts, which skip an
// ID whose task moved on), so no script handles more than bulkBatch
// tasks and Redis serves everyone else between them. Its progress is a
// hash in Redis,
//
//	<QueuePrefix>:console:job:<id>
//
// written after every batch and kept bulkKeep after the last write.
// For the due and dead states the count and the job stop at the count's
// time (ListOptions.To): a task due or dead after the confirm page is not
// part of what the operator confirmed.

const (
	// bulkBatch is the most tasks one listing page and one action script
	// of a filter-wide action handle.
	bulkBatch = 500
	// bulkScan bounds the entries one filtered listing call reads.
	bulkScan = 5000
	// bulkKeep is how long a job's record is kept after its last write.
	bulkKeep = 24 * time.Hour
	// bulkJobs is how many filter-wide jobs one console runs at once.
	bulkJobs = 4
	// bulkTimeout bounds one job's run.
	bulkTimeout = 30 * time.Minute
	// bulkStale is how old a running job's last write may be before its
	// page says the process running it may have stopped.
	bulkStale = 30 * time.Second
)

// bulkActionsFor are the filter-wide actions of a state: the per-task
// ones but reschedule (a time for every match is a rare wish and a
// large mistake).
func bulkActionsFor(st delay.State) []string {
	return slices.DeleteFunc(actionsFor(st), func(a string) bool { return a == "reschedule" })
}

// bulkSpec is a filter-wide action as confirmed.
type bulkSpec struct {
	Queue, Action        string
	State                delay.State
	KeyPrefix, ErrorText string
	AsOf                 time.Time // the count's time: the due and dead listings stop there
	Expected             int64     // the count the operator confirmed
}

// bulkArgs reads a filter-wide action's parameters from a query or form.
func bulkArgs(v url.Values, needCount bool) (bulkSpec, error) {
	sp := bulkSpec{Queue: v.Get("queue"), Action: v.Get("action"), State: delay.State(v.Get("state")),
		KeyPrefix: v.Get("key"), ErrorText: v.Get("err")}
	if !slices.Contains(tabStates, sp.State) {
		return sp, fmt.Errorf("%w: state %q (want due, scheduled, inflight or dead)", errBadParam, sp.State)
	}
	if acts := bulkActionsFor(sp.State); !slices.Contains(acts, sp.Action) {
		return sp, fmt.Errorf("%w: action %q on every %s task (want one of %v)", errBadParam, sp.Action, sp.State, acts)
	}
	if !needCount {
		return sp, nil
	}
	ms, err := strconv.ParseInt(v.Get("asof"), 10, 64)
	if err != nil || ms <= 0 {
		return sp, fmt.Errorf("%w: asof %q (the confirm page's count time, Unix ms)", errBadParam, v.Get("asof"))
	}
	if sp.Expected, err = strconv.ParseInt(v.Get("expected"), 10, 64); err != nil || sp.Expected < 0 {
		return sp, fmt.Errorf("%w: expected %q (the confirm page's count)", errBadParam, v.Get("expected"))
	}
	sp.AsOf = time.UnixMilli(ms)
	return sp, nil
}

// options is the listing the count and the job page through.
func (sp bulkSpec) options() delay.ListOptions {
	o := delay.ListOptions{State: sp.State, KeyPrefix: sp.KeyPrefix, ErrorText: sp.ErrorText, Limit: bulkBatch, ScanLimit: bulkScan}
	if sp.State == delay.StateDue || sp.State == delay.StateDead {
		o.To = sp.AsOf
	}
	return o
}

// filterText is the filter as the log and the pages say it.
func (sp bulkSpec) filterText() string {
	f := "every " + string(sp.State) + " task"
	if sp.KeyPrefix != "" {
		f += ", key starting " + strconv.Quote(sp.KeyPrefix)
	}
	if sp.ErrorText != "" {
		f += ", error containing " + strconv.Quote(sp.ErrorText)
	}
	return f
}

// countMatches counts sp's matches now: the state's total when there is
// no filter, else a walk through the listing, bulkScan entries a call.
func countMatches(ctx context.Context, q *delay.Queue, sp bulkSpec) (int64, error) {
	o := sp.options()
	if sp.KeyPrefix == "" && sp.ErrorText == "" {
		o.Limit = 1
		p, err := q.List(ctx, o)
		return p.Total, err
	}
	var n int64
	for {
		p, err := q.List(ctx, o)
		if err != nil {
			return n, err
		}
		n += int64(len(p.Tasks))
		if p.Next == "" {
			return n, nil
		}
		o.Cursor = p.Next
	}
}

// confirmBulk is the confirm page of a filter-wide action, with the
// number of tasks matching now.
func (s *Console) confirmBulk(w http.ResponseWriter, r *http.Request, q *delay.Queue) {
	qv := r.URL.Query()
	sp, err := bulkArgs(qv, false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sp.AsOf = q.ServerNow()
	n, err := countMatches(r.Context(), q, sp)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	back := safeNext(qv.Get("back"))
	s.render(w, r, "confirm.html", "Confirm: "+sp.Action+" every match", map[string]any{
		"Queue": q.Name(), "Action": sp.Action, "Words": actionWords[sp.Action], "Back": back,
		"Bulk": sp, "Filter": sp.filterText(), "Count": n, "AsOf": sp.AsOf.UnixMilli(), "AsOfTime": sp.AsOf, "Batch": bulkBatch})
}

// bulkJob is a job's record as its page reads it.
type bulkJob struct {
	ID, Queue, Action, Filter, Who, Status, Err string
	Expected, Matched, Done, Moved, Batches     int64
	Started, Updated, Ended                     time.Time
	Stale                                       bool // running, but no write for bulkStale
}

// Skipped: the tasks not acted on, counted two ways: listed but moved on
// before their batch's script ran, and counted by the confirm page but
// gone (or no longer matching) before the job reached them (or not
// reached, the job having failed). A failed batch's tasks are neither
// done nor skipped: whether its script ran is unknown.
func (j bulkJob) Skipped() int64 { return j.Moved + max(0, j.Expected-j.Matched) }

// Percent is the progress bar's fill: done or skipped of what the
// confirm page counted.
func (j bulkJob) Percent() int64 {
	if j.Status != "running" {
		return 100
	}
	if j.Expected == 0 {
		return 0
	}
	return min(100, 100*j.Matched/j.Expected)
}

func (s *Console) jobKey(id string) string { return s.cfg.queuePrefix + ":console:job:" + id }

// startBulk starts a confirmed filter-wide action: its record first (so
// the page it redirects to finds it), then its run in the background.
func (s *Console) startBulk(w http.ResponseWriter, r *http.Request, q *delay.Queue) {
	sp, err := bulkArgs(r.PostForm, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.mu.Lock()
	busy := s.running >= bulkJobs
	if !busy {
		s.running++
	}
	s.mu.Unlock()
	if busy {
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("busy: %d filter-wide actions are running on this console; try again when one ends", bulkJobs), http.StatusServiceUnavailable)
		return
	}
	id := randomHex(8)
	j := bulkJob{ID: id, Queue: q.Name(), Action: sp.Action, Filter: sp.filterText(), Who: s.who(r), Status: "running",
		Expected: sp.Expected, Started: s.cfg.now()}
	if err := s.saveJob(r.Context(), j); err != nil {
		s.endJob()
		s.fail(w, r, fmt.Errorf("starting the job: %w", err))
		return
	}
	// The job outlives the request that started it (it is the point: a
	// 100k action does not hold a connection open), so its context keeps
	// the request's values but not its cancellation, and has a deadline.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), bulkTimeout)
	go func() {
		defer s.endJob()
		defer cancel()
		s.runBulk(ctx, q, sp, j)
	}()
	http.Redirect(w, r, "/job?id="+id, http.StatusSeeOther)
}

func (s *Console) endJob() {
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
}

// runBulk pages through sp's matches and acts on each page by ID, saving
// the progress after each batch, and logs the outcome.
func (s *Console) runBulk(ctx context.Context, q *delay.Queue, sp bulkSpec, j bulkJob) {
	o := sp.options()
	var err error
	for {
		var p delay.Page
		if p, err = q.List(ctx, o); err != nil {
			break
		}
		// Never past the count confirmed: matches that appeared since
		// (a task scheduled, or enqueued with a past due time, after the
		// confirm page) may take the place of counted ones, which are
		// then skipped, but done never exceeds what the operator saw.
		tasks := p.Tasks[:min(int64(len(p.Tasks)), sp.Expected-j.Matched)]
		if len(tasks) > 0 {
			ids := make([]string, len(tasks))
			for i, t := range tasks {
				ids[i] = t.ID
			}
			var done int
			done, err = applyIDs(ctx, q, sp.Action, sp.State, ids, time.Time{})
			j.Matched += int64(len(ids))
			j.Batches++
			if err != nil {
				// Neither done nor skipped: the batch's outcome is unknown.
				err = fmt.Errorf("batch %d (%d tasks; whether it was done is unknown): %w", j.Batches, len(ids), err)
				break
			}
			j.Done += int64(done)
			j.Moved += int64(len(ids) - done)
		}
		if p.Next == "" || j.Matched >= sp.Expected {
			break
		}
		o.Cursor = p.Next
		if err = s.saveJob(ctx, j); err != nil {
			break
		}
	}
	// The end is written even when the job's own deadline ended it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	j.Status, j.Ended = "done", s.cfg.now()
	if err != nil {
		j.Status, j.Err = "failed", err.Error()
		slog.WarnContext(ctx, "console: filter-wide action failed", "job", j.ID, "queue", j.Queue, "action", j.Action, "err", err)
	}
	msg := fmt.Sprintf("%s %s: %d done, %d skipped in %d batches", sp.Action, j.Filter, j.Done, j.Skipped(), j.Batches)
	if j.Err != "" {
		msg += "; failed: " + j.Err
	}
	if note := s.record(ctx, logEntry{Who: j.Who, Action: sp.Action, Queue: j.Queue, Filter: j.Filter, Tasks: int(j.Expected),
		Done: int(j.Done), Skipped: int(j.Skipped()), Job: j.ID, Result: msg}); note != "" && j.Err == "" {
		j.Err = "the action log was not written" + note
	}
	if err := s.saveJob(ctx, j); err != nil {
		slog.WarnContext(ctx, "console: filter-wide action's end not saved", "job", j.ID, "err", err)
	}
}

// saveJob writes j's record and renews its expiry.
func (s *Console) saveJob(ctx context.Context, j bulkJob) error {
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMilli()
	}
	key := s.jobKey(j.ID)
	_, err := s.cfg.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "queue", j.Queue, "action", j.Action, "filter", j.Filter, "who", j.Who, "status", j.Status, "err", j.Err,
			"expected", j.Expected, "matched", j.Matched, "done", j.Done, "moved", j.Moved, "batches", j.Batches,
			"started", ms(j.Started), "updated", s.cfg.now().UnixMilli(), "ended", ms(j.Ended))
		p.PExpire(ctx, key, bulkKeep)
		return nil
	})
	return err
}

// errNoJob: no job record of that ID (never made, or expired).
var errNoJob = errors.New("no such job (it ended more than a day ago, or never was)")

// loadJob reads job id's record.
func (s *Console) loadJob(ctx context.Context, id string) (bulkJob, error) {
	if len(id) != 16 {
		return bulkJob{}, fmt.Errorf("%w: job ID %q", errBadParam, id)
	}
	m, err := s.cfg.client.HGetAll(ctx, s.jobKey(id)).Result()
	if err != nil {
		return bulkJob{}, err
	}
	if len(m) == 0 {
		return bulkJob{}, errNoJob
	}
	n := func(f string) int64 { v, _ := strconv.ParseInt(m[f], 10, 64); return v }
	t := func(f string) time.Time {
		if v := n(f); v > 0 {
			return time.UnixMilli(v)
		}
		return time.Time{}
	}
	j := bulkJob{ID: id, Queue: m["queue"], Action: m["action"], Filter: m["filter"], Who: m["who"], Status: m["status"], Err: m["err"],
		Expected: n("expected"), Matched: n("matched"), Done: n("done"), Moved: n("moved"), Batches: n("batches"),
		Started: t("started"), Updated: t("updated"), Ended: t("ended")}
	j.Stale = j.Status == "running" && s.cfg.now().Sub(j.Updated) > bulkStale
	return j, nil
}

// jobView is a job as GET /api/job answers it, for a script that
// started one with the token and follows it.
type jobView struct {
	ID       string    `json:"id"`
	Queue    string    `json:"queue"`
	Action   string    `json:"action"`
	Filter   string    `json:"filter"`
	Who      string    `json:"who"`
	Status   string    `json:"status"` // running, done or failed
	Stale    bool      `json:"stale,omitempty"`
	Err      string    `json:"error,omitempty"`
	Expected int64     `json:"expected"`
	Matched  int64     `json:"matched"`
	Done     int64     `json:"done"`
	Skipped  int64     `json:"skipped"`
	Batches  int64     `json:"batches"`
	Started  time.Time `json:"started"`
	Updated  time.Time `json:"updated"`
	Ended    time.Time `json:"ended,omitzero"`
}

// apiJob answers GET /api/job?id with the job's progress.
func (s *Console) apiJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.loadJob(r.Context(), r.URL.Query().Get("id"))
	if err != nil {
		apiFail(w, err)
		return
	}
	apiWrite(w, http.StatusOK, jobView{ID: j.ID, Queue: j.Queue, Action: j.Action, Filter: j.Filter, Who: j.Who, Status: j.Status,
		Stale: j.Stale, Err: j.Err, Expected: j.Expected, Matched: j.Matched, Done: j.Done, Skipped: j.Skipped(), Batches: j.Batches,
		Started: j.Started.UTC(), Updated: j.Updated.UTC(), Ended: j.Ended.UTC()})
}

// jobPage shows a filter-wide action's progress: GET /job?id. It reloads
// each second while the job runs.
func (s *Console) jobPage(w http.ResponseWriter, r *http.Request) {
	j, err := s.loadJob(r.Context(), r.URL.Query().Get("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	data := map[string]any{"J": j}
	if j.Status == "running" && !j.Stale {
		data["Refresh"] = 1
	}
	s.render(w, r, "job.html", "Filter-wide "+j.Action+" on "+j.Queue, data)
}
