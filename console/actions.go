package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tierset/tierset/delay"
)

// maxActionIDs bounds one bulk action (a page's worth and then some).
const maxActionIDs = 100

// actionWords is each action's wording on the confirm page.
var actionWords = map[string]string{
	"cancel":     "Cancel: a pending or dead task is removed; a task in flight is marked, its ack removes it and it is never retried.",
	"run":        "Run now: the pending task becomes due at once.",
	"reschedule": "Reschedule: the pending task becomes due at the time given.",
	"requeue":    "Requeue: the dead task is due again now, its attempts reset.",
	"delete":     "Delete: the task, its record and payload are removed for good. A task listed as pending and taken since is cancelled instead (one dead since is removed); a task listed as dead is removed only if still dead: one requeued since is left alone and counted as skipped.",
	"pause":      "Pause: no worker of any process takes tasks of this queue until it is resumed; enqueues keep working.",
	"resume":     "Resume: the queue's workers take again.",
}

// confirmAction is the confirm step of every task and queue action:
// GET /confirm?queue&action[&id...][&at][&state], or with scope=filter
// for every task matching a filter (bulk.go). It changes nothing; its
// form POSTs to /act with the CSRF token, and with the state the tasks
// were listed in (seenArg) when the link named one.
func (s *Console) confirmAction(w http.ResponseWriter, r *http.Request) {
	ctx, qv := r.Context(), r.URL.Query()
	q, ok := s.namedQueue(w, r, qv.Get("queue"))
	if !ok {
		return
	}
	if qv.Get("scope") == "filter" {
		s.confirmBulk(w, r, q)
		return
	}
	action, ids, at, err := actionArgs(qv)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	seen, err := seenArg(qv)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var rows []taskRow
	now := q.ServerNow()
	for _, id := range ids {
		t, err := q.Task(ctx, id)
		if errors.Is(err, delay.ErrNotFound) {
			rows = append(rows, taskRow{ID: id, Err: "not found (finished or removed since)"})
			continue
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		rows = append(rows, entryRow(t, now))
	}
	data := map[string]any{"Queue": q.Name(), "Action": action, "Words": actionWords[action], "IDs": ids, "Rows": rows,
		"Back": safeNext(qv.Get("back")), "Seen": seen}
	if !at.IsZero() {
		data["At"] = at.UTC().Format(time.RFC3339)
	}
	s.render(w, r, "confirm.html", "Confirm: "+action, data)
}

// actionArgs reads and checks an action's parameters (from a query or a
// form): a known action, task IDs for a task action (none for pause and
// resume), and a time for reschedule.
func actionArgs(v url.Values) (action string, ids []string, at time.Time, err error) {
	action = v.Get("action")
	if _, ok := actionWords[action]; !ok {
		return "", nil, at, fmt.Errorf("%w: action %q", errBadParam, action)
	}
	for _, id := range v["id"] {
		if id = strings.TrimSpace(id); id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	queueAction := action == "pause" || action == "resume"
	switch {
	case queueAction && len(ids) > 0:
		return "", nil, at, fmt.Errorf("%w: %s takes no task IDs", errBadParam, action)
	case !queueAction && len(ids) == 0:
		return "", nil, at, fmt.Errorf("%w: select at least one task", errBadParam)
	case len(ids) > maxActionIDs:
		return "", nil, at, fmt.Errorf("%w: %d tasks (at most %d at once)", errBadParam, len(ids), maxActionIDs)
	}
	if action == "reschedule" {
		if at, err = parseAt(v.Get("at")); err != nil {
			return "", nil, at, err
		}
	}
	return action, ids, at, nil
}

// seenArg reads the state the operator saw the tasks in: the browse
// tab their selection was made on, or the state their task page showed.
// Absent (a hand-made form, a link from elsewhere), it is "": unknown,
// and a delete is a Cancel (deleteSeen). A value the
// console never lists is an error: a mistyped "dead" must not fall
// back to a delete of tasks that are no longer dead.
func seenArg(v url.Values) (delay.State, error) {
	st := delay.State(v.Get("state"))
	if st != "" && st != delay.StatePending && !slices.Contains(tabStates, st) {
		return "", fmt.Errorf("%w: state %q (the state the tasks were listed in: due, scheduled, pending, inflight, dead or done)", errBadParam, st)
	}
	return st, nil
}

// parseAt reads a reschedule time: RFC 3339, or a datetime-local field's
// "2006-01-02T15:04[:05]" read as UTC.
func parseAt(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, strings.TrimSpace(s), time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: time %q (want 2026-12-15T12:00 in UTC, or RFC 3339)", errBadParam, s)
}

// act runs a confirmed action: POST /act with csrf, the token (or login),
// confirm=yes and the confirm page's fields; then back to the list with
// what happened.
func (s *Console) act(w http.ResponseWriter, r *http.Request) {
	q, ok := s.changeQueue(w, r)
	if !ok {
		return
	}
	if r.PostForm.Get("confirm") != "yes" {
		http.Error(w, "not confirmed: use the confirm page's button", http.StatusBadRequest)
		return
	}
	if r.PostForm.Get("scope") == "filter" {
		s.startBulk(w, r, q)
		return
	}
	action, ids, at, err := actionArgs(r.PostForm)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	seen, err := seenArg(r.PostForm)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	msg, done, err := s.apply(r.Context(), q, action, seen, ids, at)
	e := logEntry{Who: s.who(r), Action: action, Queue: q.Name(), Tasks: len(ids), Done: done, Skipped: len(ids) - done, Result: msg}
	if err != nil {
		e.Skipped, e.Result = 0, msg+": "+err.Error()
		s.record(r.Context(), e)
		s.fail(w, r, fmt.Errorf("%s: %w", msg, err))
		return
	}
	msg += s.record(r.Context(), e)
	back := safeNext(r.PostForm.Get("back"))
	if back == "/" {
		back = "/queue?name=" + url.QueryEscape(q.Name())
	}
	sep := "?"
	if strings.Contains(back, "?") {
		sep = "&"
	}
	http.Redirect(w, r, back+sep+"msg="+url.QueryEscape(msg), http.StatusSeeOther)
}

// apply runs one action on the tasks ids, seen in state seen ("" when
// the form did not say), in one script, by task ID (applyIDs), or pauses
// or resumes the queue, and says what happened.
func (s *Console) apply(ctx context.Context, q *delay.Queue, action string, seen delay.State, ids []string, at time.Time) (msg string, done int, err error) {
	switch action {
	case "pause":
		return "paused " + q.Name(), 0, q.Pause(ctx)
	case "resume":
		return "resumed " + q.Name(), 0, q.Resume(ctx)
	}
	done, err = applyIDs(ctx, q, action, seen, ids, at)
	if err != nil {
		return action + ": failed (reload the list to see whether it was done)", 0, err
	}
	skipped := len(ids) - done
	msg = fmt.Sprintf("%s: %d of %d tasks", action, done, len(ids))
	if action == "reschedule" {
		msg += " now due " + at.UTC().Format(time.RFC3339)
	}
	switch {
	case skipped > 0 && action == "delete" && seen == delay.StateDead:
		msg += fmt.Sprintf(" (%d skipped: gone, or no longer dead; a task requeued since is left alone)", skipped)
	case skipped > 0:
		msg += fmt.Sprintf(" (%d skipped: gone, or not in a state this action applies to)", skipped)
	}
	return msg, done, nil
}

// applyIDs runs a task action on ids (at most delay.MaxBatch), listed
// in state seen ("" when unknown), in one script, by task ID
// (delay.Queue.Cancel, Purge, Reschedule and Requeue with a Selector of
// IDs): never a read of a task's key and token followed by a change by
// key and token, which would reach a task enqueued again under them in
// between. An ID whose task has finished or gone, or that is in no state
// the action applies to, is skipped: done counts the others. On an error
// the batch is all done or none of it (one script), which a lost reply
// leaves unknown. Every task action of the console, one task, a
// selection or a filter-wide batch, comes here.
func applyIDs(ctx context.Context, q *delay.Queue, action string, seen delay.State, ids []string, at time.Time) (done int, err error) {
	switch action {
	case "delete":
		return deleteSeen(ctx, q, seen, ids)
	case "cancel":
		// A pending or dead task is removed with its record, one in
		// flight is marked.
		res, err := q.Cancel(ctx, delay.Selector{IDs: ids})
		return res.Found, err
	case "run", "reschedule":
		when := delay.When{}
		if action == "reschedule" {
			when = delay.At(at)
		}
		res, err := q.Reschedule(ctx, delay.Selector{IDs: ids}, when)
		return res.Moved, err
	case "requeue":
		return q.Requeue(ctx, delay.Selector{IDs: ids})
	}
	return 0, fmt.Errorf("%w: action %q", errBadParam, action)
}

// deleteSeen deletes ids, listed in state seen. Listed dead, it is a
// Purge by ID, which removes only tasks still dead: the operator
// confirmed deleting dead letters, and one requeued since (by another
// operator, the CLI, a script) is a live task they never saw pending, so
// it is skipped. Otherwise (pending, or a state unknown) it is Cancel's
// one script: a pending or dead task is removed with its record, one in
// flight is marked.
func deleteSeen(ctx context.Context, q *delay.Queue, seen delay.State, ids []string) (int, error) {
	if seen == delay.StateDead {
		return q.Purge(ctx, delay.Selector{IDs: ids})
	}
	res, err := q.Cancel(ctx, delay.Selector{IDs: ids})
	return res.Found, err
}
