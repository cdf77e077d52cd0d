package periodic

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
)

// Options configure a Scheduler. The zero value is the default.
type Options struct {
	// TTL is how long a process's declaration of its jobs lives without
	// a refresh; Run refreshes it every TTL/3 and deletes it when it
	// returns. A job no live process declares stops ticking; a schedule
	// change is over once the last old declaration is gone. Defaults to
	// 30s; at least 300ms.
	TTL time.Duration
	// Process names this scheduler in declarations. Defaults to
	// "<hostname>:<pid>:<random>".
	Process string
	// Logger receives conflicts, refusals and Redis errors. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// Now is the process clock. It only arms timers, through the offset
	// to Redis TIME measured on every call; ticks are judged by Redis
	// TIME. Defaults to time.Now.
	Now func() time.Time
	// Observer receives what this process did with the ticks (metrics:
	// contrib/prometheus). Defaults to none.
	Observer Observer
}

// Scheduler declares periodic jobs on one queue and enqueues their ticks
// ([Scheduler.Run]); every process runs one, beside its workers. It is
// safe for concurrent use.
type Scheduler struct {
	q    *delay.Queue
	k    keys
	o    Options
	wake chan struct{}

	mu   sync.Mutex
	jobs map[string]*entry
	gone []string // removed names whose declaration Run still deletes
}

// entry is a job in one Scheduler, and what Run knows of it.
type entry struct {
	job   Job
	def   string
	last  int64 // the guard as last seen (Unix ms), 0: unknown
	from  int64 // with no guard: ticks start after this (Redis TIME at first sight)
	retry int64 // after an error: not before this (Unix ms, Redis TIME)
	fails int
	seen  string // the live definitions last reported, to log a change once
	ended bool   // the schedule gave no tick after the guard (logged)
}

// New returns a Scheduler for q. It sends nothing.
func New(q *delay.Queue, o Options) (*Scheduler, error) {
	k, err := keysOf(q)
	if err != nil {
		return nil, err
	}
	if o.TTL == 0 {
		o.TTL = 30 * time.Second
	}
	if o.TTL < 300*time.Millisecond {
		return nil, invalid("options", "TTL %v (min 300ms)", o.TTL)
	}
	if o.Process == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Process = host + ":" + strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(b[:])
	}
	if strings.ContainsAny(o.Process, " \n") {
		return nil, invalid("options", "Process %q holds a space or newline", o.Process)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Scheduler{q: q, k: k, o: o, wake: make(chan struct{}, 1), jobs: map[string]*entry{}}, nil
}

// Add declares j in this process: Run declares it in Redis and enqueues
// its ticks. Every process that runs the job adds the same Job. A
// refused job is a *ValidationError and changes nothing.
func (s *Scheduler) Add(j Job) error {
	j, def, err := j.checked(s.o.Now())
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.jobs[j.Name]; ok {
		return invalid("name", "job %q already added", j.Name)
	}
	s.jobs[j.Name] = &entry{job: j, def: def}
	s.poke()
	return nil
}

