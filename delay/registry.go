package delay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/keyname"
)

// The worker registry: every running Pool (so every Worker and
// ShardedWorker) keeps an entry under each key prefix its queues use,
// refreshed every PoolOptions.Heartbeat and expiring after 3 intervals
// without a refresh, so a killed process disappears by itself. Both of
// its keys (the table on the keys type, keys.go) share the hash tag {workers}, so the
// registry lives on one slot of a cluster and MGET works there. The
// entry's TTL (Redis's clock) decides liveness; the index only lists the
// IDs, and ListWorkers drops the IDs whose entry is gone.

// WorkerInfo is one live pool's registry entry.
type WorkerInfo struct {
	ID          string     `json:"id"`
	Host        string     `json:"host"`
	PID         int        `json:"pid"`
	Mode        string     `json:"mode"` // "weighted" or "strict"
	Concurrency int        `json:"concurrency"`
	Running     int        `json:"running"` // handlers running at the last heartbeat
	Lines       []LineInfo `json:"lines"`
	Started     time.Time  `json:"started"`
	Beat        time.Time  `json:"beat"`     // the last heartbeat, by the pool's clock
	Interval    Duration   `json:"interval"` // its heartbeat interval
	Version     string     `json:"version"`  // the tierset module version, "(devel)" from a checkout
}

// LineInfo is one line of a WorkerInfo.
type LineInfo struct {
	Name          string   `json:"name"`
	Queues        []string `json:"queues"` // the shard names of a Sharded line
	Weight        int      `json:"weight"`
	MaxConcurrent int      `json:"max_concurrent,omitempty"`
	Running       int      `json:"running"`
}

// Duration is a time.Duration that reads and writes JSON as a string
// ("5s").
type Duration time.Duration

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// Serves reports whether the pool serves the queue (or sharded queue,
// or shard) called name.
func (w WorkerInfo) Serves(name string) bool {
	for _, l := range w.Lines {
		if l.Name == name || slices.Contains(l.Queues, name) {
			return true
		}
	}
	return false
}

func registryKeys(prefix string) (live, info string) {
	base := prefix + ":{workers}:"
	return base + "live", base + "w:"
}

func newPoolID() string {
	host, _ := os.Hostname()
	if keyname.Check(host) != nil {
		host = "host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if bi.Main.Path == "github.com/tierset/tierset" {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/tierset/tierset" {
			return d.Version
		}
	}
	return ""
}

// registries returns, per key prefix the pool's queues use, the first of
// those queues' takers: its client writes the registry, and it reports the
// registry's errors.
func registries(lines []*line) map[string]*taker {
	out := map[string]*taker{}
	for _, l := range lines {
		for _, tk := range l.takers {
			if _, ok := out[tk.q.o.Prefix]; !ok {
				out[tk.q.o.Prefix] = tk
			}
		}
	}
	return out
}

func (p *Pool) info(lines []*line, s *sched) WorkerInfo {
	host, _ := os.Hostname()
	mode := "weighted"
	if p.o.Mode == Strict {
		mode = "strict"
	}
	w := WorkerInfo{ID: p.o.ID, Host: host, PID: os.Getpid(), Mode: mode,
		Concurrency: p.o.Concurrency, Started: time.UnixMilli(p.started.Load()),
		Beat: time.Now(), Interval: Duration(p.o.Heartbeat), Version: moduleVersion()}
	s.mu.Lock()
	for _, l := range lines {
		li := LineInfo{Name: l.name, Weight: l.o.Weight, MaxConcurrent: l.o.MaxConcurrent, Running: l.running}
		for _, tk := range l.takers {
			li.Queues = append(li.Queues, tk.q.name)
		}
		w.Running += l.running
		w.Lines = append(w.Lines, li)
	}
	s.mu.Unlock()
	return w
}

