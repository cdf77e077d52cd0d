package delay

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
)

// Pause stops every worker of every process from taking tasks of the
// queue: the pause is stored in Redis (the queue's ctl hash) and the take
// script checks it, so no take that runs after Pause returns hands out a
// task (Stats.Paused). Tasks already running finish and are acked; tasks
// a worker took but no handler started (its prefetch) go back to due,
// their attempt not counted, within 25 ms plus a round trip (the worker
// asks while it holds any, and once after a take whose reply came 75 ms
// or more after it was sent, as over a slow link), so no handler starts
// a task later than 100 ms after Pause returns (on a link of a round
// trip under 75 ms); expired leases still return to due, where they
// wait; Enqueue, Cancel, Reschedule and the dead-letter calls keep
// working. Pausing a paused queue keeps its first start
// (Stats.PausedSince).
func (q *Queue) Pause(ctx context.Context) error {
	_, err := q.setPaused(ctx, "1")
	return err
}

// Resume lets the queue's workers take again, and pushes the queue's wake
// list so that a worker waiting on it takes at once. Resuming a running
// queue changes nothing.
func (q *Queue) Resume(ctx context.Context) error {
	_, err := q.setPaused(ctx, "0")
	return err
}

// setPaused runs pause.lua (mode "1" pause, "0" resume) and reports
// whether this call changed the state: a re-sent call gets its first
// run's answer (kept reply).
func (q *Queue) setPaused(ctx context.Context, mode string) (changed bool, err error) {
	op := "pause"
	if mode == "0" {
		op = "resume"
	}
	sent := q.o.Now()
	r, err := q.mutate(ctx, scriptPause, op, q.req.next(), []string{q.k.ctl, q.k.wake}, mode)
	if err != nil {
		return false, err
	}
	if err := codeErr(r.int(0)); err != nil {
		return false, fmt.Errorf("delay: %s: %w", op, err)
	}
	q.observeTime(r.int(1), sent, q.o.Now())
	return r.int(3) == 1, nil
}

// Rate is a queue's rate limit: a token bucket kept in Redis and judged
// by Redis TIME in the take script, so it holds across every worker of
// every process. Tokens accrue at PerSecond up to Burst held; each task
// handed out takes one. Over any window W the queue hands out at most
// PerSecond × W + Burst tasks. The limit never makes a task early: it
// only holds due tasks back.
type Rate struct {
	// PerSecond is the tasks a second; 0 turns the limit off. Otherwise
	// 1/86400 (one task a day)..1e6; anything else (negative, NaN,
	// ±Inf, a rate under the minimum) is refused.
	PerSecond float64
	// Burst is the most tasks handed out at once after an idle spell, and
	// the largest take the limit allows. Defaults to a tenth of a
	// second's tasks (PerSecond/10, rounded up), at least 1 and at most
	// MaxBatch. An explicit Burst above MaxBatch, or below 0, is refused.
	Burst int
}

const (
	// maxRatePerSecond is the highest Rate.PerSecond.
	maxRatePerSecond = 1e6
	// minRatePerSecond is the lowest Rate.PerSecond other than 0 (off):
	// one task a day. It bounds the wait for the next token (a day), so
	// the next-token time a take replies with stays a plain integer of
	// milliseconds; a rate under it would be a wait of ages, not a limit.
	minRatePerSecond = 1.0 / 86400
)

// maxTokenWait is the longest wait for a token a take reports
// (1/minRatePerSecond; take.lua's MAX_TOKEN_WAIT_MS). The take script
// clamps to it, whatever rate a ctl hash holds, and Go reads a gate time
// outside [now, now+maxTokenWait] as now+maxTokenWait: an absurd reply
// waits the longest, never not at all.
const maxTokenWait = 24 * time.Hour

