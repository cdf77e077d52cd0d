package delay

import (
	"sort"
	"sync"
)

// sched hands taken tasks to the shared handler goroutines.
type sched struct {
	mu      sync.Mutex
	cond    sync.Cond
	lines   []*line // Strict: by weight, highest first
	strict  bool
	stopped bool
}

func newSched(lines []*line, strict bool) *sched {
	s := &sched{lines: append([]*line(nil), lines...), strict: strict}
	s.cond.L = &s.mu
	if strict {
		sort.SliceStable(s.lines, func(i, j int) bool { return s.lines[i].o.Weight > s.lines[j].o.Weight })
	}
	return s
}

// push queues a taker's tasks for the handlers.
func (s *sched) push(tk *taker, tasks []*Task) {
	s.mu.Lock()
	l := tk.l
	for _, t := range tasks {
		l.buf = append(l.buf, item{t, tk})
	}
	s.mu.Unlock()
	if len(tasks) == 1 {
		s.cond.Signal()
	} else {
		s.cond.Broadcast()
	}
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
			if l.head == len(l.buf) {
				l.buf, l.head = l.buf[:0], 0
			} else if l.head > 1024 && l.head*2 > len(l.buf) {
				n := copy(l.buf, l.buf[l.head:])
				l.buf, l.head = l.buf[:n], 0
			}
			l.running++
			return it, l, true
		}
		s.cond.Wait()
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
	var best *line
	total, n := 0, 0
	for _, l := range s.lines {
		if !l.eligible() {
			continue
		}
		n++
		l.cur += l.o.Weight
		total += l.o.Weight
		if best == nil || l.cur > best.cur {
			best = l
		}
	}
	if best != nil {
		best.cur -= total
		if n == len(s.lines) {
			best.fullPicks.Add(1)
		}
	}
	return best
}

// finish gives back a running slot of l.
func (s *sched) finish(l *line) {
	s.mu.Lock()
	l.running--
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
		out = append(out, it.t)
	}
	if l.head == len(l.buf) {
		l.buf, l.head = l.buf[:0], 0
	}
	return out
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
	}
	return out
}
