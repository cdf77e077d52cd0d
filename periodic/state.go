package periodic

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
)

// keys is the periodic key layout of one queue, under the queue's hash
// tag (so every key is on the queue's slot, beside the tasks the ticks
// make); nothing else builds these names:
//
//	<prefix>:{q:<queue>}:periodic         SET   names of the jobs ever declared on the queue
//	<prefix>:{q:<queue>}:periodic:<job>   HASH  the job's state (delay/lua/enqueue_tick.lua):
//	    last     the guard: the last tick handled (Unix ms, Redis TIME)
//	    enq      the last tick that made a task
//	    next     the tick after last, by the schedule that handled last
//	    paused   since (Unix ms), while paused
//	    p:<process>     '<expiry Unix ms> <definition>': a live process's declaration
//	    d:<definition>  '<first declared Unix ms> <spec>'
type keys struct{ tag string }

func keysOf(q *delay.Queue) (keys, error) {
	if q == nil {
		return keys{}, invalid("queue", "nil queue")
	}
	ks := q.Keys()
	if len(ks) == 0 {
		return keys{}, invalid("queue", "queue %q has no keys", q.Name())
	}
	i := strings.IndexByte(ks[0], '}')
	if i < 0 {
		return keys{}, invalid("queue", "queue key %q has no hash tag", ks[0])
	}
	return keys{tag: ks[0][:i+1]}, nil
}

func (k keys) index() string          { return k.tag + ":periodic" }
func (k keys) job(name string) string { return k.tag + ":periodic:" + name }

// Definition is one definition of a job live in some process.
type Definition struct {
	// Digest identifies the definition (schedule, payload, catch-up).
	Digest string
	// Spec is how its processes describe the schedule.
	Spec string
	// FirstDeclared is when a process first declared it (Redis TIME).
	FirstDeclared time.Time
	// Processes are the processes that declare it now.
	Processes []string
	// Winner: this definition drives the job's ticks.
	Winner bool
}

// JobInfo is a job as operators see it ([List]).
type JobInfo struct {
	Name string
	// Spec and Digest are the winning definition's ("" when no process
	// declares the job: it does not tick).
	Spec, Digest string
	// Last is the last tick handled (enqueued, or dropped by catch-up or
	// a pause); LastEnqueued the last that made a task; Next the tick
	// after Last by the schedule that handled Last. Zero: none yet.
	Last, LastEnqueued, Next time.Time
	// Paused, since PausedSince: ticks pass without tasks.
	Paused      bool
	PausedSince time.Time
	// Definitions live now, the winner first. More than one is a
	// schedule change under way (Conflict).
	Definitions []Definition
	Conflict    bool
}

// state is a job's state hash as read.
type state struct {
	last, enq, next, paused int64
	defs                    []Definition // live, winner first
}

func parseMs(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// parseState reads a job's state hash at Redis TIME now: the live
// declarations, grouped by definition, the winner first by the rule
// enqueue_tick.lua applies (declared first; ties: the smaller digest).
func parseState(h map[string]string, now time.Time) state {
	var s state
	byDef := map[string]*Definition{}
	first := map[string]string{}
	for f, v := range h {
		switch {
		case f == "last":
			s.last = parseMs(v)
		case f == "enq":
			s.enq = parseMs(v)
		case f == "next":
			s.next = parseMs(v)
		case f == "paused":
			s.paused = parseMs(v)
		case strings.HasPrefix(f, "d:"):
			first[f[2:]] = v
		case strings.HasPrefix(f, "p:"):
			exp, def, ok := strings.Cut(v, " ")
			if !ok || parseMs(exp) <= now.UnixMilli() {
				continue
			}
			d := byDef[def]
			if d == nil {
				d = &Definition{Digest: def}
				byDef[def] = d
			}
			d.Processes = append(d.Processes, f[2:])
		}
	}
	for def, d := range byDef {
		at, spec, _ := strings.Cut(first[def], " ")
		d.FirstDeclared, d.Spec = msTime(parseMs(at)), spec
		sort.Strings(d.Processes)
		s.defs = append(s.defs, *d)
	}
	sort.Slice(s.defs, func(i, j int) bool {
		a, b := s.defs[i], s.defs[j]
		if !a.FirstDeclared.Equal(b.FirstDeclared) {
			return a.FirstDeclared.Before(b.FirstDeclared)
		}
		return a.Digest < b.Digest
	})
	if len(s.defs) > 0 {
		s.defs[0].Winner = true
	}
	return s
}

func (s state) info(name string) JobInfo {
	ji := JobInfo{Name: name, Last: msTime(s.last), LastEnqueued: msTime(s.enq), Next: msTime(s.next),
		Paused: s.paused > 0, PausedSince: msTime(s.paused), Definitions: s.defs, Conflict: len(s.defs) > 1}
	if len(s.defs) > 0 {
		ji.Spec, ji.Digest = s.defs[0].Spec, s.defs[0].Digest
	}
	return ji
}

// List returns every job ever declared on q, by name, as Redis holds it
// now: schedule, last and next tick, the live processes declaring it, and
// whether a schedule change is under way. One call for a console page,
// a CLI listing or a metrics scrape.
func List(ctx context.Context, q *delay.Queue) ([]JobInfo, error) {
	k, err := keysOf(q)
	if err != nil {
		return nil, err
	}
	c := q.Client()
	names, err := c.SMembers(ctx, k.index()).Result()
	if err != nil {
		return nil, fmt.Errorf("periodic: list: %w", err)
	}
	sort.Strings(names)
	var tm *redis.TimeCmd
	hs := make([]*redis.MapStringStringCmd, len(names))
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		tm = p.Time(ctx)
		for i, n := range names {
			hs[i] = p.HGetAll(ctx, k.job(n))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("periodic: list: %w", err)
	}
	out := make([]JobInfo, 0, len(names))
	for i, n := range names {
		out = append(out, parseState(hs[i].Val(), tm.Val()).info(n))
	}
	return out, nil
}

// Pause pauses the job name on q for every process: its ticks pass (the
// guard moves on) without tasks until Resume, so a resume brings no
// burst of missed ticks. Tasks already enqueued are left alone.
func Pause(ctx context.Context, q *delay.Queue, name string) error {
	return setPaused(ctx, q, name, true)
}

// Resume undoes Pause: the next tick after the resume makes a task.
func Resume(ctx context.Context, q *delay.Queue, name string) error {
	return setPaused(ctx, q, name, false)
}

func setPaused(ctx context.Context, q *delay.Queue, name string, on bool) error {
	k, err := keysOf(q)
	if err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	c := q.Client()
	known, err := c.SIsMember(ctx, k.index(), name).Result()
	if err != nil {
		return fmt.Errorf("periodic: pause %q: %w", name, err)
	}
	if !known {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if !on {
		err = c.HDel(ctx, k.job(name), "paused").Err()
	} else {
		// the first pause's time is kept; Redis TIME, not this clock
		var now time.Time
		if now, err = c.Time(ctx).Result(); err == nil {
			err = c.HSetNX(ctx, k.job(name), "paused", now.UnixMilli()).Err()
		}
	}
	if err != nil {
		return fmt.Errorf("periodic: pause %q: %w", name, err)
	}
	return nil
}
