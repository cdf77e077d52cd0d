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
	"delete":     "Delete: the task, its record and payload are removed for good (a task in flight is cancelled instead).",
	"pause":      "Pause: no worker of any process takes tasks of this queue until it is resumed; enqueues keep working.",
	"resume":     "Resume: the queue's workers take again.",
}

// confirmAction is the confirm step of every task and queue action:
// GET /confirm?queue&action[&id...][&at], or with scope=filter for every
// task matching a filter (bulk.go). It changes nothing; its form POSTs
// to /act with the CSRF token.
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
		"Back": safeNext(qv.Get("back"))}
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
	msg, done, err := s.apply(r.Context(), q, action, ids, at)
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

// apply runs one action on the tasks ids, in one script, by task ID
// (applyIDs), or pauses or resumes the queue, and says what happened.
func (s *Console) apply(ctx context.Context, q *delay.Queue, action string, ids []string, at time.Time) (msg string, done int, err error) {
	switch action {
	case "pause":
		return "paused " + q.Name(), 0, q.Pause(ctx)
	case "resume":
		return "resumed " + q.Name(), 0, q.Resume(ctx)
	}
	done, err = applyIDs(ctx, q, action, ids, at)
	if err != nil {
		return action + ": failed (reload the list to see whether it was done)", 0, err
	}
	skipped := len(ids) - done
	msg = fmt.Sprintf("%s: %d of %d tasks", action, done, len(ids))
	if action == "reschedule" {
		msg += " now due " + at.UTC().Format(time.RFC3339)
	}
	if skipped > 0 {
		msg += fmt.Sprintf(" (%d skipped: gone, or not in a state this action applies to)", skipped)
	}
	return msg, done, nil
}

// applyIDs runs a task action on ids (at most delay.MaxBatch) in one
// script, by task ID (delay.Queue.Cancel, Reschedule and Requeue with a
// Selector of IDs): never a read of a task's key and token followed by a
// change by key and token, which would reach a task enqueued again under
// them in between. An ID whose task has finished or gone, or that is in
// no state the action applies to, is skipped: done counts the others. On
// an error the batch is all done or none of it (one script), which a
// lost reply leaves unknown.
func applyIDs(ctx context.Context, q *delay.Queue, action string, ids []string, at time.Time) (done int, err error) {
	switch action {
	case "cancel", "delete":
		// Delete and cancel are one script: a pending or dead task is
		// removed with its record, one in flight is marked.
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