// Remove stops declaring the job name in this process; Run deletes its
// declaration. The job keeps ticking while another live process declares
// it. It reports whether the job was there.
func (s *Scheduler) Remove(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.jobs[name]; !ok {
		return false
	}
	delete(s.jobs, name)
	s.gone = append(s.gone, name)
	s.poke()
	return true
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run declares the jobs and enqueues their ticks until ctx ends, then
// deletes its declarations and returns nil. Redis errors are logged and
// retried; after an outage the ticks missed meanwhile follow each job's
// CatchUp policy.
func (s *Scheduler) Run(ctx context.Context) error {
	r := runner{s: s, offset: 0}
	defer r.undeclare(ctx)
	for {
		wait := r.pass(ctx)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-s.wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// runner is one Run's state.
type runner struct {
	s         *Scheduler
	offset    time.Duration // Redis TIME minus the process clock
	beat      int64         // next declaration refresh (Unix ms, Redis TIME); 0: now
	beatFails int
}

// serverNow estimates Redis TIME.
func (r *runner) serverNow() time.Time { return r.s.o.Now().Add(r.offset) }

func (r *runner) observe(now time.Time, sent, recv time.Time) {
	r.offset = now.Sub(sent.Add(recv.Sub(sent) / 2))
}

// pass refreshes the declarations when due, handles every job whose next
// tick has come by Redis TIME and returns how long to wait (process
// clock) until the next thing to do.
func (r *runner) pass(ctx context.Context) time.Duration {
	s := r.s
	now := r.serverNow()
	s.mu.Lock()
	fresh := false // a job added since the last declaration
	for _, e := range s.jobs {
		fresh = fresh || e.from == 0
	}
	s.mu.Unlock()
	if fresh || now.UnixMilli() >= r.beat {
		if err := r.declare(ctx); err != nil {
			if ctx.Err() != nil {
				return time.Second
			}
			r.beatFails++
			s.o.Logger.WarnContext(ctx, "periodic: declare", "queue", s.q.Name(), "err", err)
			return backoff(r.beatFails)
		}
		r.beatFails = 0
		r.beat = r.serverNow().Add(s.o.TTL / 3).UnixMilli()
	}
	s.mu.Lock()
	es := make([]*entry, 0, len(s.jobs))
	for _, e := range s.jobs {
		es = append(es, e)
	}
	s.mu.Unlock()
	sort.Slice(es, func(i, j int) bool { return es[i].job.Name < es[j].job.Name })
	next := time.UnixMilli(r.beat)
	for _, e := range es {
		if e.from == 0 {
			continue // added after the declaration above: the next pass
		}
		if !e.due().After(e.base()) {
			if !e.ended {
				e.ended = true
				s.o.Logger.WarnContext(ctx, "periodic: schedule has no tick after the last one; the job stops in this process",
					"queue", s.q.Name(), "job", e.job.Name, "after", e.base())
			}
			continue
		}
		now := r.serverNow()
		if due := e.due(); now.UnixMilli() >= e.retry && !due.After(now) {
			r.tick(ctx, e)
		}
		at := e.due()
		if e.retry > at.UnixMilli() {
			at = time.UnixMilli(e.retry)
		}
		if at.Before(next) {
			next = at
		}
	}
	return max(next.Sub(r.serverNow()), time.Millisecond)
}

// otherWait is how long a process whose definition lost waits before it
// offers the job's next tick again.
const otherWait = 500 * time.Millisecond

// backoff after n failures in a row: 50ms doubling to 2s.
func backoff(n int) time.Duration {
	return min(50*time.Millisecond<<min(n-1, 6), 2*time.Second)
}

// base is what the job's ticks follow: the guard as known, or with
// none yet, Redis TIME when this process first declared the job.
func (e *entry) base() time.Time {
	if e.last == 0 {
		return time.UnixMilli(e.from)
	}
	return time.UnixMilli(e.last)
}

// due is the job's next tick.
func (e *entry) due() time.Time { return e.job.Schedule.Next(e.base()) }

// declare writes this process's declarations (and deletes those of
// removed jobs) in one transaction, then reads every job's state: the
// guard and the live definitions, to report a schedule change.
func (r *runner) declare(ctx context.Context) error {
	s := r.s
	c := s.q.Client()
	sent := s.o.Now()
	now, err := c.Time(ctx).Result()
	if err != nil {
		return err
	}
	r.observe(now, sent, s.o.Now())
	s.mu.Lock()
	es := make([]*entry, 0, len(s.jobs))
	for _, e := range s.jobs {
		es = append(es, e)
	}
	gone := s.gone
	s.gone = nil
	s.mu.Unlock()
	exp := now.Add(s.o.TTL).UnixMilli()
	hs := make([]*redis.MapStringStringCmd, len(es))
	fg := make([]*redis.SliceCmd, len(es))
	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, name := range gone {
			p.HDel(ctx, s.k.job(name), "p:"+s.o.Process)
		}
		for _, e := range es {
			st := s.k.job(e.job.Name)
			p.SAdd(ctx, s.k.index(), e.job.Name)
			p.HSet(ctx, st, "p:"+s.o.Process, strconv.FormatInt(exp, 10)+" "+e.def+" "+strconv.FormatInt(now.UnixMilli(), 10))
			p.HSetNX(ctx, st, "d:"+e.def, defValue(now, e.job))
		}
		for i, e := range es {
			hs[i] = p.HGetAll(ctx, s.k.job(e.job.Name))
			fg[i] = p.MGet(ctx, s.k.forgotten(e.job.Name)) // no redis.Nil when absent
		}
		return nil
	})
	if err != nil {
		s.mu.Lock()
		s.gone = append(s.gone, gone...)
		s.mu.Unlock()
		return err
	}
	for i, e := range es {
		st := parseState(hs[i].Val(), now)
		if st.last == 0 && (e.last > 0 || e.from != 0 && forgotAt(fg[i]) >= e.from) {
			// the job's state is gone (Forget, while this process was
			// frozen past its TTL): what this process remembers of the
			// guard, or its first declaration when it knew none, may be
			// behind ticks others handled before it, so it starts over
			// as a new job would, from now. Now is read again: the TIME
			// above may be from before a freeze that outlasted the
			// Forget, and ticks before the Forget may have been handled
			at, err := c.Time(ctx).Result()
			if err != nil {
				return err
			}
			e.last, e.from = 0, max(now.UnixMilli(), at.UnixMilli())
		}
		if st.last > e.last {
			e.last = st.last
		}
		if e.from == 0 {
			e.from = now.UnixMilli()
		}
		r.report(ctx, e, st)
	}
	return nil
}

// forgotAt is the time of the tombstone Forget left (Unix ms), 0 when
// there is none or it does not read as a time.
func forgotAt(c *redis.SliceCmd) int64 {
	v := c.Val()
	if len(v) != 1 {
		return 0
	}
	str, _ := v[0].(string)
	ms, err := strconv.ParseInt(str, 10, 64)
	if err != nil {
		return 0
	}
	return ms
}

// report logs a change in the job's live definitions: two or more live
// at once are a schedule change under way (a rolling deploy), logged
// once as a warning naming the winner; its end is logged too.
func (r *runner) report(ctx context.Context, e *entry, st state) {
	var b strings.Builder
	for _, d := range st.defs {
		fmt.Fprintf(&b, "%s %q %d; ", d.Digest, d.Spec, len(d.Processes))
	}
	seen := b.String()
	if seen == e.seen {
		return
	}
	was := strings.Count(e.seen, ";")
	e.seen = seen
	log := r.s.o.Logger
	switch {
	case len(st.defs) > 1:
		log.WarnContext(ctx, "periodic: job has several live definitions; the first declared drives its ticks until no process declares it",
			"queue", r.s.q.Name(), "job", e.job.Name, "winner", st.defs[0].Digest, "winner_spec", st.defs[0].Spec,
			"mine", e.def, "definitions", strings.TrimSuffix(seen, "; "))
	case was > 1:
		log.InfoContext(ctx, "periodic: job has one live definition again",
			"queue", r.s.q.Name(), "job", e.job.Name, "definition", e.def, "spec", e.job.Spec)
	}
}

// tick handles the job's ticks due by Redis TIME: the ticks after the
// guard up to now, filtered by the catch-up policy, each sent to
// EnqueueTick (whose script judges it again by Redis TIME).
func (r *runner) tick(ctx context.Context, e *entry) {
	s := r.s
	sent := s.o.Now()
	now, err := s.q.Client().Time(ctx).Result()
	if err != nil {
		r.failed(ctx, e, err)
		return
	}
	r.observe(now, sent, s.o.Now())
	for _, tk := range plan(e, now) {
		t, err := s.q.EnqueueTick(ctx, delay.Tick{
			Key: e.job.Name, Payload: e.job.Payload, Time: tk.at, Next: e.job.Schedule.Next(tk.at),
			State: s.k.job(e.job.Name), Process: s.o.Process, Def: e.def, Skip: tk.skip,
		})
		if err != nil {
			r.failed(ctx, e, err)
			return
		}
		e.fails, e.retry = 0, 0
		if l := t.Last.UnixMilli(); !t.Last.IsZero() && l > e.last {
			e.last = l
		}
		r.count(e, t)
		switch t.Outcome {
		case "enqueued", "duplicate", "skipped", "paused", "stale":
			continue
		case "early":
			// this clock ran ahead of Redis: wait for Redis TIME
			r.offset = t.Now.Sub(s.o.Now())
		case "undeclared":
			r.beat = 0 // refresh the declaration on the next pass
			e.retry = t.Now.Add(backoff(1)).UnixMilli()
		case "other":
			// another definition drives the job: its ticks move the
			// guard. This one's next tick may already be due from that
			// guard, so look again a while later, not at once: soon
			// enough to take over when the winner is gone
			e.retry = t.Now.Add(min(otherWait, s.o.TTL/3)).UnixMilli()
		}
		return
	}
}

func (r *runner) failed(ctx context.Context, e *entry, err error) {
	if ctx.Err() != nil {
		return
	}
	e.fails++
	e.retry = r.serverNow().Add(backoff(e.fails)).UnixMilli()
	if e.fails == 1 || e.fails%20 == 0 || errors.Is(err, delay.ErrInvalid) {
		r.s.o.Logger.WarnContext(ctx, "periodic: tick", "queue", r.s.q.Name(), "job", e.job.Name,
			"failures", e.fails, "err", err)
	}
}

// undeclare deletes this process's declarations when Run ends, so that a
// job it alone declared stops at once rather than after TTL.
func (r *runner) undeclare(ctx context.Context) {
	s := r.s
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	s.mu.Lock()
	names := append([]string(nil), s.gone...)
	for n := range s.jobs {
		names = append(names, n)
	}
	s.mu.Unlock()
	_, err := s.q.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, n := range names {
			p.HDel(ctx, s.k.job(n), "p:"+s.o.Process)
		}
		return nil
	})
	if err != nil {
		s.o.Logger.WarnContext(ctx, "periodic: undeclare (the declarations expire after TTL)", "queue", s.q.Name(), "err", err)
	}
}

