package delay

import (
	"sort"
	"sync"
	"time"
)

// pendingWait is how long a Weighted pool's handlers keep a backlogged
// line's turn for its take in flight. A take slower than that gives the
// turn away until one of the taker's takes comes back within it, so a
// slow or frozen server costs the other lines at most this once.
const pendingWait = 250 * time.Millisecond

// sched hands taken tasks to the shared handler goroutines.
type sched struct {
	mu      sync.Mutex
	cond    sync.Cond
	lines   []*line // Strict: by weight, highest first
	strict  bool
	stopped bool
	// weighted: Weighted with several lines, where a backlogged line's
	// turn waits for its take in flight (see pick).
	weighted bool
	waiters  int // handlers waiting in next
}

func newSched(lines []*line, strict bool) *sched {
	s := &sched{lines: append([]*line(nil), lines...), strict: strict, weighted: !strict && len(lines) > 1}
	s.cond.L = &s.mu
	if strict {
		sort.SliceStable(s.lines, func(i, j int) bool { return s.lines[i].o.Weight > s.lines[j].o.Weight })
	}
	return s
}

// fetchStart marks tk's take as under way. In a Weighted pool a taker
// whose last take came back full (the line is backlogged: more is due,
// and its buffer is empty only while a take is on its way) keeps its line
// in the round from that take's return until its next take returns, so
// the line's turn waits for the take instead of going to another line;
// each such wait is bounded by pendingWait. fetchStart starts the wait
// for a taker's first take.
func (s *sched) fetchStart(tk *taker) {
	if !s.weighted {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tk.fetchAt = time.Now()
	if tk.lastFull && !tk.slow && !tk.fetching {
		s.pend(tk)
	}
}

// pend keeps tk's line in the round for up to pendingWait (s.mu held).
func (s *sched) pend(tk *taker) {
	if tk.fetching {
		tk.fetchTimer.Stop()
	} else {
		tk.fetching = true
		tk.l.fetching++
	}
	tk.fetchGen++
	gen := tk.fetchGen
	tk.fetchTimer = time.AfterFunc(pendingWait, func() { s.fetchStale(tk, gen) })
}

// fetchStale gives up waiting for tk's take gen, slower than pendingWait:
// its line's turns go to the others until one of its takes is quick.
// While tk still has tasks buffered nobody waits for it yet (a taker
// with a full buffer waits for room, not for Redis): the clock restarts.
func (s *sched) fetchStale(tk *taker, gen uint64) {
	s.mu.Lock()
	stale := tk.fetching && tk.fetchGen == gen
	if stale && tk.buffered > 0 {
		s.pend(tk)
		stale = false
	} else if stale {
		tk.slow = true
		s.endFetch(tk)
	}
	s.mu.Unlock()
	if stale {
		s.cond.Broadcast()
	}
}

// endFetch takes tk's line out of the wait for its take (s.mu held).
func (s *sched) endFetch(tk *taker) {
	if !tk.fetching {
		return
	}
	tk.fetching = false
	tk.l.fetching--
	tk.fetchTimer.Stop()
	tk.fetchTimer = nil
}

// took queues what tk's take brought for the handlers; full reports
// whether the take brought all it asked for (more is due at once: the
// line stays in the round until the next take returns, see fetchStart).
// A failed take, or the taker's end, is took(tk, nil, false).
func (s *sched) took(tk *taker, tasks []*Task, full bool) {
	s.mu.Lock()
	l := tk.l
	for _, t := range tasks {
		l.buf = append(l.buf, item{t, tk})
	}
	tk.buffered += len(tasks)
	wasFetching := tk.fetching
	if s.weighted {
		if len(tasks) > 0 || full {
			tk.slow = time.Since(tk.fetchAt) > pendingWait
		}
		tk.lastFull = full
		if full && !tk.slow {
			s.pend(tk)
		} else {
			s.endFetch(tk)
		}
	}
	s.mu.Unlock()
	if len(tasks) > 0 {
		select {
		case tk.pushed <- struct{}{}:
		default:
		}
	}
	switch {
	case len(tasks) == 1 && !wasFetching:
		s.cond.Signal()
	case len(tasks) > 0 || wasFetching:
		s.cond.Broadcast()
	}
}

// buffered is how many of tk's tasks wait for a handler.
func (s *sched) buffered(tk *taker) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return tk.buffered
}

// unbuffer takes every task of tk out of its line's buffer: they are
// not to start (their queue was paused).
func (s *sched) unbuffer(tk *taker) []*Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tk.buffered == 0 {
		return nil
	}
	l := tk.l
	out := make([]*Task, 0, tk.buffered)
	keep := l.buf[:0]
	for _, it := range l.buf[l.head:] {
		if it.tk == tk {
			out = append(out, it.t)
		} else {
			keep = append(keep, it)
		}
	}
	clear(l.buf[len(keep):])
	l.buf, l.head = keep, 0
	tk.buffered = 0
	return out
}

