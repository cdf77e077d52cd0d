package console

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/text"
)

// behindAfter is how long the oldest ready task may wait before a served
// queue reads "behind" (Queue.Health's bound).
const behindAfter = time.Minute

// summaryRow is one queue's line in the summary table.
type summaryRow struct {
	Name, Err, Verdict             string
	Due, Scheduled, InFlight, Dead int64
	Done                           int64
	Paused                         bool
	Rate                           string
	Workers                        int
	Oldest                         time.Duration
	NoWorker, Behind               bool
}

func summaryOf(name string, h delay.Health) summaryRow {
	st := h.Stats
	row := summaryRow{Name: name, Verdict: string(h.Verdict), Due: st.Ready, Scheduled: st.Pending - st.Ready,
		InFlight: st.InFlight, Dead: st.Dead, Done: st.Done, Paused: st.Paused, Workers: len(h.Workers),
		Oldest: st.OldestDueAge, NoWorker: h.Verdict == delay.VerdictNoWorker, Behind: h.Verdict == delay.VerdictBehind}
	if st.Rate.PerSecond > 0 {
		row.Rate = strings.TrimSuffix(strings.TrimRight(strconv.FormatFloat(st.Rate.PerSecond, 'f', 3, 64), "0"), ".") + "/s"
	}
	return row
}

// workerRow is one live pool on the Workers page.
type workerRow struct {
	delay.WorkerInfo
	Queues string
	Age    string
	Late   bool // the last beat is older than two intervals (Redis clock)
}

// workersPage lists the live pools from their heartbeats: GET /workers.
func (s *Console) workersPage(w http.ResponseWriter, r *http.Request) {
	ws, err := delay.ListWorkers(r.Context(), s.cfg.client, s.cfg.queuePrefix)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rows := make([]workerRow, len(ws))
	for i, wi := range ws {
		var qs []string
		for _, l := range wi.Lines {
			qs = append(qs, l.Name)
		}
		// Age is Redis TIME at the listing minus the last beat, both the
		// server's clock: the console's own clock may be off by any amount.
		age := time.Duration(wi.Age)
		rows[i] = workerRow{WorkerInfo: wi, Queues: strings.Join(qs, ", "), Age: text.Duration(age.Round(time.Second)) + " ago",
			Late: age > 2*time.Duration(wi.Interval)}
	}
	s.render(w, r, "workers.html", "Workers", map[string]any{"Rows": rows, "Prefix": s.cfg.queuePrefix})
}

// queuePage is one queue: its health verdict, card, workers and pause
// control: GET /queue?name.
func (s *Console) queuePage(w http.ResponseWriter, r *http.Request) {
	q, ok := s.namedQueue(w, r, r.URL.Query().Get("name"))
	if !ok {
		return
	}
	v := s.queueCard(r.Context(), q)
	if v.Err != "" {
		s.fail(w, r, errors.New(v.Err))
		return
	}
	hist, err := queueHistory(r.Context(), q, s.cfg.loc)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "queue.html", "Queue "+q.Name(), map[string]any{"Q": v, "Tabs": tabStates, "Labels": stateLabels, "History": hist})
}

// redisDown reports whether err means Redis could not be reached (as
// opposed to an answer the page did not like).
func redisDown(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, redis.ErrClosed) || errors.Is(err, context.DeadlineExceeded) ||
		strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "i/o timeout")
}

// pingTimeout bounds the health check every page makes first.
const pingTimeout = 2 * time.Second

// ping checks Redis before a page is built, so that every page answers
// a down Redis with the banner and 503 rather than an empty page.
func (s *Console) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	return s.cfg.client.Ping(ctx).Err()
}
