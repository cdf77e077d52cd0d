package delay

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/keyname"
)

// Handler processes one task. Returning nil acks it; an error wrapping
// ErrSkipRetry (see Permanent) dead-letters it; an error made by
// RetryAfter retries it after the delay given; any other error, or a
// panic, retries it with Options.Backoff. ctx ends when the pool's
// ShutdownTimeout runs out; the lease deadline is in t.Deadline (see
// PoolOptions.AutoExtend).
type Handler func(ctx context.Context, t *Task) error

// PoolOptions configure a Pool. The zero value of every field is its default.
type PoolOptions struct {
	// Concurrency is the number of handler goroutines the lines share.
	// Default 8.
	Concurrency int
	// Strict is how the handlers are shared among lines. Default false,
	// weighted: the pool serves every line that has tasks waiting, in
	// proportion to its QueueOptions.Weight (smooth weighted round robin
	// over the backlogged lines with a free cap): with every line
	// backlogged, a line of weight w gets w/Σw of the handler starts, and
	// a weight-1 line always progresses. A line is backlogged while it
	// has a task waiting, or from a take that brought all it asked for
	// until its next take returns; when its turn comes while its tasks
	// are on their way, the handler waits for them (up to 250 ms) rather
	// than give the turn to another line, so a line whose takes come back
	// slower than its share drains keeps its share and the pool goes at
	// the pace of its takes. A take slower than 250 ms gives its turns
	// away, until one of that queue's takes is faster again.
	//
	// True, strict: the pool serves lines in order of Weight, highest
	// first: a line's task starts only while every line above it has
	// nothing due (no task waiting, no take under way that may bring
	// some, and its last take came back short). A line above that is at
	// its MaxConcurrent does not hold the lines below back: a cap bounds
	// what a line may use, it does not reserve handlers for it.
	Strict bool
	// ShutdownTimeout is how long Run waits for running handlers after its
	// context ends, counted from that end (a take in flight or a wake BLPOP
	// does not lengthen it, whether ctx was cancelled or reached its
	// deadline; ErrShutdownTimeout means a handler was still running). A handler still running then has its ctx
	// cancelled and is left to finish in the background: when it returns,
	// its outcome is applied directly (ack, retry, dead letter, or a release
	// when it returns an error after that cancel), each with a 5 s bound of
	// its own; a handler that never returns keeps its task leased until the
	// lease ends (AutoExtend stops at the cancel), and the sweep then
	// returns it to due with the attempt counted. Default 10 s.
	ShutdownTimeout time.Duration
	// SweepBatch caps one sweep of expired leases (1..MaxBatch). Default 100.
	SweepBatch int
	// AutoExtend extends each running task's lease every Lease/3 (see
	// Queue.keepAlive). Default off: a handler must finish within the lease.
	AutoExtend bool
	// WakeClient carries the blocking BLPOP on each queue's wake list (one
	// connection per queue or shard, held for up to WakeBlock). Default:
	// the queue's client.
	WakeClient redis.UniversalClient
	// WakeBlock is the BLPOP timeout. Run waits for a blocked wake BLPOP
	// only within ShutdownTimeout; one still blocked then ends on its own
	// within WakeBlock. Default and minimum 1 s.
	WakeBlock time.Duration
	// IdleCheck is the longest sleep of a queue's taker when nothing is
	// scheduled and no wake-up arrives (a safety net). Default 5 s.
	IdleCheck time.Duration
	// ReconnectMin and ReconnectMax bound the capped exponential backoff
	// after a Redis error (at start-up, in a take, an ack, a wake-up).
	// Defaults 50 ms and 2 s.
	ReconnectMin, ReconnectMax time.Duration
	// Heartbeat is how often the running pool refreshes its entry in the
	// worker registry (see ListWorkers) on every server its lines use,
	// each server on its own with each call bounded by one interval; the
	// entry expires after 3 intervals without a refresh (at most
	// math.MaxInt64 ns). Default 5 s; negative: no registry entry; from 0
	// to MinHeartbeat (a unit slip such as Heartbeat: 5) ErrInvalid.
	Heartbeat time.Duration
	// ID names the pool in the registry; one live pool holds an ID at a
	// time. A Run that finds its ID held waits, unlisted, for the holder's
	// entry to expire (a killed process's does within 3 of its intervals)
	// and ends with ErrDuplicateID if the holder beats again meanwhile.
	// An ID that comes free before the holder's entry would have expired
	// (a server that lost its keys) is left to the holder for one more of
	// its entry's lifetimes, so the live holder claims it back first. Two
	// Runs that each claimed the ID on a different server or prefix (they
	// started at once) are told apart by a token each Run draws: the one
	// with the higher token ends with ErrDuplicateID, the other claims the
	// rest once it has (or ends too if the first beats on past one entry
	// lifetime). Default: host, pid and a random suffix.
	ID string
	// SharedBatch caps the tasks one take or ack script of a line carries
	// while another line of the pool has a task due within the next
	// second. Redis runs one script at a time, so every line's take waits
	// behind the script running when it arrives: a bursting line's
	// BatchSize-sized scripts would set the other lines' lateness (see
	// docs/benchmarks.md, "One line's burst beside another"). A line alone,
	// or beside idle lines, keeps its BatchSize. Default 32; negative: no
	// cap.
	SharedBatch int
}

