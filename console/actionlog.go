package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
)

// The action log: every change made through the console (a task action,
// one task or a selection; a filter-wide action when it ends; pause and
// resume; the dead-letter requeue, requeue-all and purge; a periodic
// job's pause and resume) is one JSON entry at the head of a Redis list
//
//	<QueuePrefix>:console:log
//
// trimmed to logCap entries in the same MULTI, so it never grows past
// that. It is for people reading what was done: an entry that could not
// be written does not undo the change (the change's message says so and
// the console logs a warning).

// logCap is how many entries the action log keeps, newest first.
const logCap = 1000

// logPageSize is how many entries the log page shows.
const logPageSize = 200

// logEntry is one change in the action log.
type logEntry struct {
	At      int64  `json:"at"` // Unix ms, the console's clock
	Who     string `json:"who"`
	Action  string `json:"action"`
	Queue   string `json:"queue,omitempty"`
	Filter  string `json:"filter,omitempty"` // a filter-wide action's state and filter
	Tasks   int    `json:"tasks"`            // tasks named or matched
	Done    int    `json:"done"`
	Skipped int    `json:"skipped"`
	Job     string `json:"job,omitempty"` // a filter-wide action's job ID
	Result  string `json:"result"`        // the message the operator was shown
}

func (s *Console) logKey() string { return s.cfg.queuePrefix + ":console:log" }

// who names the maker of a change for the log: the login's session (by a
// short hash of its ID, never the ID) or "token" (the console's token in
// a form field), with the client's address.
func (s *Console) who(r *http.Request) string {
	addr := s.clientAddr(r)
	if sess := sessionOf(r); sess != nil {
		sum := sha256.Sum256([]byte(sess.id))
		return "login " + hex.EncodeToString(sum[:4]) + " from " + addr
	}
	return "token from " + addr
}

// record writes e at the head of the action log. An error is logged and
// returned as a note for the change's message ("" when logged).
func (s *Console) record(ctx context.Context, e logEntry) string {
	if e.At == 0 {
		e.At = s.cfg.now().UnixMilli()
	}
	b, err := json.Marshal(e)
	if err == nil {
		_, err = s.cfg.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.LPush(ctx, s.logKey(), b)
			p.LTrim(ctx, s.logKey(), 0, logCap-1)
			return nil
		})
	}
	if err != nil {
		slog.WarnContext(ctx, "console: action log not written", "action", e.Action, "queue", e.Queue, "err", err)
		return " (not written to the action log: " + err.Error() + ")"
	}
	return ""
}

// logRow is one entry as the log page shows it.
type logRow struct {
	logEntry
	When time.Time
	Err  string // an entry that does not decode
}

// readLog reads the newest n entries of the action log, of one queue
// when queue is set.
func (s *Console) readLog(ctx context.Context, queue string, n int) ([]logRow, error) {
	raw, err := s.cfg.client.LRange(ctx, s.logKey(), 0, logCap-1).Result()
	if err != nil {
		return nil, err
	}
	var rows []logRow
	for _, v := range raw {
		var row logRow
		if err := json.Unmarshal([]byte(v), &row.logEntry); err != nil {
			row.Err = "unreadable entry: " + err.Error()
		} else if queue != "" && row.Queue != queue {
			continue
		}
		row.When = time.UnixMilli(row.At)
		if rows = append(rows, row); len(rows) == n {
			break
		}
	}
	return rows, nil
}

// logPage shows the action log: GET /log[?queue].
func (s *Console) logPage(w http.ResponseWriter, r *http.Request) {
	queue := r.URL.Query().Get("queue")
	rows, err := s.readLog(r.Context(), queue, logPageSize)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "log.html", "Action log", map[string]any{"Rows": rows, "Queue": queue, "Cap": logCap, "Shown": logPageSize})
}