// setMaybe records whether tk's next take may bring due tasks; Strict
// holds lower lines back while it does.
func (s *sched) setMaybe(tk *taker, v bool) {
	if !s.strict || tk.maybe == v {
		return
	}
	s.mu.Lock()
	tk.maybe = v
	if v {
		tk.l.maybe++
	} else {
		tk.l.maybe--
	}
	s.mu.Unlock()
	if !v {
		s.cond.Broadcast()
	}
}

// next blocks until a task may start and returns it with its line's
// running count taken; ok is false once the scheduler stopped.
func (s *sched) next() (it item, l *line, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.stopped {
			return item{}, nil, false
		}
		if l = s.pick(); l != nil {
			it = l.buf[l.head]
			l.buf[l.head] = item{}
			l.head++
			it.tk.buffered--
			if l.head == len(l.buf) {
				l.buf, l.head = l.buf[:0], 0
			} else if l.head > 1024 && l.head*2 > len(l.buf) {
				n := copy(l.buf, l.buf[l.head:])
				l.buf, l.head = l.buf[:n], 0
			}
			l.running++
			if l.holding == nil {
				l.holding = map[*Task]*taker{}
			}
			l.holding[it.t] = it.tk
			if s.weighted && s.waiters > 0 {
				// a handler may wait for the line that just had its
				// turn while the next turn's line has tasks
				s.cond.Signal()
			}
			return it, l, true
		}
		s.waiters++
		s.cond.Wait()
		s.waiters--
	}
}

// pick chooses the line whose task starts next (nil: none may start).
func (s *sched) pick() *line {
	if len(s.lines) == 1 {
		if l := s.lines[0]; l.eligible() {
			return l
		}
		return nil
	}
	if s.strict {
		for _, l := range s.lines {
			if l.eligible() {
				return l
			}
			atCap := l.o.MaxConcurrent > 0 && l.running >= l.o.MaxConcurrent
			if !atCap && (l.waiting() > 0 || l.maybe > 0) {
				return nil // a higher line has due tasks on their way
			}
		}
		return nil
	}
	// Smooth weighted round robin over the backlogged lines: those with a
	// task waiting, and those whose take in flight follows a full one
	// (fetchStart). When the turn falls to a line whose tasks are still
	// on their way, the handler waits for them rather than give the turn
	// to a line that happens to have a task buffered: that is what keeps
	// the shares at the weights whatever each line's buffer holds at the
	// instant a handler frees up.
	var best *line
	total, n := 0, 0
	for _, l := range s.lines {
		if !l.backlogged() {
			continue
		}
		n++
		total += l.o.Weight
		if best == nil || l.cur+l.o.Weight > best.cur+best.o.Weight {
			best = l
		}
	}
	if best == nil || best.waiting() == 0 {
		return nil
	}
	for _, l := range s.lines {
		if l.backlogged() {
			l.cur += l.o.Weight
		}
	}
	best.cur -= total
	if n == len(s.lines) {
		best.fullPicks.Add(1)
	}
	return best
}

// finish gives back the running slot of l that ran t.
func (s *sched) finish(l *line, t *Task) {
	s.mu.Lock()
	l.running--
	delete(l.holding, t)
	capped := l.o.MaxConcurrent > 0 && l.running == l.o.MaxConcurrent-1 && l.waiting() > 0
	s.mu.Unlock()
	if capped {
		s.cond.Signal()
	}
}

// popLate removes up to max-1 more tasks of tk at the head of l's buffer
// whose lease is too close to its end to start them.
func (s *sched) popLate(l *line, tk *taker, max int, late func(*Task) bool) []*Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Task
	for len(out) < max-1 && l.waiting() > 0 {
		it := l.buf[l.head]
		if it.tk != tk || !late(it.t) {
			break
		}
		l.buf[l.head] = item{}
		l.head++
		tk.buffered--
		out = append(out, it.t)
	}
	if l.head == len(l.buf) {
		l.buf, l.head = l.buf[:0], 0
	}
	return out
}

// busy reports whether a handler is running a task (of any line).
func (s *sched) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if l.running > 0 {
			return true
		}
	}
	return false
}

func (s *sched) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.cond.Broadcast()
}

// drain empties every buffer (after stop), grouped by taker.
func (s *sched) drain() map[*taker][]*Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[*taker][]*Task{}
	for _, l := range s.lines {
		for _, it := range l.buf[l.head:] {
			out[it.tk] = append(out[it.tk], it.t)
		}
		l.buf, l.head = nil, 0
		for _, tk := range l.takers {
			tk.buffered = 0
			s.endFetch(tk)
		}
	}
	return out
}
