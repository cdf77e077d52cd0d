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
// the number suppressed since, so a Redis that is down for an hour costs
// a few hundred lines, not one per retry.
const logEvery = 10 * time.Second

// logObserver logs the events that mean something is wrong (errors, losses,
// warnings) through slog, then passes every event on to the caller's
// Observer. It sits in front of every queue's Observer, so a worker that
// cannot reach or log in to Redis is never silent.
type logObserver struct {
	Observer
	log *slog.Logger

	mu   sync.Mutex
	last map[string]*logKind // by queue, level and op
}

type logKind struct {
	at         time.Time
	suppressed int
}

func newLogObserver(next Observer, log *slog.Logger) *logObserver {
	return &logObserver{Observer: next, log: log, last: map[string]*logKind{}}
}

// allow reports whether an event of kind k may be logged now, and how many
// were suppressed before it.
func (o *logObserver) allow(k string, now time.Time) (bool, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.last[k]
	if e == nil {
		o.last[k] = &logKind{at: now}
		return true, 0
	}
	if now.Sub(e.at) < logEvery {
		e.suppressed++
		return false, 0
	}
	n := e.suppressed
	e.at, e.suppressed = now, 0
	return true, n
}

func (o *logObserver) emit(level slog.Level, kind, msg string, attrs ...slog.Attr) {
	// Observer events carry no context; slog only passes it to the
	// handler, so nothing here can be cancelled or outlive a caller.
	ctx := context.TODO()
	// The level check first: a discarding logger costs no lock.
	if !o.log.Enabled(ctx, level) {
		return
	}
	ok, n := o.allow(kind, time.Now())
	if !ok {
		return
	}
	if n > 0 {
		attrs = append(attrs, slog.Int("suppressed", n))
	}
	o.log.LogAttrs(ctx, level, msg, attrs...)
}

func (o *logObserver) OnError(queue, op string, err error) {
	o.emit(slog.LevelError, "error\x00"+queue+"\x00"+op, "delay: "+op+" failed",
		slog.String("queue", queue), slog.String("op", op), slog.Any("err", err))
	o.Observer.OnError(queue, op, err)
}

func (o *logObserver) OnLoss(queue string, err error, n int) {
	o.emit(slog.LevelError, "loss\x00"+queue, "delay: Redis lost queue state",
		slog.String("queue", queue), slog.Int("tasks", n), slog.Any("err", err))
	o.Observer.OnLoss(queue, err, n)
}

func (o *logObserver) OnWarning(queue string, err error) {
	o.emit(slog.LevelWarn, "warning\x00"+queue+"\x00"+warnKind(err), "delay: warning",
		slog.String("queue", queue), slog.Any("err", err))
	o.Observer.OnWarning(queue, err)
}

// warnKind groups warnings by their sentinel, so a high-water warning does
// not hide an eviction-policy one.
func warnKind(err error) string {
	for _, s := range []error{ErrEvictionPolicy, ErrConfigUnavailable, ErrHighWater} {
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
