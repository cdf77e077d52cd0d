package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tierset/tierset/delay"
)

// taskPageSize is how many tasks one browse page lists.
const taskPageSize = 50

// scanWindow bounds the entries a filtered browse page reads (see
// delay.ListOptions.ScanLimit).
const scanWindow = 10_000

// stateTab is one state's tab on the browse page.
type stateTab struct {
	State delay.State
	Label string
	Count int64
	On    bool
}

// tabStates are the browse page's tabs, in the order a task moves
// through them.
var tabStates = []delay.State{delay.StateDue, delay.StateScheduled, delay.StateInFlight, delay.StateDead, delay.StateDone}

var stateLabels = map[delay.State]string{
	delay.StateDue: "due now", delay.StateScheduled: "scheduled", delay.StateInFlight: "in flight",
	delay.StateDead: "dead", delay.StateDone: "done (tombstones)",
}

// actionsFor lists the actions that apply to a state's tasks.
func actionsFor(st delay.State) []string {
	switch st {
	case delay.StateDue, delay.StateScheduled:
		return []string{"run", "reschedule", "cancel", "delete"}
	case delay.StateInFlight:
		return []string{"cancel"}
	case delay.StateDead:
		return []string{"requeue", "delete"}
	}
	return nil
}

// tasksPage browses one state of one queue: GET /tasks?queue&state
// [&cursor][&order=newest][&key=prefix][&err=text].
func (s *Console) tasksPage(w http.ResponseWriter, r *http.Request) {
	ctx, qv := r.Context(), r.URL.Query()
	q, ok := s.namedQueue(w, r, qv.Get("queue"))
	if !ok {
		return
	}
	o, err := listOptions(qv)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	st, order := o.State, "oldest"
	if o.Newest {
		order = "newest"
	}
	p, err := q.List(ctx, o)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	stats, err := q.Stats(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	counts := map[delay.State]int64{delay.StateDue: stats.Ready, delay.StateScheduled: stats.Pending - stats.Ready,
		delay.StateInFlight: stats.InFlight, delay.StateDead: stats.Dead, delay.StateDone: stats.Done}
	tabs := make([]stateTab, len(tabStates))
	for i, ps := range tabStates {
		tabs[i] = stateTab{State: ps, Label: stateLabels[ps], Count: counts[ps], On: ps == st}
	}
	var ws []delay.WorkerInfo
	if st == delay.StateInFlight {
		if ws, err = q.Workers(ctx); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	now := q.ServerNow()
	rows := make([]taskRow, len(p.Tasks))
	for i, t := range p.Tasks {
		rows[i] = entryRow(t, now)
		if st == delay.StateInFlight {
			nameHolder(&rows[i], q.Name(), ws)
		}
	}
	data := map[string]any{"Queue": q.Name(), "State": st, "Label": stateLabels[st], "Tabs": tabs, "Order": order,
		"Rows": rows, "Page": p, "Key": o.KeyPrefix, "ErrText": o.ErrorText, "Filtered": o.KeyPrefix != "" || o.ErrorText != "",
		"Cursor": o.Cursor, "Actions": actionsFor(st), "Window": scanWindow, "Paused": stats.Paused,
		"BulkActions": bulkActionsFor(st), "Here": "/tasks?" + url.Values{"queue": {q.Name()}, "state": {string(st)},
			"key": {o.KeyPrefix}, "err": {o.ErrorText}}.Encode()}
	s.render(w, r, "tasks.html", "Tasks of "+q.Name(), data)
}

// listOptions reads a listing's query: state (default due), order
// (oldest, or newest; newest by default for dead and done), cursor, key
// prefix and error text. The browse page and /api/tasks share it.
func listOptions(qv url.Values) (delay.ListOptions, error) {
	st := delay.State(qv.Get("state"))
	if st == "" {
		st = delay.StateDue
	}
	if !slices.Contains(tabStates, st) {
		return delay.ListOptions{}, fmt.Errorf("%w: state %q (want due, scheduled, inflight, dead or done)", errBadParam, st)
	}
	order := qv.Get("order")
	switch order {
	case "":
		order = "oldest"
		if st == delay.StateDead || st == delay.StateDone {
			order = "newest" // the latest death is the one an alert is about
		}
	case "oldest", "newest":
	default:
		return delay.ListOptions{}, fmt.Errorf("%w: order %q (want oldest or newest)", errBadParam, order)
	}
	return delay.ListOptions{State: st, Cursor: qv.Get("cursor"), Limit: taskPageSize, Newest: order == "newest",
		KeyPrefix: qv.Get("key"), ErrorText: qv.Get("err"), ScanLimit: scanWindow}, nil
}

// entryRow is one listed task.
func entryRow(t delay.TaskInfo, now time.Time) taskRow {
	row := rowOf(t, now)
	row.State, row.Payload, row.Fence = t.State, payloadPreview(t.Payload), t.Fence
	if t.Err != nil {
		row.Err = t.Err.Error()
	}
	return row
}

// taskPage shows one task: GET /task?queue&id.
func (s *Console) taskPage(w http.ResponseWriter, r *http.Request) {
	ctx, qv := r.Context(), r.URL.Query()
	q, ok := s.namedQueue(w, r, qv.Get("queue"))
	if !ok {
		return
	}
	t, err := q.Task(ctx, qv.Get("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	st := pageStateOf(t, q.ServerNow())
	row := entryRow(t, q.ServerNow())
	if st == delay.StateInFlight && t.Err == nil {
		ws, err := q.Workers(ctx)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		nameHolder(&row, q.Name(), ws)
	}
	data := map[string]any{"Queue": q.Name(), "T": t, "Row": row, "PageState": st,
		"Actions": actionsFor(st), "Size": len(t.Payload)}
	data["Payload"], data["JSON"] = showPayload(t.Payload)
	data["Earlier"] = earlierErrors(t.LastErrors)
	if t.Err != nil {
		data["Err"] = t.Err.Error()
	}
	s.render(w, r, "task.html", "Task "+t.ID, data)
}

// earlierErrors are a task's errors before its last, newest first, as the
// task page lists them under the last one; a retry or kill without a
// cause left an empty text, shown as such rather than as a blank line.
func earlierErrors(errs []string) []string {
	if len(errs) < 2 {
		return nil
	}
	out := make([]string, 0, len(errs)-1)
	for i := len(errs) - 2; i >= 0; i-- {
		e := errs[i]
		if e == "" {
			e = "(no error given)"
		}
		out = append(out, e)
	}
	return out
}

// pageStateOf is the browse tab a task is listed under.
func pageStateOf(t delay.TaskInfo, now time.Time) delay.State {
	switch t.State {
	case delay.StateDue, delay.StateScheduled, delay.StatePending:
		if t.When.After(now) {
			return delay.StateScheduled
		}
		return delay.StateDue
	case delay.StateInFlight, delay.StateCancelled:
		return delay.StateInFlight
	case delay.StateDead:
		return delay.StateDead
	}
	return delay.StateDone
}

// showPayload is a payload as indented JSON when it is JSON, else as
// text (the template escapes it) with invalid UTF-8 bytes quoted.
func showPayload(p []byte) (string, bool) {
	if len(p) == 0 {
		return "", false
	}
	if json.Valid(p) {
		var b bytes.Buffer
		if json.Indent(&b, p, "", "  ") == nil {
			return b.String(), true
		}
	}
	if utf8.Valid(p) {
		return string(p), false
	}
	q := strconv.Quote(string(p))
	return q[1 : len(q)-1], false
}
