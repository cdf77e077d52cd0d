package delay

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// logEvery is how often one kind of problem of one queue is logged: the
// first occurrence at once, then at most one line per interval carrying
// the number suppressed since (the last suppressed event, logged when the
// interval ends), so a Redis that is down for an hour costs a few hundred
// lines, not one per retry.
const logEvery = 10 * time.Second

// logObserver logs the events that mean something is wrong (errors, losses,
// warnings) through slog, then passes every event on to the caller's
// Observer. It sits in front of every queue's Observer, so a worker that
// cannot reach or log in to Redis is never silent.
type logObserver struct {
	next  Observer
	log   *slog.Logger
	every time.Duration // logEvery; tests shorten it

	mu   sync.Mutex
	last map[string]*logKind // by queue, level and op
}

type logKind struct {
	at         time.Time
	suppressed int
	// tasks sums the task counts of the suppressed losses.
	tasks int
	// held is the last suppressed event, logged when the interval ends
	// (by flush) unless another event of the kind is logged first.
	held  *heldEvent
	armed bool // a flush is scheduled
}

type heldEvent struct {
	level slog.Level
	msg   string
	attrs []slog.Attr
	tasks int
}

func newLogObserver(next Observer, log *slog.Logger) *logObserver {
	return &logObserver{next: next, log: log, every: logEvery, last: map[string]*logKind{}}
}

// allow reports whether an event of kind k may be logged now, and how many
// were suppressed before it.
func (o *logObserver) allow(k string, now time.Time) (bool, int) {
	ok, n, _ := o.allowHold(k, now, nil)
	return ok, n
}

// allowHold is allow that, when the event is suppressed, keeps it (ev) to
// be logged once the interval ends, so what a burst suppressed is logged
// even if nothing of its kind follows. The int results are the events and
// the tasks (of losses) suppressed before this one.
func (o *logObserver) allowHold(k string, now time.Time, ev *heldEvent) (bool, int, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.last[k]
	if e == nil {
		o.last[k] = &logKind{at: now}
		return true, 0, 0
	}
	if now.Sub(e.at) < o.every {
		e.suppressed++
		if e.held != nil {
			e.tasks += e.held.tasks
		}
		e.held = ev
		if ev != nil && !e.armed {
			e.armed = true
			time.AfterFunc(e.at.Add(o.every).Sub(now), func() { o.flush(k) })
		}
		return false, 0, 0
	}
	n, tasks := e.suppressed, e.tasks
	if e.held != nil {
		tasks += e.held.tasks
	}
	e.at, e.suppressed, e.tasks, e.held = now, 0, 0, nil
	return true, n, tasks
}

// flush logs the event an interval held back, with the count (and lost
// tasks) suppressed before it, and starts a new interval.
func (o *logObserver) flush(k string) {
	o.mu.Lock()
	e := o.last[k]
	e.armed = false
	ev := e.held
	if ev == nil {
		// Logged meanwhile by the next event of the kind.
		o.mu.Unlock()
		return
	}
	n, tasks := e.suppressed-1, e.tasks
	e.at, e.suppressed, e.tasks, e.held = time.Now(), 0, 0, nil
	o.mu.Unlock()
	o.write(ev.level, ev.msg, n, tasks, ev.attrs)
}

func (o *logObserver) write(level slog.Level, msg string, n, tasks int, attrs []slog.Attr) {
	if n > 0 {
		attrs = append(attrs, slog.Int("suppressed", n))
	}
	if tasks > 0 {
		attrs = append(attrs, slog.Int("suppressed_tasks", tasks))
	}
	// Observer events carry no context; slog only passes it to the
	// handler, so nothing here can be cancelled or outlive a caller.
	o.log.LogAttrs(context.TODO(), level, msg, attrs...)
}

// emit logs an event of kind k unless one was logged within the interval;
// tasks is a loss's task count (0 for other events).
func (o *logObserver) emit(level slog.Level, kind, msg string, tasks int, attrs ...slog.Attr) {
	// The level check first: a discarding logger costs no lock.
	if !o.log.Enabled(context.TODO(), level) {
		return
	}
	ok, n, st := o.allowHold(kind, time.Now(), &heldEvent{level: level, msg: msg, attrs: attrs, tasks: tasks})
	if ok {
		o.write(level, msg, n, st, attrs)
	}
}

