package console

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/deadletters"
	"github.com/tierset/tierset/internal/opsview"
	"github.com/tierset/tierset/internal/text"
)

// deadPageSize is how many dead letters one page lists.
const deadPageSize = 50

// maxCards is the most queues the Queues page shows a card for; past it
// the page is the summary table alone (each queue's page has its card).
const maxCards = 12

type rateSample struct {
	at                     time.Time
	delivered, acked, dead int64
}

// queueView is one queue's card on the Queues page.
type queueView struct {
	Name             string
	Err              string
	Stats            delay.Stats
	DueSoon          int64
	Due, InFlight    []taskRow
	Rates            string
	P50, P99, Max    string
	Chart            histChart
	Behind, Expiring bool
	NoWorker         bool
	Summary          summaryRow
	Workers          []delay.WorkerInfo
	err              error
	down             bool // err says Redis is unreachable
}

type taskRow struct {
	ID, Key, Token, LastError, Payload string
	Fence                              int64
	State                              delay.State
	Attempt                            int
	When                               time.Time
	Rel                                string
	Err                                string
	// Holder names the pool holding an in-flight task ("ID (host)"), or
	// says opsview.NotListed, with HolderWhy as its explanation.
	Holder, HolderWhy string
}

// nameHolder sets row's Holder from ws (the live workers of queue).
func nameHolder(row *taskRow, queue string, ws []delay.WorkerInfo) {
	worker, host := opsview.Holder(ws, queue, row.ID)
	if worker == "" {
		row.Holder, row.HolderWhy = opsview.NotListed, opsview.NotListedWhy
		return
	}
	row.Holder, row.HolderWhy = worker+" ("+host+")", "its pool's last heartbeat lists it (up to one heartbeat interval old)"
}

