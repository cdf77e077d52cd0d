// Package opsview is the one JSON shape of what an operator reads about
// queues, periodic jobs and budgets: the tierset CLI's -json output and
// the console's /api answers both encode these types, so a field has one
// name in both; the state words both print are worded here too.
package opsview

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/text"
)

// Task is one task as the listings show it.
type Task struct {
	ID    string `json:"id"`
	Key   string `json:"key"`
	Token string `json:"token"`
	// State is due, scheduled, inflight, cancelled, dead or done.
	State   string `json:"state"`
	Attempt int    `json:"attempt"`
	// When is the due time, lease end, death or ack time (by State).
	When       time.Time `json:"when"`
	LastError  string    `json:"last_error,omitempty"`
	LastErrors []string  `json:"last_errors,omitempty"`
	Fence      int64     `json:"fence,omitempty"`
	// PayloadBytes is the payload's size; the payload itself is in
	// Payload when it is JSON, else in PayloadBase64, and in neither when
	// the caller left payloads out.
	PayloadBytes  int             `json:"payload_bytes"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadBase64 []byte          `json:"payload_base64,omitempty"`
	// Error is set when the record does not decode, is gone, or is in no
	// set (TaskInfo.Err).
	Error string `json:"error,omitempty"`
	// Worker and WorkerHost name the live pool whose last heartbeat lists
	// the task (an in-flight task only: delay.Holder, up to one heartbeat
	// old); both are left out when no live entry lists it (NotListed).
	Worker     string `json:"worker,omitempty"`
	WorkerHost string `json:"worker_host,omitempty"`
}

// NotListed is what the CLI and the console print for an in-flight task
// no live pool's heartbeat lists; NotListedWhy says what that can mean.
const (
	NotListed    = "not in a heartbeat yet"
	NotListedWhy = "no live worker's last heartbeat lists it: taken since that beat (up to one heartbeat interval ago), " +
		"waiting in a pool's prefetch buffer, its lease ended under a handler still running it, " +
		"or held by a pool with no live entry (a killed process whose lease has " +
		"not expired) or one older than task lists"
)

// Holder is the pool ID and host of the live pool whose last heartbeat
// lists task id of the queue called queue among ws, "" when none does.
func Holder(ws []delay.WorkerInfo, queue, id string) (worker, host string) {
	if w, ok := delay.Holder(ws, queue, id); ok {
		return w.ID, w.Host
	}
	return "", ""
}

// NameHolders names the holder (Holder) of each in-flight task of v.
func NameHolders(v *Page, ws []delay.WorkerInfo) {
	for i := range v.Tasks {
		NameHolder(&v.Tasks[i], v.Queue, ws)
	}
}

// NameHolder names t's holder (Holder) when t is in flight.
func NameHolder(t *Task, queue string, ws []delay.WorkerInfo) {
	if t.State == string(delay.StateInFlight) || t.State == string(delay.StateCancelled) {
		t.Worker, t.WorkerHost = Holder(ws, queue, t.ID)
	}
}

// TaskOf is t's view, with its payload when withPayload.
func TaskOf(t delay.TaskInfo, withPayload bool) Task {
	v := Task{ID: t.ID, Key: t.Key, Token: t.Token, State: string(t.State), Attempt: t.Attempt,
		When: t.When.UTC(), LastError: t.LastError, LastErrors: t.LastErrors, Fence: t.Fence,
		PayloadBytes: len(t.Payload)}
	if t.Err != nil {
		v.Error = t.Err.Error()
	}
	if withPayload && len(t.Payload) > 0 {
		if json.Valid(t.Payload) {
			v.Payload = json.RawMessage(t.Payload)
		} else {
			v.PayloadBase64 = t.Payload
		}
	}
	return v
}

// Page is one page of a listing.
type Page struct {
	Queue string `json:"queue"`
	State string `json:"state"`
	// Total counts the state's tasks in the listing's bounds, not only
	// this page's.
	Total int64 `json:"total"`
	// Next is the cursor of the page after this one ("" on the last).
	Next  string `json:"next,omitempty"`
	Tasks []Task `json:"tasks"`
}

// PageOf is p's view; payloads are left out of listings.
func PageOf(queue string, st delay.State, p delay.Page) Page {
	v := Page{Queue: queue, State: string(st), Total: p.Total, Next: p.Next, Tasks: make([]Task, len(p.Tasks))}
	for i, t := range p.Tasks {
		v.Tasks[i] = TaskOf(t, false)
	}
	return v
}

// Queue is a queue's depth, state and counters (delay.Stats).
type Queue struct {
	Name       string    `json:"name"`
	ServerTime time.Time `json:"server_time"`
	Ready      int64     `json:"ready"`
	Scheduled  int64     `json:"scheduled"`
	InFlight   int64     `json:"inflight"`
	Dead       int64     `json:"dead"`
	Done       int64     `json:"done"`
	// OldestDueAge is how long the earliest ready task has waited, as
	// text.Duration prints it, and in milliseconds.
	OldestDueAge   string     `json:"oldest_due_age"`
	OldestDueAgeMs int64      `json:"oldest_due_age_ms"`
	Paused         bool       `json:"paused"`
	PausedSince    *time.Time `json:"paused_since,omitempty"`
	RatePerSecond  float64    `json:"rate_per_second,omitempty"`
	RateBurst      int        `json:"rate_burst,omitempty"`
	Delivered      int64      `json:"delivered"`
	Acked          int64      `json:"acked"`
	Retries        int64      `json:"retries"`
	DeadLettered   int64      `json:"dead_lettered"`
	Expired        int64      `json:"expired"`
	Cancelled      int64      `json:"cancelled"`
	Corrupt        int64      `json:"corrupt"`
	SeqOverflows   int64      `json:"seq_overflows"`
	Lost           int64      `json:"lost"`
	HighWater      int64      `json:"high_water"`
	HighWaterSpace int64      `json:"high_water_space"`
}

// ReadQueues reads the Stats of each of qs, in order: what the CLI's
// queue ls and the console's /api/queues list.
func ReadQueues(ctx context.Context, qs []*delay.Queue) ([]Queue, error) {
	views := make([]Queue, 0, len(qs))
	for _, q := range qs {
		st, err := q.Stats(ctx)
		if err != nil {
			return nil, fmt.Errorf("queue %s: %w", text.Escape(q.Name()), err)
		}
		views = append(views, QueueOf(q.Name(), st))
	}
	return views, nil
}

// QueueOf is the view of a queue's Stats.
func QueueOf(name string, st delay.Stats) Queue {
	v := Queue{Name: name, ServerTime: st.ServerTime.UTC(), Ready: st.Ready, Scheduled: st.Pending - st.Ready,
		InFlight: st.InFlight, Dead: st.Dead, Done: st.Done,
		OldestDueAge: text.Duration(st.OldestDueAge), OldestDueAgeMs: st.OldestDueAge.Milliseconds(),
		Paused: st.Paused, RatePerSecond: st.Rate.PerSecond, RateBurst: st.Rate.Burst,
		Delivered: st.Delivered, Acked: st.Acked, Retries: st.Retries, DeadLettered: st.DeadLettered,
		Expired: st.Expired, Cancelled: st.Cancelled, Corrupt: st.Corrupt, SeqOverflows: st.SeqOverflows,
		Lost: st.Lost, HighWater: st.HighWater, HighWaterSpace: st.HighWaterSpace}
	if st.Paused {
		since := st.PausedSince.UTC()
		v.PausedSince = &since
	}
	return v
}

// Worker is one live worker pool (delay.WorkerInfo), its durations as
// text.Duration prints them.
type Worker struct {
	ID          string           `json:"id"`
	Host        string           `json:"host"`
	PID         int              `json:"pid"`
	Mode        string           `json:"mode"`
	Concurrency int              `json:"concurrency"`
	Running     int              `json:"running"`
	Lines       []delay.LineInfo `json:"lines"`
	Started     time.Time        `json:"started"`
	Interval    string           `json:"interval"`
	Beat        time.Time        `json:"beat"`
	Age         string           `json:"age"`
	Version     string           `json:"version"`
	Release     int              `json:"release"`
}

// WorkerOf is w's view.
func WorkerOf(w delay.WorkerInfo) Worker {
	return Worker{ID: w.ID, Host: w.Host, PID: w.PID, Mode: w.Mode, Concurrency: w.Concurrency, Running: w.Running,
		Lines: w.Lines, Started: w.Started.UTC(), Interval: text.Duration(w.Interval), Beat: w.Beat.UTC(),
		Age: text.Duration(w.Age), Version: w.Version, Release: w.Release}
}
