package delay

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/keyname"
)

// The worker registry: every running Pool keeps an entry on
// every server and under every key
// prefix its queues use, refreshed every PoolOptions.Heartbeat and
// expiring after 3 intervals without a refresh, so a killed process
// disappears by itself. Its keys (the table on the keys type, keys.go)
// share the hash tag {workers}, so a registry lives on one slot of a
// cluster and one script reads or writes it. The entry's TTL (Redis's
// clock) decides liveness; the live set lists the IDs scored by their
// last beat in Redis TIME, and ListWorkers drops the IDs whose entry is
// gone. An owner key beside each entry holds the token of the Run that
// claimed the ID, so two live pools never share one entry.

// WorkerInfo is one live pool's registry entry. Its lines' Holding say
// which tasks its handlers were running at its last heartbeat, so a
// reader (Holder) can name the pool that holds an in-flight task; that
// mapping is up to one heartbeat interval old (LineInfo.Holding).
type WorkerInfo struct {
	ID          string `json:"id"`
	Host        string `json:"host"`
	PID         int    `json:"pid"`
	Mode        string `json:"mode"` // "weighted" or "strict"
	Concurrency int    `json:"concurrency"`
	Running     int    `json:"running"` // handlers running at the last heartbeat
	// Lines are the pool's lines with a queue on the server and prefix
	// the entry was read from, each with only those queues: a pool
	// serving "orders" on one server is not listed as serving another
	// server's "orders".
	Lines    []LineInfo    `json:"lines"`
	Started  time.Time     `json:"started"`
	Interval time.Duration `json:"interval"` // its heartbeat interval
	Version  string        `json:"version"`  // the tierset module version, "(devel)" from a checkout
	// Release is the worker release of the pool's code: which queue
	// controls it honours, so a rolling deploy can tell the workers that
	// ignore a control the newer release added ("Rolling deploys" in
	// docs/operations.md). 0: a pool of v0.1.x, whose entry carries no
	// release (it honours Pause and SetRate); 1: from v0.2.0. Version
	// cannot tell them apart, being "(devel)" in a checkout.
	Release int `json:"release,omitempty"`
	// Beat is the last heartbeat and Age how long ago it was, both by
	// Redis TIME (the live set's score and the server's clock when the
	// list was read), so neither depends on the pool's or the reader's
	// clock. ListWorkers fills them; they are not part of the stored entry.
	Beat time.Time     `json:"beat,omitzero"`
	Age  time.Duration `json:"age,omitempty"`
}

// LineInfo is one line of a WorkerInfo.
type LineInfo struct {
	Name          string   `json:"name"`
	Queues        []string `json:"queues"` // the shard names of a Sharded line
	Weight        int      `json:"weight"`
	MaxConcurrent int      `json:"max_concurrent,omitempty"`
	Running       int      `json:"running"`
	// Holding lists the IDs of the tasks the line's handlers were running
	// at the last heartbeat, by queue name (a shard's own name on a
	// Sharded line), sorted, at most MaxHoldingListed IDs a line;
	// HoldingMore counts the running tasks left out past that cap. It is
	// up to one heartbeat interval old: a task taken since the last beat
	// is in no list yet, one finished since is still listed, and a task
	// still waiting in the pool's prefetch buffer is not listed, nor is
	// one whose lease has ended under a handler still running it (without
	// PoolOptions.AutoExtend): another pool may hold it now. Entries
	// of pools older than these fields have neither and still read; the
	// lists left Release at 1, being information a pool writes, not a
	// control it honours.
	Holding     map[string][]string `json:"holding,omitempty"`
	HoldingMore int                 `json:"holding_more,omitempty"`
}

// MaxHoldingListed is the most task IDs a line's heartbeat entry lists
// (LineInfo.Holding): a full line adds about 3 KB to the pool's entry
// (256 IDs of up to 8 base-36 digits, quoted), whatever the line's
// concurrency, so a pool of thousands of handlers on a few lines keeps
// its heartbeat small.
const MaxHoldingListed = 256

// Holder finds the live pool whose last heartbeat lists task id of the
// queue (or shard) called queue, among ws (ListWorkers); ok is false when
// none does. Of two that list it (a task retried and taken again within
// one interval), the one that beat last.
func Holder(ws []WorkerInfo, queue, id string) (holder WorkerInfo, ok bool) {
	for _, w := range ws {
		for _, l := range w.Lines {
			if slices.Contains(l.Holding[queue], id) && (!ok || w.Beat.After(holder.Beat)) {
				holder, ok = w, true
			}
		}
	}
	return holder, ok
}