func (s *Console) queuesPage(w http.ResponseWriter, r *http.Request) {
	qs, err := s.queueList(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Past maxCards queues the page is the summary table alone, one
	// Health read a queue: a card costs three listings more, and a page of
	// hundreds of cards is read by nobody.
	cards := len(qs) <= maxCards
	var views []queueView
	rows := make([]summaryRow, len(qs))
	for i, q := range qs {
		if !cards {
			h, err := q.Health(r.Context(), behindAfter)
			if err != nil && redisDown(err) {
				s.fail(w, r, err)
				return
			}
			rows[i] = summaryOf(q.Name(), h)
			if err != nil {
				rows[i] = summaryRow{Name: q.Name(), Err: err.Error(), Verdict: "error"}
			}
			continue
		}
		v := s.queueCard(r.Context(), q)
		if err := v.Err; err != "" && v.down {
			s.fail(w, r, v.err)
			return
		}
		views, rows[i] = append(views, v), v.Summary
	}
	refresh, _ := strconv.Atoi(r.URL.Query().Get("refresh"))
	s.render(w, r, "queues.html", "Queues", map[string]any{"Queues": views, "Summary": rows, "Prefix": s.cfg.queuePrefix,
		"Refresh": min(max(refresh, 0), 3600), "Count": len(qs), "CardsOmitted": !cards, "MaxCards": maxCards})
}

// queueCard reads one queue: Health (Stats and the worker registry) and
// three listings (due now, due within a minute, oldest leases).
func (s *Console) queueCard(ctx context.Context, q *delay.Queue) queueView {
	v := queueView{Name: q.Name()}
	h, err := q.Health(ctx, behindAfter)
	if err != nil {
		v.Err, v.err, v.down = err.Error(), err, redisDown(err)
		v.Summary = summaryRow{Name: q.Name(), Err: v.Err, Verdict: "error"}
		return v
	}
	st := h.Stats
	due, err := q.List(ctx, delay.ListOptions{State: delay.StateDue, Limit: 5})
	var soon, flying delay.Page
	if err == nil {
		soon, err = q.List(ctx, delay.ListOptions{State: delay.StateScheduled, To: st.ServerTime.Add(time.Minute), Limit: 5})
	}
	if err == nil {
		flying, err = q.List(ctx, delay.ListOptions{State: delay.StateInFlight, Limit: 5})
	}
	if err != nil {
		v.Err, v.err, v.down = err.Error(), err, redisDown(err)
		return v
	}
	v.Summary, v.Workers = summaryOf(q.Name(), h), h.Workers
	v.Stats, v.DueSoon = st, soon.Total
	for _, t := range append(due.Tasks, soon.Tasks...)[:min(5, len(due.Tasks)+len(soon.Tasks))] {
		if t.Err == nil {
			v.Due = append(v.Due, rowOf(t, st.ServerTime))
		}
	}
	for _, t := range flying.Tasks {
		if t.Err != nil {
			continue
		}
		row := rowOf(t, st.ServerTime)
		nameHolder(&row, q.Name(), h.Workers)
		v.InFlight = append(v.InFlight, row)
		v.Expiring = v.Expiring || t.When.Before(st.ServerTime)
	}
	v.Behind, v.NoWorker = h.Verdict == delay.VerdictBehind, h.Verdict == delay.VerdictNoWorker
	v.Rates = s.rate(q.Name(), st)
	if l := st.Lateness; l.Total > 0 {
		v.P50, v.P99, v.Max = "< "+text.Duration(l.P50), "< "+text.Duration(l.P99), "< "+text.Duration(l.Max)
	}
	v.Chart = latenessChart(st.Lateness)
	return v
}

func rowOf(t delay.TaskInfo, now time.Time) taskRow {
	return taskRow{ID: t.ID, Key: t.Key, Token: t.Token, LastError: t.LastError, Attempt: t.Attempt, When: t.When, Rel: rel(t.When, now)}
}

// rel says how far t is from now: "in 3s" or "12s ago".
func rel(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	if d >= 0 {
		return "in " + text.Duration(d)
	}
	return text.Duration(-d) + " ago"
}

// rate records a Stats sample and reports the rates since the oldest
// sample of the last five minutes (so the first view has none).
func (s *Console) rate(name string, st delay.Stats) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := rateSample{at: st.ServerTime, delivered: st.Delivered, acked: st.Acked, dead: st.DeadLettered}
	ss := s.rates[name]
	for len(ss) > 1 && now.at.Sub(ss[0].at) > 5*time.Minute {
		ss = ss[1:]
	}
	ss = append(ss, now)
	if len(ss) > 64 {
		ss = append(ss[:1], ss[len(ss)-63:]...)
	}
	s.rates[name] = ss
	first := ss[0]
	dt := now.at.Sub(first.at).Seconds()
	if dt < 1 {
		return "Rates appear on a view a second or more after this one"
	}
	per := func(a, b int64) string { return strconv.FormatFloat(float64(a-b)/dt, 'f', 1, 64) }
	return fmt.Sprintf("Rates over the last %s: delivered %s/s, acked %s/s, dead-lettered %s/s",
		text.Duration(time.Duration(dt*float64(time.Second)).Round(time.Second)), per(now.delivered, first.delivered),
		per(now.acked, first.acked), per(now.dead, first.dead))
}

// histChart is the lateness histogram as SVG bars (heights in px).
type histChart struct {
	Width, Height, Base int // Base: the x axis's y
	Bars                []histBar
	Total               int64
}

type histBar struct {
	X, Y, W, H, LabelY int
	Count              int64
	Label              string // the bucket's upper bound
	Tip                string
	ShowLabel          bool
}