// QueueOptions configure one line of a Pool. The zero value of every
// field is its default.
type QueueOptions struct {
	// Weight is the line's share of the handlers in a weighted pool and its
	// rank in a strict one (higher first; equal weights in Add order).
	// Default 1.
	Weight int
	// MaxConcurrent caps the line's running handlers (over all its shards).
	// Default 0: no cap but the pool's Concurrency.
	MaxConcurrent int
	// BatchSize caps one Take of each of the line's queues (1..MaxBatch).
	// Default: the line's concurrency (MaxConcurrent, else the pool's
	// Concurrency), at most MaxBatch.
	BatchSize int
	// Prefetch is how many taken tasks each of the line's queues may hold
	// waiting for a handler beyond its concurrency. With a buffer, a take
	// carries up to BatchSize tasks whatever the number of free handlers,
	// and the next take goes out when the buffer runs low (half empty), so
	// the network overlaps the handling. A buffered task is started only
	// while at least half of its lease is left; otherwise, for every
	// buffered task at shutdown, and once the queue is paused
	// (Queue.Pause, seen within 25 ms plus a round trip), it is released:
	// put back in due at its score with its attempt count restored. A task
	// killed with its process while buffered still counts one attempt and
	// waits for its lease. Default: BatchSize when BatchSize exceeds
	// the line's concurrency; else, in a weighted pool of several lines,
	// the line's share of the handlers (Concurrency·Weight/ΣWeight,
	// rounded up, split over a Sharded line's queues), so a backlogged
	// line has tasks ready when its turn comes; else none. Negative: none.
	Prefetch int
}

// Line is what a Pool serves: a *Queue, or a *Sharded (one line, one
// taker per shard).
type Line interface {
	lineName() string
	lineQueues() []*Queue
}

func (q *Queue) lineName() string     { return q.name }
func (q *Queue) lineQueues() []*Queue { return []*Queue{q} }

func (s *Sharded) lineName() string     { return s.name }
func (s *Sharded) lineQueues() []*Queue { return s.Shards() }

// nilLine reports a nil Line, typed nils included (a nil *Queue in the
// interface is not == nil, and its methods would dereference it).
func nilLine(l Line) bool {
	switch v := l.(type) {
	case nil:
		return true
	case *Queue:
		return v == nil
	case *Sharded:
		return v == nil
	}
	return false
}

