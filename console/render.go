package console

import (
	"bytes"
	"html/template"
	"net/http"
	"time"

	"github.com/tierset/tierset/internal/text"
)

// timeLayout is how the pages show a time: with its zone, in the
// console's Location.
const timeLayout = "2006-01-02 15:04:05 MST"

// funcs are the templates' functions: "when" shows a time in the
// console's Location with its zone ("2026-12-07 05:20:13 UTC"), "dur" a
// duration for a person (text.Duration).
func funcs(loc *time.Location) template.FuncMap {
	return template.FuncMap{
		"when": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return t.In(loc).Format(timeLayout)
		},
		"dur": text.Duration,
	}
}

// pageData is what every template gets.
type pageData struct {
	Title, Redis, CSRF, Msg string
	Nav                     string // the template name, to mark the current tab
	Authed, Loopback        bool
	Down                    string // Redis is unreachable: the banner's cause
	Refresh                 int    // seconds between reloads, 0 for none
	Now                     time.Time
	Data                    any
}

// renderDown answers 503 with the page-wide banner: Redis is unreachable.
func (s *Console) renderDown(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("Retry-After", "5")
	s.renderCode(w, r, http.StatusServiceUnavailable, "down.html", "Redis is unreachable", map[string]string{"Down": err.Error()})
}

func (s *Console) render(w http.ResponseWriter, r *http.Request, name, title string, data any) {
	s.renderCode(w, r, http.StatusOK, name, title, data)
}

// renderCode executes the template into a buffer first, so a template
// error is a clean 500 and cookies are set before the status is written.
func (s *Console) renderCode(w http.ResponseWriter, r *http.Request, code int, name, title string, data any) {
	pd := pageData{Title: title, Redis: s.cfg.redisShown, CSRF: s.csrfToken(w, r), Msg: r.URL.Query().Get("msg"),
		Nav: name, Authed: s.authed(r), Loopback: s.cfg.loopback, Now: s.cfg.now(), Data: data}
	if d, ok := data.(map[string]any); ok {
		pd.Refresh, _ = d["Refresh"].(int)
	}
	if d, ok := data.(map[string]string); ok {
		pd.Down = d["Down"]
	}
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, name, pd); err != nil {
		http.Error(w, "template: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = buf.WriteTo(w)
}