// latenessChart draws the buckets up to the last non-empty one (at least
// 12), bar heights linear in the count.
func latenessChart(l delay.LatenessBuckets) histChart {
	last := 11
	var peak int64
	for b, n := range l.Counts {
		if n > 0 {
			last = max(last, b)
		}
		peak = max(peak, n)
	}
	ch := histChart{Width: 640, Height: 160, Base: 130, Total: l.Total}
	bw := ch.Width / (last + 1)
	plot := ch.Base
	for b := 0; b <= last; b++ {
		n := l.Counts[b]
		h := 0
		if peak > 0 && n > 0 {
			h = max(1, int(math.Round(float64(n)/float64(peak)*float64(plot))))
		}
		lo, hi := "0 ms", msLabel(b)
		if b > 0 {
			lo = msLabel(b - 1)
		}
		ch.Bars = append(ch.Bars, histBar{X: b * bw, Y: plot - h, W: max(bw-2, 1), H: h, LabelY: plot + 16, Count: n, Label: hi,
			Tip: fmt.Sprintf("%s to under %s late: %d deliveries", lo, hi, n), ShowLabel: b%2 == 0})
	}
	return ch
}

// msLabel is bucket b's exclusive upper bound, 2^b ms, readably.
func msLabel(b int) string {
	return text.Duration(time.Duration(int64(1)<<b) * time.Millisecond)
}