func (o *logObserver) OnError(queue, op string, err error) {
	o.emit(slog.LevelError, "error\x00"+queue+"\x00"+op, "delay: "+op+" failed", 0,
		slog.String("queue", queue), slog.String("op", op), slog.Any("err", err))
	if o.next.OnError != nil {
		o.next.OnError(queue, op, err)
	}
}

func (o *logObserver) OnLoss(queue string, err error, n int) {
	o.emit(slog.LevelError, "loss\x00"+queue+"\x00"+lossKind(err), "delay: Redis lost queue state", n,
		slog.String("queue", queue), slog.Int("tasks", n), slog.Any("err", err))
	if o.next.OnLoss != nil {
		o.next.OnLoss(queue, err, n)
	}
}

func (o *logObserver) OnWarning(queue string, err error) {
	o.emit(slog.LevelWarn, "warning\x00"+queue+"\x00"+warnKind(err), "delay: warning", 0,
		slog.String("queue", queue), slog.Any("err", err))
	if o.next.OnWarning != nil {
		o.next.OnWarning(queue, err)
	}
}

// The other events only reach the caller's Observer.

func (o *logObserver) OnEnqueue(queue string, duplicate bool) {
	if o.next.OnEnqueue != nil {
		o.next.OnEnqueue(queue, duplicate)
	}
}

func (o *logObserver) OnDelivered(queue string, lateness time.Duration) {
	if o.next.OnDelivered != nil {
		o.next.OnDelivered(queue, lateness)
	}
}

func (o *logObserver) OnAck(queue string) {
	if o.next.OnAck != nil {
		o.next.OnAck(queue)
	}
}

func (o *logObserver) OnRetry(queue string, attempt int, delay time.Duration) {
	if o.next.OnRetry != nil {
		o.next.OnRetry(queue, attempt, delay)
	}
}

func (o *logObserver) OnDead(queue string, attempt int) {
	if o.next.OnDead != nil {
		o.next.OnDead(queue, attempt)
	}
}

func (o *logObserver) OnSweep(queue string, returned, dead int) {
	if o.next.OnSweep != nil {
		o.next.OnSweep(queue, returned, dead)
	}
}

func (o *logObserver) OnHandled(queue string, took time.Duration, res HandleResult) {
	if o.next.OnHandled != nil {
		o.next.OnHandled(queue, took, res)
	}
}

func (o *logObserver) OnHighWater(queue string, perMs, space int) {
	if o.next.OnHighWater != nil {
		o.next.OnHighWater(queue, perMs, space)
	}
}

// lossKind groups losses by their sentinel, so a repaired index does not
// hide records lost.
func lossKind(err error) string {
	return sentinelOf(err, ErrCounterLost, ErrIndexLost, ErrRecordLost, ErrDueLost)
}

// warnKind groups warnings by their sentinel, so a high-water warning does
// not hide an eviction-policy one.
func warnKind(err error) string {
	return sentinelOf(err, ErrEvictionPolicy, ErrConfigUnavailable, ErrHighWater)
}

// sentinelOf names the first of sentinels that err wraps, or "other".
func sentinelOf(err error, sentinels ...error) string {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "other"
}

// refusedLogin reports whether Redis refused the client's credentials
// (NOAUTH: none given where one is required; WRONGPASS: wrong user or
// password). Retrying cannot fix either.
func refusedLogin(err error) bool {
	return redis.HasErrorPrefix(err, "NOAUTH") || redis.HasErrorPrefix(err, "WRONGPASS")
}

// refused reports whether Redis refused the client or the command for
// good: refusedLogin, or NOPERM (the ACL user may not run it). Redis 7.0
// refuses a command called by a script with an ERR instead ("The user
// executing the script can't run this command or subcommand", or "can't
// access at least one of the keys"), later versions with NOPERM.
func refused(err error) bool {
	return refusedLogin(err) || redis.HasErrorPrefix(err, "NOPERM") ||
		redis.HasErrorPrefix(err, "The user executing the script can't ")
}

// ended reports whether ctx has ended, or its deadline has passed: a
// call whose socket deadline was ctx's fails with a timeout as that
// deadline passes, possibly before ctx.Err() says so. Such an error is
// the caller's shutdown, not Redis's.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