// Pool is the runner: it takes due tasks and runs each line's Handler on
// them. It serves one or several lines (queues, each with its own
// handler, weight and optional concurrency cap) from one set of handler
// goroutines. Each queue (each shard of a Sharded line) has its own
// taker, with its own take loop, its own wake-up (BLPOP on the queue's
// wake list, a client-side timer for the next due task: no polling) and
// its own backoff, so a shard whose master is down or slow holds back no
// other; the takers hand their tasks to the shared handlers, which pick
// the next line as PoolOptions.Strict says. A line's tasks wait for a
// handler in the order they were taken, so a shard with a deep backlog
// cannot starve the others.
//
// One queue is a pool of one line:
//
//	p, _ := delay.NewPool(delay.PoolOptions{Concurrency: 8})
//	p.Add(q, handle, delay.QueueOptions{})
//	err := p.Run(ctx) // until ctx ends
//
// Several lines share the handlers:
//
//	p, _ := delay.NewPool(delay.PoolOptions{Concurrency: 16})
//	p.Add(orders, handleOrder, delay.QueueOptions{Weight: 6})
//	p.Add(mails, handleMail, delay.QueueOptions{Weight: 3, MaxConcurrent: 4})
//	p.Add(reviews, handleReview, delay.QueueOptions{Weight: 1})
//	err := p.Run(ctx) // until ctx ends
type Pool struct {
	o       PoolOptions
	mu      sync.Mutex
	lines   []*line
	running atomic.Bool
	started atomic.Int64 // Unix ms of the running Run's start
	// late holds the takers a Run returned without (a take or release
	// still in flight at ShutdownTimeout, on a frozen server): the next
	// Run waits for them, each bounded by its own 5 s.
	late sync.WaitGroup
}

