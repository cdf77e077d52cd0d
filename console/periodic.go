package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/tierset/tierset/internal/opsview"
	"github.com/tierset/tierset/internal/text"
	"github.com/tierset/tierset/periodic"
)

// jobWords is each periodic job action's wording on the confirm page.
var jobWords = map[string]string{
	"pause": "Pause: no process enqueues this job's ticks until it is resumed (judged in Redis, so processes started later obey too). " +
		"The ticks that pass meanwhile are skipped, not caught up; tasks already enqueued stay.",
	"resume": "Resume: the job's next tick makes a task again.",
}

// jobRow is one periodic job on the Periodic page.
type jobRow struct {
	Queue string
	periodic.JobInfo
	State     string // running, paused, changing (two definitions live) or undeclared
	Processes []procRow
}

// procRow is one live process declaring a job.
type procRow struct {
	periodic.Declaration
	Digest string
	Winner bool
	Age    string // since it last declared, by Redis TIME
}

// periodicRows is every periodic job of the console's queues.
func (s *Console) periodicRows(ctx context.Context) ([]jobRow, error) {
	qs, err := s.queueList(ctx)
	if err != nil {
		return nil, err
	}
	var rows []jobRow
	for _, q := range qs {
		jobs, err := periodic.List(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("periodic jobs of %q: %w", q.Name(), err)
		}
		now := q.ServerNow()
		for _, j := range jobs {
			r := jobRow{Queue: q.Name(), JobInfo: j, State: opsview.JobState(j)}
			for _, d := range j.Definitions {
				for _, p := range d.Processes {
					r.Processes = append(r.Processes, procRow{Declaration: p, Digest: d.Digest, Winner: d.Winner,
						Age: text.Duration(max(now.Sub(p.Declared), 0).Round(time.Second)) + " ago"})
				}
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// periodicPage lists the periodic jobs of every queue: GET /periodic.
func (s *Console) periodicPage(w http.ResponseWriter, r *http.Request) {
	rows, err := s.periodicRows(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "periodic.html", "Periodic jobs", map[string]any{"Rows": rows})
}

// jobArgs reads and checks a job action's parameters: a known action and
// a valid job name.
func jobArgs(v url.Values) (action, job string, err error) {
	action, job = v.Get("action"), v.Get("job")
	if _, ok := jobWords[action]; !ok {
		return "", "", fmt.Errorf("%w: action %q", errBadParam, action)
	}
	return action, job, nil
}

// periodicConfirm is the confirm step of pause and resume of a job:
// GET /periodic/confirm?queue&job&action. It changes nothing; its form
// POSTs to /periodic/act with the CSRF token.
func (s *Console) periodicConfirm(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	q, ok := s.namedQueue(w, r, qv.Get("queue"))
	if !ok {
		return
	}
	action, job, err := jobArgs(qv)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	jobs, err := periodic.List(r.Context(), q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	found := false
	for _, j := range jobs {
		found = found || j.Name == job
	}
	if !found {
		s.fail(w, r, fmt.Errorf("%w: %q on queue %q", periodic.ErrNotFound, job, q.Name()))
		return
	}
	s.render(w, r, "confirm.html", "Confirm: "+action+" "+job, map[string]any{"Queue": q.Name(), "Action": action,
		"Words": jobWords[action], "Job": job, "Back": "/periodic"})
}

// periodicAct runs a confirmed pause or resume of a job: POST
// /periodic/act with csrf, the token (or login), confirm=yes, queue, job
// and action; then back to the Periodic page with what happened.
func (s *Console) periodicAct(w http.ResponseWriter, r *http.Request) {
	q, ok := s.changeQueue(w, r)
	if !ok {
		return
	}
	if r.PostForm.Get("confirm") != "yes" {
		http.Error(w, "not confirmed: use the confirm page's button", http.StatusBadRequest)
		return
	}
	action, job, err := jobArgs(r.PostForm)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if action == "pause" {
		err = periodic.Pause(r.Context(), q, job)
	} else {
		err = periodic.Resume(r.Context(), q, job)
	}
	e := logEntry{Who: s.who(r), Action: "periodic " + action, Queue: q.Name(), Filter: "job " + job}
	if err != nil {
		e.Result = "failed: " + err.Error()
		s.record(r.Context(), e)
		s.fail(w, r, fmt.Errorf("%s periodic job %q: %w", action, job, err))
		return
	}
	msg := fmt.Sprintf("periodic job %s on %s: %sd", job, q.Name(), action)
	e.Result = msg
	msg += s.record(r.Context(), e)
	http.Redirect(w, r, "/periodic?msg="+url.QueryEscape(msg), http.StatusSeeOther)
}

// jobFailCode is the status of a periodic error: 404 for an unknown job,
// 400 for a refused name.
func jobFailCode(err error) (int, bool) {
	switch {
	case errors.Is(err, periodic.ErrNotFound):
		return http.StatusNotFound, true
	case errors.Is(err, periodic.ErrInvalid):
		return http.StatusBadRequest, true
	}
	return 0, false
}