// tokenTime is the next token's time (Unix ms) as a take at Redis TIME
// nowMs replied it, clamped to [nowMs, nowMs+maxTokenWait]: a reply
// outside it (a script of a version that overflowed, a corrupt ctl hash)
// means a wait the script could not state, so the taker waits the longest
// (its IdleCheck bounds the sleep) instead of asking again at once.
func tokenTime(nowMs, ms int64) int64 {
	if ms < nowMs || ms-nowMs > maxTokenWait.Milliseconds() {
		return nowMs + maxTokenWait.Milliseconds()
	}
	return ms
}

func (r Rate) withDefaults() (Rate, error) {
	// a rate of 0 turns the limit off: its Burst is not used, but a
	// negative or oversized one is still a mistake worth telling
	if r.Burst < 0 || r.Burst > MaxBatch {
		return r, invalid("options", "Rate.Burst %d (allowed 0 for the default, 1..MaxBatch %d)", r.Burst, MaxBatch)
	}
	if r.PerSecond == 0 {
		return Rate{}, nil
	}
	if !(r.PerSecond >= minRatePerSecond && r.PerSecond <= maxRatePerSecond) { // NaN too
		return r, invalid("options", "Rate.PerSecond %v (allowed 0 for no limit, or minRatePerSecond %g..maxRatePerSecond %g)",
			r.PerSecond, minRatePerSecond, float64(maxRatePerSecond))
	}
	if r.Burst == 0 {
		r.Burst = min(MaxBatch, max(1, int(math.Ceil(r.PerSecond/10))))
	}
	return r, nil
}

// SetRate sets the queue's rate limit for every worker of every process
// (Rate{} turns it off). A new limit keeps the tokens the old one had
// earned, capped at the new Burst; a first limit starts with Burst tokens.
// Stats.Rate reads it back. Workers waiting for a token under the old
// limit: one takes again at once (SetRate pushes the wake list, which
// wakes one), the others at the token they were waiting for or after
// their IdleCheck (5 s by default), whichever comes first.
func (q *Queue) SetRate(ctx context.Context, r Rate) error {
	r, err := r.withDefaults()
	if err != nil {
		return err
	}
	// 'f', not 'g': gopher-lua's tonumber (miniredis) reads no exponent
	_, err = q.mutate(ctx, scriptRate, "rate", q.req.next(), []string{q.k.ctl, q.k.wake},
		strconv.FormatFloat(r.PerSecond, 'f', -1, 64), r.Burst)
	return err
}

// highWaterWindowMs is the window of the per-ms high-water mark (lib.lua's
// HIGH_WATER_WINDOW_MS): Stats.HighWater covers the current window and the
// one before, so a burst stays visible for one to two minutes, longer than
// a usual scrape interval.
const highWaterWindowMs = 60_000

// highWater follows, in one process, the largest seq+1 its enqueues were
// given in a millisecond per window of Redis TIME, for
// Observer.OnHighWater and the one warning per window past
// Options.HighWaterWarn.
type highWater struct {
	mu     sync.Mutex
	win    int64 // window of max (Redis TIME / highWaterWindowMs)
	max    int64
	warned bool // a warning went out in window win
}

// noteSeq records that a new task got seq in a millisecond at Redis TIME
// nowMs (one batch's largest seq is enough).
func (q *Queue) noteSeq(nowMs, seq int64) {
	h := &q.hw
	n := seq + 1
	win := nowMs / highWaterWindowMs
	h.mu.Lock()
	if win > h.win {
		h.win, h.max, h.warned = win, 0, false
	} else if win < h.win || n <= h.max {
		h.mu.Unlock()
		return
	}
	h.max = n
	warn := !h.warned && float64(n) >= q.o.HighWaterWarn*float64(q.mult)
	if warn {
		h.warned = true
	}
	h.mu.Unlock()
	q.o.obs.OnHighWater(q.name, int(n), int(q.mult))
	if warn {
		q.o.obs.OnWarning(q.name, fmt.Errorf("%w: %d of the %d seqs of one millisecond in use (Options.HighWaterWarn %g)",
			ErrHighWater, n, q.mult, q.o.HighWaterWarn))
	}
}