// NewPool returns an empty pool; Add lines, then Run it.
func NewPool(opts PoolOptions) (*Pool, error) {
	o := opts
	if o.Concurrency < 0 || o.SweepBatch < 0 || o.SweepBatch > MaxBatch || o.SharedBatch > MaxBatch {
		return nil, invalid("options", "concurrency %d sweep %d shared batch %d", o.Concurrency, o.SweepBatch, o.SharedBatch)
	}
	if o.WakeClient != nil && nilClient(o.WakeClient) {
		return nil, invalid("options", "typed nil WakeClient")
	}
	if o.Concurrency == 0 {
		o.Concurrency = 8
	}
	if o.SweepBatch == 0 {
		o.SweepBatch = 100
	}
	switch {
	case o.SharedBatch == 0:
		o.SharedBatch = 32
	case o.SharedBatch < 0:
		o.SharedBatch = 0
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&o.ShutdownTimeout, 10 * time.Second}, {&o.WakeBlock, time.Second},
		{&o.IdleCheck, 5 * time.Second}, {&o.ReconnectMin, 50 * time.Millisecond},
		{&o.ReconnectMax, 2 * time.Second},
	} {
		if *d.v < 0 {
			return nil, invalid("options", "negative duration %v", *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	o.WakeBlock = max(o.WakeBlock, time.Second)
	switch {
	case o.Heartbeat == 0:
		o.Heartbeat = 5 * time.Second
	case o.Heartbeat > 0 && o.Heartbeat < MinHeartbeat:
		return nil, invalid("options", "heartbeat %v below %v", o.Heartbeat, MinHeartbeat)
	}
	if o.ID == "" {
		o.ID = newPoolID()
	} else if err := keyname.Check(o.ID); err != nil {
		return nil, invalid("options", "pool ID: %w", err)
	}
	return &Pool{o: o}, nil
}

// ID returns the pool's registry ID.
func (p *Pool) ID() string { return p.o.ID }

// Add adds a line served by h. Lines are added before Run: an Add while
// Run runs is refused (the running pool never serves a line added
// late); a line (or one of its shards) added twice is refused.
func (p *Pool) Add(l Line, h Handler, opts QueueOptions) error {
	if nilLine(l) || h == nil || len(l.lineQueues()) == 0 {
		return invalid("options", "nil line or handler")
	}
	o := opts
	if o.Weight < 0 || o.MaxConcurrent < 0 || o.BatchSize < 0 || o.BatchSize > MaxBatch {
		return invalid("options", "weight %d max concurrent %d batch %d", o.Weight, o.MaxConcurrent, o.BatchSize)
	}
	if o.Weight == 0 {
		o.Weight = 1
	}
	conc := p.o.Concurrency
	if o.MaxConcurrent > 0 {
		conc = min(conc, o.MaxConcurrent)
	}
	if o.BatchSize == 0 {
		o.BatchSize = min(conc, MaxBatch)
	}
	switch {
	case o.Prefetch < 0:
		o.Prefetch = 0
	case o.Prefetch == 0 && o.BatchSize > conc:
		o.Prefetch = o.BatchSize
	}
	o.Prefetch = min(o.Prefetch, MaxBatch)
	// A line left without a prefetch gets one sized to its weight at Run,
	// when every line's weight is known (plan).
	auto := opts.Prefetch == 0 && o.Prefetch == 0
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running.Load() {
		return invalid("options", "Add while the pool runs")
	}
	ln := &line{name: l.lineName(), h: h, o: o, conc: conc, autoPrefetch: auto}
	for _, q := range l.lineQueues() {
		for _, old := range p.lines {
			for _, tk := range old.takers {
				if tk.q.k.due == q.k.due {
					return invalid("options", "queue %s added twice", q.name)
				}
			}
		}
		ln.takers = append(ln.takers, &taker{q: q, l: ln, p: p})
	}
	ln.plan(o.Prefetch)
	ln.sharded = len(ln.takers) > 1 || ln.takers[0].q.name != ln.name
	p.lines = append(p.lines, ln)
	return nil
}

// line is one Add: a handler, its options, its queues' takers and the
// scheduler's state for it (guarded by sched.mu while running).
type line struct {
	name    string
	h       Handler
	o       QueueOptions
	takers  []*taker
	sharded bool

	conc int // the line's concurrency
	// autoPrefetch: Prefetch was left to its default and BatchSize asks
	// for none; in a Weighted pool of several lines plan gives it one.
	autoPrefetch bool

	buf     []item // taken tasks waiting for a handler, FIFO
	head    int
	running int // handlers running this line's tasks
	// holding are the tasks those handlers run, each with its taker (for
	// its queue's name), listed by the heartbeat (WorkerInfo docs).
	holding  map[*Task]*taker
	cur      int // smooth weighted round robin's current weight
	maybe    int // takers whose next take may bring due tasks (Strict)
	fetching int // takers whose take in flight follows a full one (Weighted)

	handled, errs atomic.Int64
	up            atomic.Int32 // takers past their start-up Check
	// fullPicks counts the line's picks made while every line had a task
	// waiting and a free cap: the picks Weighted's shares are about.
	fullPicks atomic.Int64
}

type item struct {
	t  *Task
	tk *taker
}

func (l *line) waiting() int { return len(l.buf) - l.head }

func (l *line) eligible() bool {
	return l.waiting() > 0 && (l.o.MaxConcurrent == 0 || l.running < l.o.MaxConcurrent)
}

// backlogged: below its cap, with a task waiting or one on its way
// (Weighted's round; see sched.pick).
func (l *line) backlogged() bool {
	return (l.waiting() > 0 || l.fetching > 0) && (l.o.MaxConcurrent == 0 || l.running < l.o.MaxConcurrent)
}

// plan sets each taker's take limit and refill for a prefetch of
// prefetch tasks.
func (l *line) plan(prefetch int) {
	for _, tk := range l.takers {
		tk.limit = l.conc + prefetch
		tk.refill = 1
		if prefetch > 0 {
			tk.refill = max(1, min(l.o.BatchSize, tk.limit)/2)
		}
	}
}

// planPrefetch sizes the default prefetch of a Weighted pool's lines: a
// line's share of the handlers (Concurrency·w/Σw, rounded up, split over
// its takers), so a backlogged line has tasks ready when its turn comes
// instead of taking one task per freed handler.
func planPrefetch(lines []*line, conc int, weighted bool) {
	sum := 0
	for _, l := range lines {
		sum += l.o.Weight
	}
	for _, l := range lines {
		if !l.autoPrefetch {
			continue
		}
		if !weighted || len(lines) < 2 {
			l.plan(0)
			continue
		}
		share := min((conc*l.o.Weight+sum-1)/sum, l.conc)
		l.plan(min(max(1, (share+len(l.takers)-1)/len(l.takers)), MaxBatch))
	}
}

// errFatal carries a configuration error a taker met: no retry fixes it.
type errFatal struct{ err error }

func (e errFatal) Error() string { return e.err.Error() }

// Run serves every line until ctx ends: it starts each queue's taker and
// the shared handlers, then, once ctx ends, stops taking, releases the
// taken tasks no handler started (a take whose reply the end of ctx cut
// off included: it is sent again, as the same call, to learn them), waits
// up to ShutdownTimeout from ctx's end for running handlers and returns
// ctx.Err() (joined with ErrShutdownTimeout if handlers were still
// running then). Redis errors never stop it: at
// start-up (the Check every queue runs before its first take), in a take,
// an ack or a wake-up, each queue backs off (ReconnectMin..ReconnectMax),
// reports the error to its Observer.OnError and counts it in Stats, and
// tries again, independently of the other queues. It returns early only
// on a configuration error no retry can fix, named with the queue (and
// ending every line): a server that may evict its keys (ErrEvictionPolicy),
// or Redis refusing, before that queue's first take or wake-up of this
// Run, the login (NOAUTH, WRONGPASS; of the queue's client or WakeClient)
// or a command (NOPERM: the take script, a command it calls, the wake-up's
// BLPOP; Redis 7.0 refuses a command a script calls with an ERR "The user
// executing the script can't ..." instead), the Redis error wrapped; or
// another live pool holding PoolOptions.ID (ErrDuplicateID). A
// refusal later in the Run (a password changed or an ACL tightened
// meanwhile) is retried and logged like any Redis error, so the queue
// resumes once access is restored. It also returns early when the pool has
// no line or is already running. Every error is also logged
// (Options.Logger); an error caused by ctx's deadline is the shutdown,
// not reported.
func (p *Pool) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return invalid("options", "pool already running")
	}
	defer p.running.Store(false)
	p.mu.Lock()
	lines := append([]*line(nil), p.lines...)
	p.mu.Unlock()
	if len(lines) == 0 {
		return invalid("options", "pool has no line")
	}
	p.late.Wait()
	p.started.Store(time.Now().UnixMilli())
	// Takers stop on tctx, which also ends on a fatal configuration error.
	tctx, tcancel := context.WithCancelCause(ctx)
	defer tcancel(nil)
	// Handlers and completions outlive ctx by up to ShutdownTimeout.
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()

	s := newSched(lines, p.o.Strict)
	planPrefetch(lines, p.o.Concurrency, s.weighted)
	// wakes are the wake-list BLPOPs, which a cancel does not interrupt:
	// Run waits for them only within ShutdownTimeout.
	var takers, acks, wakes sync.WaitGroup
	for _, l := range lines {
		l.up.Store(0)
		l.fetching = 0
		for _, tk := range l.takers {
			tk.reset(s)
			if s.strict {
				tk.maybe, l.maybe = true, l.maybe+1 // unknown until the first take
			}
			acks.Add(1)
			go func() { defer acks.Done(); tk.ackLoop(hctx) }()
			takers.Add(1)
			go func() { defer takers.Done(); tk.run(tctx, tcancel, &wakes) }()
		}
	}
	var handlers sync.WaitGroup
	for range p.o.Concurrency {
		handlers.Add(1)
		go func() { defer handlers.Done(); p.serve(hctx, s) }()
	}
	var beat sync.WaitGroup
	var reg *registration
	if p.o.Heartbeat > 0 {
		reg = p.register(lines, s)
		beat.Add(1)
		go func() { defer beat.Done(); reg.heartbeat(tctx, func(err error) { tcancel(errFatal{err}) }) }()
	}

	<-tctx.Done()
	// ShutdownTimeout counts from here, whatever the takes in flight and
	// the wake BLPOPs then take to end.
	graceEnd := time.Now().Add(p.o.ShutdownTimeout)
	s.stop()
	// A taker stuck in a take or a release (a frozen server) is waited
	// for only within ShutdownTimeout: it releases what it still holds
	// on its own when that call ends (see taker.run).
	if !waitUntil(&takers, graceEnd) {
		p.late.Add(1)
		go func() { defer p.late.Done(); takers.Wait() }()
	}
	// Taken tasks no handler started go straight back to due.
	for tk, ts := range s.drain() {
		for range ts {
			tk.done()
		}
		tk.releaseAll(hctx, ts)
	}
	err := ctx.Err()
	var fatal errFatal
	if cause := context.Cause(tctx); errors.As(cause, &fatal) {
		err = fatal.err
	}
	// Past graceEnd (a take that ended late), handlers with no task are
	// only on their way out: the timeout is a handler still in a task.
	if !waitUntil(&handlers, graceEnd) && s.busy() {
		err = errors.Join(err, ErrShutdownTimeout)
		hcancel()
	}
	// A wake BLPOP still blocked now ends on its own within WakeBlock; it
	// only signals a taker that has stopped.
	waitUntil(&wakes, graceEnd)
	// From here a handler that returns completes its task directly.
	for _, l := range lines {
		for _, tk := range l.takers {
			tk.closeAcks()
		}
	}
	acks.Wait()
	beat.Wait()
	if reg != nil {
		reg.unregister(hctx)
	}
	return err
}