// workerEntry is a WorkerInfo as the registry stores it: its durations
// as Go duration strings ("5s"), which every version of the registry
// writes and reads.
type workerEntry struct {
	WorkerInfo
	Interval jsonDuration `json:"interval"`
	Age      jsonDuration `json:"age,omitempty"`
}

// jsonDuration is a time.Duration that reads and writes JSON as a string.
type jsonDuration time.Duration

func (d jsonDuration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = jsonDuration(v)
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

// MinHeartbeat is the shortest PoolOptions.Heartbeat: an entry lives 3
// intervals, and one much shorter than a round trip to Redis would expire
// before the next beat arrives (below 1/3 ms its TTL is 0 ms, which Redis
// refuses, and the pool would beat, and fail, in a busy loop).
const MinHeartbeat = 10 * time.Millisecond

// entryTTL is how long an entry (and its owner key) lives: 3 heartbeat
// intervals, saturating at math.MaxInt64 ns instead of wrapping negative.
func entryTTL(beat time.Duration) time.Duration {
	if beat > math.MaxInt64/3 {
		return math.MaxInt64
	}
	return 3 * beat
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

// workerRelease is WorkerInfo.Release of this code. Raise it with a
// release that adds a queue control workers must honour or changes what
// a worker reads, and say in docs/operations.md what the older workers
// miss.
const workerRelease = 1

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

// info is the pool's entry on t as it stands now: the lines with a queue
// on t (only those queues), so that a queue of the same name on another
// server or under another prefix is never taken for one this pool serves.
// Concurrency and Running are the whole pool's.
func (p *Pool) info(lines []*line, s *sched, t *regTarget) WorkerInfo {
	host, _ := os.Hostname()
	mode := "weighted"
	if p.o.Strict {
		mode = "strict"
	}
	w := WorkerInfo{ID: p.o.ID, Host: host, PID: os.Getpid(), Mode: mode,
		Concurrency: p.o.Concurrency, Started: time.UnixMilli(p.started.Load()),
		Interval: p.o.Heartbeat, Version: moduleVersion(), Release: workerRelease}
	s.mu.Lock()
	for _, l := range lines {
		w.Running += l.running
		queues := t.queues[l]
		if len(queues) == 0 {
			continue
		}
		li := LineInfo{Name: l.name, Queues: queues, Weight: l.o.Weight,
			MaxConcurrent: l.o.MaxConcurrent, Running: l.running}
		for task, tk := range l.holding {
			if !slices.Contains(queues, tk.q.name) {
				continue // a shard on another server: listed in that entry
			}
			if !p.o.AutoExtend && !task.Deadline.After(tk.q.ServerNow()) {
				// a handler overrunning its lease holds the task no
				// longer: another pool may have taken it, and listing it
				// would name this pool for as long as the handler runs
				continue
			}
			if li.Holding == nil {
				li.Holding = map[string][]string{}
			}
			li.Holding[tk.q.name] = append(li.Holding[tk.q.name], task.ID)
		}
		w.Lines = append(w.Lines, li)
	}
	s.mu.Unlock()
	for i := range w.Lines {
		capHolding(&w.Lines[i], MaxHoldingListed)
	}
	return w
}

// capHolding sorts l's lists and keeps the first limit (queue, ID)
// pairs in that order, counting the rest in HoldingMore, so a truncated
// list says so.
func capHolding(l *LineInfo, limit int) {
	type held struct{ q, id string }
	var all []held
	for q, ids := range l.Holding {
		slices.Sort(ids)
		for _, id := range ids {
			all = append(all, held{q, id})
		}
	}
	if len(all) <= limit {
		return
	}
	slices.SortFunc(all, func(a, b held) int {
		return cmp.Or(strings.Compare(a.q, b.q), strings.Compare(a.id, b.id))
	})
	l.Holding = map[string][]string{}
	for _, h := range all[:limit] {
		l.Holding[h.q] = append(l.Holding[h.q], h.id)
	}
	l.HoldingMore = len(all) - limit
}

// registration is a running pool's presence in the worker registry: an
// entry on every server and key prefix its lines use (a pool whose lines
// live on two servers under one prefix is listed on both), each claimed
// with the same owner token, drawn once per Run.
type registration struct {
	p       *Pool
	lines   []*line
	s       *sched
	token   string
	targets []*regTarget
}

// regTarget is one registry a pool writes: a client and key prefix its
// lines use. Clients are told apart by identity: two clients of one server
// write the same keys with the same token, which costs a write, no harm.
type regTarget struct {
	c      redis.UniversalClient
	prefix string
	// takers holds one taker of each line with a queue here: a failed
	// heartbeat is reported to (and counted for) those lines, not others.
	takers []*taker
	// queues are the names of each line's queues here: the entry on this
	// target lists those lines and queues only.
	queues map[*line][]string
	// owned: this Run's last heartbeat here wrote the entry.
	owned atomic.Bool
}

// register prepares the pool's registration; heartbeat writes it.
func (p *Pool) register(lines []*line, s *sched) *registration {
	r := &registration{p: p, lines: lines, s: s, token: newToken()}
	type at struct {
		c      redis.UniversalClient
		prefix string
	}
	byAt := map[at]*regTarget{}
	for _, l := range lines {
		for _, tk := range l.takers {
			k := at{tk.q.c, tk.q.o.Prefix}
			t := byAt[k]
			if t == nil {
				t = &regTarget{c: k.c, prefix: k.prefix, queues: map[*line][]string{}}
				byAt[k] = t
				r.targets = append(r.targets, t)
			}
			if len(t.queues[l]) == 0 {
				t.takers = append(t.takers, tk)
			}
			t.queues[l] = append(t.queues[l], tk.q.name)
		}
	}
	return r
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// keys are the entry, owner and live keys of the pool on t, in the order
// registry.lua and unregister.lua take them.
func (r *registration) keys(t *regTarget) []string {
	live, info := registryKeys(t.prefix)
	return []string{info + r.p.o.ID, ownerKey(t.prefix, r.p.o.ID), live}
}

func ownerKey(prefix, id string) string { return prefix + ":{workers}:o:" + id }

// heartbeat writes the pool's entry on every target now and every
// Heartbeat until ctx ends. Each target beats in its own goroutine and
// each call is bounded by one interval (the entry lives three), so a hung
// or slow server delays its own entry only: the entries on the other
// servers stay fresh. fatal ends Run with ErrDuplicateID when another live
// pool holds the ID.
func (r *registration) heartbeat(ctx context.Context, fatal func(error)) {
	var wg sync.WaitGroup
	for _, t := range r.targets {
		wg.Add(1)
		go func() { defer wg.Done(); r.beatLoop(ctx, t, fatal) }()
	}
	wg.Wait()
}

// beatLoop is the heartbeat on one target. When the ID is held by another
// token it writes nothing and watches the holder: a holder whose beat
// advances is a live pool, and Run ends with ErrDuplicateID; one that
// never beats again (a process killed with its entry in place) expires
// within 3 of its intervals, and this pool claims the ID then. An ID that
// comes free before the holder's expiry (a server that lost its keys) is
// left to the holder for one more holder TTL, so a live holder claims it
// back first. Two pools that each hold the ID on a different target (they
// started at once) are told apart by their tokens: the lower one waits up
// to one holder TTL for the other to end, which it does when it sees the
// lower one beat.
func (r *registration) beatLoop(ctx context.Context, t *regTarget, fatal func(error)) {
	o := r.p.o
	failures := 0
	held := int64(-1)   // the holder's beat when the ID was first found held
	var expiry int64    // the holder's owner key's end, Redis ms (0: none seen)
	var holderTTL int64 // the longest owner TTL seen left, ms
	var notBefore int64 // claim a free ID only from then, Redis ms
	var extended bool   // notBefore moved past a lost holder's expiry
	var grace int64     // a split: fatal only past this, Redis ms (0: none)
	for {
		wait := o.Heartbeat
		rep, err := r.beat(ctx, t, notBefore)
		switch {
		case err != nil:
			if ended(ctx) {
				return
			}
			for _, tk := range t.takers {
				tk.onError("heartbeat", err)
			}
			failures++
			wait = min(wait, backoffDelay(o.ReconnectMin, o.ReconnectMax, failures))
		case rep.int(0) == codeDup && rep.str(3) == "":
			// free, but a holder was seen: not before notBefore
			t.owned.Store(false)
			failures = 0
			if now := rep.int(1); !extended && now < expiry {
				notBefore, extended = now+holderTTL, true
			}
		case rep.int(0) == codeDup:
			t.owned.Store(false)
			failures = 0
			now := rep.int(1)
			beat, _ := strconv.ParseFloat(rep.str(2), 64)
			holder := rep.str(3)
			if pttl := rep.int(4); pttl > 0 {
				expiry, holderTTL = max(expiry, now+pttl), max(holderTTL, pttl)
				if !extended {
					notBefore = expiry
				}
			}
			dup := fmt.Errorf("%w: pool ID %q under prefix %q is held by another pool (last beat %s, Redis TIME)",
				ErrDuplicateID, o.ID, t.prefix, time.UnixMilli(int64(beat)).UTC().Format(time.RFC3339Nano))
			if held >= 0 && int64(beat) > held {
				if !r.ownedElsewhere(t) || r.token > holder {
					fatal(dup)
					return
				}
				if grace == 0 {
					grace = now + holderTTL
				} else if now > grace {
					fatal(dup)
					return
				}
			}
			if held < 0 {
				held = int64(beat)
				for _, tk := range t.takers {
					tk.onError("heartbeat", fmt.Errorf("%w; not registered until it beats again (then Run ends) or expires", dup))
				}
			}
		case rep.int(0) != codeOK:
			err := codeErr(rep.int(0))
			for _, tk := range t.takers {
				tk.onError("heartbeat", err)
			}
		default:
			t.owned.Store(true)
			failures, held, expiry, holderTTL, notBefore, extended, grace = 0, -1, 0, 0, 0, false, 0
		}
		if !pauseFor(ctx, wait) {
			return
		}
	}
}

// ownedElsewhere reports whether this Run holds the ID on a target other
// than t (its last heartbeat there wrote the entry).
func (r *registration) ownedElsewhere(t *regTarget) bool {
	for _, u := range r.targets {
		if u != t && u.owned.Load() {
			return true
		}
	}
	return false
}

// beat runs registry.lua once on t, bounded by one heartbeat interval.
func (r *registration) beat(ctx context.Context, t *regTarget, notBefore int64) (reply, error) {
	info := r.p.info(r.lines, r.s, t)
	b, err := json.Marshal(workerEntry{WorkerInfo: info, Interval: jsonDuration(info.Interval)})
	if err != nil {
		return nil, fmt.Errorf("delay: heartbeat: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, r.p.o.Heartbeat)
	defer cancel()
	return run(cctx, t.c, scriptRegistry, "heartbeat", r.keys(t), r.p.o.ID, r.token, b,
		entryTTL(r.p.o.Heartbeat).Milliseconds(), notBefore)
}

// pauseFor waits d unless ctx ends first; it reports whether ctx is live.
func pauseFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// unregister removes the pool's entries at the end of Run, every target
// at once within 2 s (best effort: they expire anyway), each only where
// this Run's token still holds the ID.
func (r *registration) unregister(ctx context.Context) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, t := range r.targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = run(uctx, t.c, scriptUnregister, "unregister", r.keys(t), r.p.o.ID, r.token)
		}()
	}
	wg.Wait()
}

// ListWorkers returns the live pools (every running Pool)
// registered on c under the key prefix (DefaultPrefix when ""), ordered by
// ID, each with its last heartbeat (Beat) and its age (Age), both read
// from Redis TIME. An ID whose entry expired is dropped from the list on
// the way. A nil c (a typed nil such as a nil *redis.Client included) is
// ErrInvalid.
func ListWorkers(ctx context.Context, c redis.UniversalClient, prefix string) ([]WorkerInfo, error) {
	if nilClient(c) {
		return nil, invalid("client", "nil client")
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	live, info := registryKeys(prefix)
	rep, err := run(ctx, c, scriptWorkers, "list workers", []string{live, info})
	if err != nil {
		return nil, err
	}
	now := rep.int(1)
	var out []WorkerInfo
	for i := 2; i+2 < len(rep); i += 3 {
		id := rep.str(i)
		var e workerEntry
		if err := json.Unmarshal([]byte(rep.str(i+2)), &e); err != nil {
			return nil, fmt.Errorf("%w: worker entry %s: %w", ErrCorrupt, id, err)
		}
		w := e.WorkerInfo
		w.Interval = time.Duration(e.Interval)
		beat, _ := strconv.ParseFloat(rep.str(i+1), 64)
		w.Beat = time.UnixMilli(int64(beat))
		w.Age = time.Duration(max(0, now-int64(beat))) * time.Millisecond
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b WorkerInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Workers returns the live pools serving q (see ListWorkers).
func (q *Queue) Workers(ctx context.Context) ([]WorkerInfo, error) {
	if q == nil {
		return nil, invalid("queue", "nil *Queue")
	}
	return servingWorkers(ctx, q.c, q.o.Prefix, q.name)
}

// Workers returns the live pools serving s or any of its shards.
func (s *Sharded) Workers(ctx context.Context) ([]WorkerInfo, error) {
	if s == nil || len(s.shards) == 0 {
		return nil, invalid("queue", "nil *Sharded")
	}
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