// heartbeat writes the pool's entry now and every Heartbeat until ctx ends.
func (p *Pool) heartbeat(ctx context.Context, lines []*line, s *sched) {
	regs := registries(lines)
	failures := 0
	for {
		var failed error
		b, _ := json.Marshal(p.info(lines, s))
		for prefix, tk := range regs {
			live, info := registryKeys(prefix)
			_, err := tk.q.c.TxPipelined(ctx, func(pp redis.Pipeliner) error {
				pp.Set(ctx, info+p.o.ID, b, 3*p.o.Heartbeat)
				pp.ZAdd(ctx, live, redis.Z{Score: float64(time.Now().UnixMilli()), Member: p.o.ID})
				return nil
			})
			if err != nil && !ended(ctx) {
				failed = wrapErr(ctx, "heartbeat", err)
				tk.onError("heartbeat", failed) // a queue of that registry
			}
		}
		wait := p.o.Heartbeat
		if failed != nil {
			failures++
			wait = min(wait, backoffDelay(p.o.ReconnectMin, p.o.ReconnectMax, failures))
		} else {
			failures = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// unregister removes the pool's entry at the end of Run (best effort: it
// expires anyway).
func (p *Pool) unregister(ctx context.Context, lines []*line) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	for prefix, tk := range registries(lines) {
		live, info := registryKeys(prefix)
		_, _ = tk.q.c.TxPipelined(uctx, func(pp redis.Pipeliner) error {
			pp.Del(uctx, info+p.o.ID)
			pp.ZRem(uctx, live, p.o.ID)
			return nil
		})
	}
}

// ListWorkers returns the live pools (Workers, ShardedWorkers, Pools)
// registered under the key prefix (DefaultPrefix when ""), ordered by ID.
// An ID whose entry expired is dropped from the list on the way.
func ListWorkers(ctx context.Context, c redis.UniversalClient, prefix string) ([]WorkerInfo, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	live, info := registryKeys(prefix)
	ids, err := c.ZRange(ctx, live, 0, -1).Result()
	if err != nil {
		return nil, wrapErr(ctx, "list workers", err)
	}
	var out []WorkerInfo
	var gone []any
	for from := 0; from < len(ids); from += 500 {
		part := ids[from:min(from+500, len(ids))]
		keys := make([]string, len(part))
		for i, id := range part {
			keys[i] = info + id
		}
		vals, err := c.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, wrapErr(ctx, "list workers", err)
		}
		for i, v := range vals {
			s, ok := v.(string)
			if !ok {
				gone = append(gone, part[i])
				continue
			}
			var w WorkerInfo
			if err := json.Unmarshal([]byte(s), &w); err != nil {
				return nil, fmt.Errorf("%w: worker entry %s: %w", ErrCorrupt, part[i], err)
			}
			out = append(out, w)
		}
	}
	if len(gone) > 0 {
		// Only the expired IDs go; a pool that re-registers meanwhile
		// adds its ID again on its next heartbeat.
		_ = c.ZRem(ctx, live, gone...).Err()
	}
	return out, nil
}

// Workers returns the live pools serving q (see ListWorkers).
func (q *Queue) Workers(ctx context.Context) ([]WorkerInfo, error) {
	return servingWorkers(ctx, q.c, q.o.Prefix, q.name)
}

// Workers returns the live pools serving s or any of its shards.
func (s *Sharded) Workers(ctx context.Context) ([]WorkerInfo, error) {
	return servingWorkers(ctx, s.shards[0].c, s.shards[0].o.Prefix, s.name)
}

func servingWorkers(ctx context.Context, c redis.UniversalClient, prefix, name string) ([]WorkerInfo, error) {
	all, err := ListWorkers(ctx, c, prefix)
	if err != nil {
		return nil, err
	}
	var out []WorkerInfo
	for _, w := range all {
		if w.Serves(name) {
			out = append(out, w)
		}
	}
	return out, nil
}

// Verdict is Health's one-word reading of a queue.
type Verdict int

// Verdicts, from Health.
const (
	// Idle: no task is due.
	Idle Verdict = iota + 1
	// Served: tasks are due, a live worker serves the queue, and the
	// oldest has waited less than the bound given to Health.
	Served
	// Behind: tasks are due and live workers serve the queue, but the
	// oldest has waited past the bound: the workers do not keep up.
	Behind
	// NoWorker: tasks are due and no live worker serves the queue.
	NoWorker
)

func (v Verdict) String() string {
	switch v {
	case Idle:
		return "idle"
	case Served:
		return "served"
	case Behind:
		return "behind"
	case NoWorker:
		return "no worker"
	}
	return "unknown"
}

// Health is a queue's Stats with the live workers serving it.
type Health struct {
	Stats   Stats
	Workers []WorkerInfo
	Verdict Verdict
}

// Health reads q's Stats and its live workers and tells "no live worker
// for this queue" (NoWorker) from "workers behind" (Behind: the oldest
// due task has waited more than behind; 0 means any wait).
func (q *Queue) Health(ctx context.Context, behind time.Duration) (Health, error) {
	st, err := q.Stats(ctx)
	if err != nil {
		return Health{}, err
	}
	ws, err := q.Workers(ctx)
	if err != nil {
		return Health{}, err
	}
	h := Health{Stats: st, Workers: ws}
	switch {
	case st.Ready == 0:
		h.Verdict = Idle
	case len(ws) == 0:
		h.Verdict = NoWorker
	case st.OldestDueAge > behind:
		h.Verdict = Behind
	default:
		h.Verdict = Served
	}
	return h, nil
}
