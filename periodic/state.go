package periodic

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tierset/tierset/delay"
)

// keys is the periodic key layout of one queue, under the queue's hash
// tag (so every key is on the queue's slot, beside the tasks the ticks
// make); nothing else builds these names:
//
//	<prefix>:{q:<queue>}:periodic         SET   names of the jobs declared on the queue (until Forget)
//	<prefix>:{q:<queue>}:periodic:<job>   HASH  the job's state (delay/lua/enqueue_tick.lua):
//	    last     the guard: the last tick handled (Unix ms, Redis TIME)
//	    enq      the last tick that made a task
//	    next     the tick after last, by the schedule that handled last
//	    paused   since (Unix ms), while paused
//	    p:<process>     '<expiry Unix ms> <definition> <declared Unix ms>': a live process's declaration
//	    d:<definition>  '<first declared Unix ms> <catch-up> <max catch-up> <grace ms> <spec>'
//	<prefix>:{q:<queue>}:periodic-forgot:<job>  STRING  when Forget ran (Unix ms, Redis TIME), for forgetKeep
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

// forgotten is the tombstone Forget leaves: the time it ran (Unix ms),
// for forgetKeep. Its prefix is not the index's, so Discover does not
// match it and no job name can make it a job's key.
func (k keys) forgotten(name string) string { return k.tag + ":periodic-forgot:" + name }

// Declaration is one live process's declaration of a job.
type Declaration struct {
	// Process is the scheduler's Options.Process.
	Process string
	// Declared is when it last declared the job (Redis TIME): every
	// Options.TTL/3 while it runs. Expires is when the declaration lapses
	// unless renewed.
	Declared, Expires time.Time
}

// Definition is one definition of a job live in some process.
type Definition struct {
	// Digest identifies the definition (schedule, payload, catch-up).
	Digest string
	// Spec is how its processes describe the schedule.
	Spec string
	// CatchUp, MaxCatchUp and Grace are its catch-up policy (Job's).
	CatchUp    CatchUp
	MaxCatchUp int
	Grace      time.Duration
	// FirstDeclared is when a process first declared it (Redis TIME).
	FirstDeclared time.Time
	// Processes are the processes that declare it now, by name.
	Processes []Declaration
	// Winner: this definition drives the job's ticks.
	Winner bool
}

// JobInfo is a job as operators see it ([List]).
type JobInfo struct {
	Name string
	// Spec and Digest are the winning definition's ("" when no process
	// declares the job: it does not tick).
	Spec, Digest string
	// CatchUp is the winning definition's policy (Definitions[0] has
	// its bounds); CatchUpOne when no process declares the job.
	CatchUp CatchUp
	// Last is the last tick handled (enqueued, or dropped by catch-up or
	// a pause); LastEnqueued the last that made a task; Next the tick
	// after Last by the schedule that handled Last. Zero: none yet.
	Last, LastEnqueued, Next time.Time
	// Paused, since PausedSince: ticks pass without tasks.
	Paused      bool
	PausedSince time.Time
	// Definitions live now, the winner first. More than one is a
	// schedule change under way (Conflict). None: no live process
	// declares the job, which does not tick and may be forgotten
	// ([Forget]).
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
			exp, rest, ok := strings.Cut(v, " ")
			if !ok || parseMs(exp) <= now.UnixMilli() {
				continue
			}
			def, at, _ := strings.Cut(rest, " ")
			d := byDef[def]
			if d == nil {
				d = &Definition{Digest: def}
				byDef[def] = d
			}
			d.Processes = append(d.Processes, Declaration{Process: f[2:], Declared: msTime(parseMs(at)), Expires: msTime(parseMs(exp))})
		}
	}
	for def, d := range byDef {
		parseDef(d, first[def])
		sort.Slice(d.Processes, func(i, j int) bool { return d.Processes[i].Process < d.Processes[j].Process })
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

// defValue is a definition's d: field: when it was first declared, its
// catch-up policy and its spec (last: it may hold spaces).
func defValue(at time.Time, j Job) string {
	return fmt.Sprintf("%d %d %d %d %s", at.UnixMilli(), int(j.CatchUp), j.MaxCatchUp, j.Grace.Milliseconds(), j.Spec)
}

// parseDef fills d from its d: field (defValue).
func parseDef(d *Definition, v string) {
	f := strings.SplitN(v, " ", 5)
	d.FirstDeclared = msTime(parseMs(f[0]))
	if len(f) < 5 {
		return
	}
	cu, err1 := strconv.Atoi(f[1])
	mx, err2 := strconv.Atoi(f[2])
	gr, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return
	}
	d.CatchUp, d.MaxCatchUp, d.Grace, d.Spec = CatchUp(cu), mx, time.Duration(gr)*time.Millisecond, f[4]
}

func (s state) info(name string) JobInfo {
	ji := JobInfo{Name: name, Last: msTime(s.last), LastEnqueued: msTime(s.enq), Next: msTime(s.next),
		Paused: s.paused > 0, PausedSince: msTime(s.paused), Definitions: s.defs, Conflict: len(s.defs) > 1}
	if len(s.defs) > 0 {
		ji.Spec, ji.Digest, ji.CatchUp = s.defs[0].Spec, s.defs[0].Digest, s.defs[0].CatchUp
	}
	return ji
}
