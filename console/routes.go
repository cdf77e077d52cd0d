package console

import (
	"net/http"
)

func (s *Console) routes() {
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		http.Redirect(w, r, "/queues", http.StatusSeeOther)
	})
	s.mux.HandleFunc("GET /style.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=3600")
		http.ServeFileFS(w, r, webFiles, "web/style.css")
	})
	s.mux.HandleFunc("/login", s.login)
	s.mux.HandleFunc("/logout", s.logout)
	s.mux.HandleFunc("GET /queues", s.queuesPage)
	s.mux.HandleFunc("GET /queue", s.queuePage)
	s.mux.HandleFunc("GET /tasks", s.tasksPage)
	s.mux.HandleFunc("GET /task", s.taskPage)
	s.mux.HandleFunc("GET /confirm", s.confirmAction)
	s.mux.HandleFunc("/act", s.act)
	s.mux.HandleFunc("GET /job", s.jobPage)
	s.mux.HandleFunc("GET /log", s.logPage)
	s.mux.HandleFunc("GET /workers", s.workersPage)
	s.mux.HandleFunc("GET /dead", s.deadPage)
	s.mux.HandleFunc("GET /lookup", s.lookupPage)
	s.mux.HandleFunc("/dead/requeue", s.requeue)
	s.mux.HandleFunc("/dead/requeue-all", s.requeueAll)
	s.mux.HandleFunc("/dead/purge", s.purge)
	s.mux.HandleFunc("GET /periodic", s.periodicPage)
	s.mux.HandleFunc("GET /periodic/confirm", s.periodicConfirm)
	s.mux.HandleFunc("/periodic/act", s.periodicAct)
	s.mux.HandleFunc("GET /promotions", s.promotionsPage)
	s.mux.HandleFunc("GET /promotion", s.promotionPage)
	s.mux.HandleFunc("GET /budgets", s.budgetsPage)
	s.mux.HandleFunc("GET /api/budgets", s.apiBudgets)
	s.apiRoutes()
}

// ServeHTTP serves the console behind its guard. Every page but the
// style sheet checks Redis first: a down Redis is a page-wide banner and
// 503 on every page, never a page that reads as empty.
func (s *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/style.css" {
			if err := s.ping(r.Context()); err != nil {
				if isAPI(r) {
					apiFail(w, err)
					return
				}
				s.renderDown(w, r, err)
				return
			}
		}
		s.mux.ServeHTTP(w, r)
	})).ServeHTTP(w, r)
}