func (s *Console) deadPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	qs, err := s.queueList(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	name := r.URL.Query().Get("queue")
	if name == "" && len(qs) > 0 {
		name = qs[0].Name()
	}
	data := map[string]any{"Queues": qs, "Queue": name}
	if name == "" {
		s.render(w, r, "dead.html", "Dead letters", data)
		return
	}
	q, ok := s.namedQueue(w, r, name)
	if !ok {
		return
	}
	order := r.URL.Query().Get("order")
	switch order {
	case "":
		order = "newest" // an alert fires for the newest dead letter
	case "newest", "oldest":
	default:
		s.fail(w, r, fmt.Errorf("%w: order %q (want newest or oldest)", errBadParam, order))
		return
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	dp, err := listDead(ctx, q, page, order == "newest")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := q.ServerNow()
	rows := make([]taskRow, len(dp.Tasks))
	for i, t := range dp.Tasks {
		rows[i] = taskRow{ID: t.ID, Key: t.Key, Token: t.Token, Attempt: t.Attempt, LastError: t.LastError,
			When: t.When, Rel: rel(t.When, now), Payload: payloadPreview(t.Payload)}
		if t.Err != nil {
			rows[i].Err = t.Err.Error()
		}
	}
	data["Total"], data["Rows"], data["Page"], data["Order"] = dp.Total, rows, page, order
	data["Pages"] = max(1, int((dp.Total+deadPageSize-1)/deadPageSize))
	if page > 1 {
		data["Prev"] = page - 1
	}
	if int64(page*deadPageSize) < dp.Total {
		data["Next"] = page + 1
	}
	s.render(w, r, "dead.html", "Dead letters", data)
}

// listDead reads page (from 1) of the dead letters in the order asked:
// the pages before it are read through List's cursor (a page at depth d
// costs d reads), so a letter dying meanwhile shifts it by one at most.
func listDead(ctx context.Context, q *delay.Queue, page int, newest bool) (delay.Page, error) {
	o := delay.ListOptions{State: delay.StateDead, Newest: newest, Limit: delay.MaxBatch}
	for skip := (page - 1) * deadPageSize; skip > 0; {
		o.Limit = min(skip, delay.MaxBatch)
		p, err := q.List(ctx, o)
		if err != nil {
			return delay.Page{}, err
		}
		if p.Next == "" {
			return delay.Page{Total: p.Total}, nil
		}
		skip -= len(p.Tasks)
		o.Cursor = p.Next
	}
	o.Limit = deadPageSize
	return q.List(ctx, o)
}

// lookupPage lists the tasks of one business key (Queue.List by Key).
func (s *Console) lookupPage(w http.ResponseWriter, r *http.Request) {
	name, key := r.URL.Query().Get("queue"), r.URL.Query().Get("key")
	q, ok := s.namedQueue(w, r, name)
	if !ok {
		return
	}
	p, err := q.List(r.Context(), delay.ListOptions{Key: key})
	data := map[string]any{"Queue": name, "Key": key}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var tasks []delay.TaskInfo
	for _, t := range p.Tasks {
		if t.Err != nil {
			data["Err"] = t.Err.Error() // an unreadable record; the others are listed
			continue
		}
		tasks = append(tasks, t)
	}
	now := q.ServerNow()
	rows := make([]taskRow, len(tasks))
	for i, t := range tasks {
		rows[i] = rowOf(t, now)
		rows[i].State, rows[i].Payload = t.State, payloadPreview(t.Payload)
	}
	data["Rows"] = rows
	s.render(w, r, "lookup.html", "Tasks of a key", data)
}

// payloadPreview shows a payload's size and its first bytes, quoted.
func payloadPreview(p []byte) string {
	if len(p) == 0 {
		return "empty"
	}
	head := p[:min(len(p), 120)]
	more := ""
	if len(head) < len(p) {
		more = "…"
	}
	return fmt.Sprintf("%d B: %q%s", len(p), head, more)
}

// changeQueue is a change's common part: the POST check and its queue.
func (s *Console) changeQueue(w http.ResponseWriter, r *http.Request) (*delay.Queue, bool) {
	if !s.checkPost(w, r) {
		return nil, false
	}
	return s.namedQueue(w, r, r.PostForm.Get("queue"))
}

func (s *Console) done(w http.ResponseWriter, r *http.Request, q *delay.Queue, msg string) {
	http.Redirect(w, r, "/dead?queue="+url.QueryEscape(q.Name())+"&msg="+url.QueryEscape(msg), http.StatusSeeOther)
}

func (s *Console) requeue(w http.ResponseWriter, r *http.Request) {
	q, ok := s.changeQueue(w, r)
	if !ok {
		return
	}
	id := r.PostForm.Get("id")
	n, err := q.Requeue(r.Context(), delay.Selector{IDs: []string{id}})
	if err != nil {
		s.record(r.Context(), logEntry{Who: s.who(r), Action: "requeue", Queue: q.Name(), Tasks: 1, Result: "failed: " + err.Error()})
		s.fail(w, r, err)
		return
	}
	msg := fmt.Sprintf("requeued task %s: due now", id)
	if n == 0 {
		msg = fmt.Sprintf("task %s was no longer dead: nothing requeued", id)
	}
	msg += s.record(r.Context(), logEntry{Who: s.who(r), Action: "requeue", Queue: q.Name(), Tasks: 1, Done: n, Skipped: 1 - n, Result: msg})
	s.done(w, r, q, msg)
}

// requeueAll shows a confirmation page on GET, as purge does: requeueing
// thousands of letters that died of one outage can cause the next one.
// The POST must repeat the queue's name in "confirm".
func (s *Console) requeueAll(w http.ResponseWriter, r *http.Request) {
	q, ok := s.confirmedQueue(w, r, "requeue.html", "Requeue dead letters", "requeue")
	if !ok {
		return
	}
	ids, err := deadletters.AllIDs(r.Context(), q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	n, err := deadletters.Requeue(r.Context(), q, ids)
	e := logEntry{Who: s.who(r), Action: "requeue-all", Queue: q.Name(), Filter: "every dead task", Tasks: len(ids), Done: n,
		Skipped: len(ids) - n, Result: fmt.Sprintf("requeued %d dead letters: due now", n)}
	if err != nil {
		e.Skipped, e.Result = 0, fmt.Sprintf("requeued %d before: %v", n, err)
		s.record(r.Context(), e)
		s.fail(w, r, fmt.Errorf("requeued %d before: %w", n, err))
		return
	}
	s.done(w, r, q, e.Result+s.record(r.Context(), e))
}

// purge shows a confirmation page on GET; the POST must repeat the
// queue's name in "confirm".
func (s *Console) purge(w http.ResponseWriter, r *http.Request) {
	q, ok := s.confirmedQueue(w, r, "purge.html", "Purge dead letters", "purge")
	if !ok {
		return
	}
	var n int
	var err error
	if id := r.PostForm.Get("id"); id != "" {
		n, err = q.Purge(r.Context(), delay.Selector{IDs: []string{id}})
	} else {
		n, err = q.Purge(r.Context(), delay.Selector{All: true})
	}
	e := logEntry{Who: s.who(r), Action: "purge", Queue: q.Name(), Filter: "every dead task", Done: n, Tasks: n,
		Result: fmt.Sprintf("purged %d dead letters", n)}
	if id := r.PostForm.Get("id"); id != "" {
		e.Filter, e.Tasks, e.Skipped = "", 1, 1-n
	}
	if err != nil {
		e.Skipped, e.Result = 0, fmt.Sprintf("purged %d, then failed: %v", n, err)
		s.record(r.Context(), e)
		s.fail(w, r, err)
		return
	}
	s.done(w, r, q, e.Result+s.record(r.Context(), e))
}

// confirmedQueue serves a change that asks for confirmation: on GET it
// renders the confirmation page tmpl and returns false; on a POST that
// repeats the queue's name in "confirm" it returns the queue to change.
// Otherwise it writes the refusal and returns false.
func (s *Console) confirmedQueue(w http.ResponseWriter, r *http.Request, tmpl, title, verb string) (*delay.Queue, bool) {
	if r.Method == http.MethodGet {
		s.confirmPage(w, r, tmpl, title)
		return nil, false
	}
	q, ok := s.changeQueue(w, r)
	return q, ok && confirmed(w, r, q, verb)
}

// confirmPage renders a change's confirmation page for ?queue (and ?id)
// with the queue's dead-letter count.
func (s *Console) confirmPage(w http.ResponseWriter, r *http.Request, tmpl, title string) {
	name, id := r.URL.Query().Get("queue"), r.URL.Query().Get("id")
	q, ok := s.namedQueue(w, r, name)
	if !ok {
		return
	}
	dp, err := q.List(r.Context(), delay.ListOptions{State: delay.StateDead, Limit: 1})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, tmpl, title, map[string]any{"Queue": name, "ID": id, "Total": dp.Total})
}

// confirmed checks that a change's POST repeats the queue's name in
// "confirm"; it writes the refusal and returns false.
func confirmed(w http.ResponseWriter, r *http.Request, q *delay.Queue, verb string) bool {
	if r.PostForm.Get("confirm") != q.Name() {
		http.Error(w, "not confirmed: type the queue's name to "+verb, http.StatusBadRequest)
		return false
	}
	return true
}

// fail shows an error page: 404 for what does not exist, 400 for bad
// input the library refused, 502 for Redis.
func (s *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	if code == http.StatusServiceUnavailable {
		s.renderDown(w, r, err)
		return
	}
	s.renderCode(w, r, code, "error.html", "Error", map[string]string{"Err": err.Error()})
}

// statusOf is the HTTP status of a failed request: 503 when Redis is
// unreachable, 404 for what does not exist, 400 for a bad parameter,
// else 502 (Redis answered with an error).
func statusOf(err error) int {
	if c, ok := jobFailCode(err); ok {
		return c
	}
	switch {
	case redisDown(err):
		return http.StatusServiceUnavailable
	case errors.Is(err, delay.ErrNotFound), errors.Is(err, errNoQueue), errors.Is(err, errNoJob), errors.Is(err, cache.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, &delay.ValidationError{Field: "batch"}), errors.Is(err, &delay.ValidationError{Field: "name"}), errors.Is(err, &delay.ValidationError{Field: "key"}), errors.Is(err, &delay.ValidationError{Field: "selector"}), errors.Is(err, &cache.ValidationError{Field: "id"}),
		errors.Is(err, errBadParam):
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}