// waitUntil waits for wg until end and reports whether it got there.
func waitUntil(wg *sync.WaitGroup, end time.Time) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(time.Until(end))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// serve is one handler goroutine: it runs the tasks the scheduler picks,
// and releases those whose lease is too close to its end to start.
func (p *Pool) serve(hctx context.Context, s *sched) {
	for {
		it, l, ok := s.next()
		if !ok {
			return
		}
		tk := it.tk
		q := tk.q
		margin := q.o.Lease / 2
		late := func(t *Task) bool { return t.Deadline.Sub(q.ServerNow()) < margin }
		if late(it.t) {
			ts := append([]*Task{it.t}, s.popLate(l, tk, MaxBatch, late)...)
			s.finish(l, it.t)
			tk.releaseAll(hctx, ts)
			for range ts {
				tk.done()
			}
			continue
		}
		tk.handle(hctx, it.t)
		l.handled.Add(1)
		s.finish(l, it.t)
		tk.done()
	}
}

// LineStats describes one line of a running (or stopped) pool.
type LineStats struct {
	Name          string
	Weight        int
	MaxConcurrent int
	Queues        []string // the line's queue names (shards of a Sharded)
	// Up is the number of the line's queues whose taker passed its
	// start-up Check; below len(Queues), Errors says why.
	Up int
	// Handled counts handler calls since NewPool; Errors the Redis errors
	// of the line's takers, acks and wake-ups (each also sent to
	// Observer.OnError).
	Handled, Errors int64
}

// Stats returns each line's figures, in Add order.
func (p *Pool) Stats() []LineStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]LineStats, len(p.lines))
	for i, l := range p.lines {
		st := LineStats{Name: l.name, Weight: l.o.Weight, MaxConcurrent: l.o.MaxConcurrent,
			Up: int(l.up.Load()), Handled: l.handled.Load(), Errors: l.errs.Load()}
		for _, tk := range l.takers {
			st.Queues = append(st.Queues, tk.q.name)
		}
		out[i] = st
	}
	return out
}