// planned is one call of a pass: a tick to enqueue, or to skip.
type planned struct {
	at   time.Time
	skip bool
}

// maxWalk bounds the ticks walked from the guard to now in one pass;
// past it the walk starts over closer to now.
const maxWalk = 100000

// plan is what to send for e at Redis TIME now: the ticks after the
// guard up to now under e's catch-up policy. The latest of them is due
// now; the others were missed.
func plan(e *entry, now time.Time) []planned {
	j := e.job
	keep := 1
	if j.CatchUp == CatchUpAll {
		keep = j.MaxCatchUp + 1
	}
	var ticks []time.Time // the last keep ticks <= now
	t := e.base()
	for n := 0; ; n++ {
		next := j.Schedule.Next(t)
		if !next.After(t) || next.After(now) {
			break
		}
		if n == maxWalk {
			// a long outage under a short period: start again one
			// period's worth of keep ticks before now
			gap := next.Sub(t)
			next = j.Schedule.Next(now.Add(-gap * time.Duration(keep+1)))
			n = 0
		}
		t = next
		ticks = append(ticks, t)
		if len(ticks) > keep {
			ticks = ticks[1:]
		}
	}
	if len(ticks) == 0 {
		return nil
	}
	if j.CatchUp == CatchUpSkip {
		last := ticks[len(ticks)-1]
		return []planned{{at: last, skip: now.Sub(last) > j.Grace}}
	}
	out := make([]planned, len(ticks))
	for i, t := range ticks {
		out[i] = planned{at: t}
	}
	return out
}
