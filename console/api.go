package console

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/opsview"
)

// The console's JSON answers, for scripts and dashboards: the views of
// internal/opsview, which the tierset CLI's -json prints too, so a field
// has one name in both. Reads only; actions stay behind the login and
// its CSRF token.
func (s *Console) apiRoutes() {
	s.mux.HandleFunc("GET /api/queues", s.apiQueues)
	s.mux.HandleFunc("GET /api/tasks", s.apiTasks)
	s.mux.HandleFunc("GET /api/task", s.apiTask)
	s.mux.HandleFunc("GET /api/workers", s.apiWorkers)
	s.mux.HandleFunc("GET /api/job", s.apiJob)
}

// isAPI reports whether r asks for a JSON answer.
func isAPI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/") }

// apiQueues answers GET /api/queues: every queue's depth, state and
// counters.
func (s *Console) apiQueues(w http.ResponseWriter, r *http.Request) {
	qs, err := s.queueList(r.Context())
	if err != nil {
		apiFail(w, err)
		return
	}
	views, err := opsview.ReadQueues(r.Context(), qs)
	if err != nil {
		apiFail(w, err)
		return
	}
	apiWrite(w, http.StatusOK, views)
}

// apiTasks answers GET /api/tasks?queue&state[&cursor][&order][&key][&err]
// with one page, as the browse page reads it.
func (s *Console) apiTasks(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	q, err := s.queue(r.Context(), qv.Get("queue"))
	if err != nil {
		apiFail(w, err)
		return
	}
	o, err := listOptions(qv)
	if err != nil {
		apiFail(w, err)
		return
	}
	p, err := q.List(r.Context(), o)
	if err != nil {
		apiFail(w, err)
		return
	}
	v := opsview.PageOf(q.Name(), o.State, p)
	if o.State == delay.StateInFlight {
		ws, err := q.Workers(r.Context())
		if err != nil {
			apiFail(w, err)
			return
		}
		opsview.NameHolders(&v, ws)
	}
	apiWrite(w, http.StatusOK, v)
}

// apiTask answers GET /api/task?queue&id with the task whole, its
// payload included.
func (s *Console) apiTask(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	q, err := s.queue(r.Context(), qv.Get("queue"))
	if err != nil {
		apiFail(w, err)
		return
	}
	t, err := q.Task(r.Context(), qv.Get("id"))
	if err != nil {
		apiFail(w, err)
		return
	}
	v := opsview.TaskOf(t, true)
	if (t.State == delay.StateInFlight || t.State == delay.StateCancelled) && t.Err == nil {
		ws, err := q.Workers(r.Context())
		if err != nil {
			apiFail(w, err)
			return
		}
		opsview.NameHolder(&v, q.Name(), ws)
	}
	apiWrite(w, http.StatusOK, v)
}

// apiWorkers answers GET /api/workers: the live worker pools from their
// heartbeats, ages by Redis TIME.
func (s *Console) apiWorkers(w http.ResponseWriter, r *http.Request) {
	ws, err := delay.ListWorkers(r.Context(), s.cfg.client, s.cfg.queuePrefix)
	if err != nil {
		apiFail(w, err)
		return
	}
	views := make([]opsview.Worker, len(ws))
	for i, wi := range ws {
		views[i] = opsview.WorkerOf(wi)
	}
	apiWrite(w, http.StatusOK, views)
}

// apiFail answers {"error": …} with err's status (statusOf).
func apiFail(w http.ResponseWriter, err error) {
	apiWrite(w, statusOf(err), map[string]string{"error": err.Error()})
}

func apiWrite(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the status is sent; a broken connection has no one to tell
}
