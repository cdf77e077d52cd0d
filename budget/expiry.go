package budget

import (
	"context"
	"fmt"
	"time"

	"github.com/tierset/tierset/delay"
)

// Expiry is what Expire found.
type Expiry struct {
	State State
	// Expires is the hold's end, by Redis TIME.
	Expires time.Time
	// First is true for an expired order the first time its report is
	// taken (by Expire or Release): later calls, and repeated tasks, see
	// false.
	First bool
}

// Expire is what the handler of an expiry task calls, with the task's
// key: it gives back every hold whose time has passed and answers the
// order's state. Expired means the hold ended unconfirmed (the order was
// not paid in time); Held (the task ran early, which delay never does
// by Redis TIME), Confirmed or Released mean there is nothing to report.
func (b *Budget) Expire(ctx context.Context, order string) (Expiry, error) {
	if err := b.checkOrder(order); err != nil {
		return Expiry{}, err
	}
	rp, err := b.run(ctx, b.s.expire, true,
		[]string{b.k.base, b.k.epoch, b.k.holds, b.k.unrep, b.k.record(order)},
		order, b.o.RecordTTL.Milliseconds(), b.reportFlag(), callToken())
	if rp == nil {
		return Expiry{}, err
	}
	switch rp.status() {
	case "ok":
		e := Expiry{State: states[rp.str(2)], Expires: ms(rp.int(3)), First: rp.int(4) == 1}
		b.expired(e)
		return e, err
	case "notfound":
		return Expiry{}, fmt.Errorf("%w: order %q", ErrNotFound, order)
	case "lost":
		return Expiry{}, ErrLost
	}
	return Expiry{}, rp.unexpected("expire")
}

// Swept is what Sweep did.
type Swept struct {
	// Held is the number of holds live after the sweep.
	Held int64
	// Requeued is the number of expiry tasks enqueued again: holds that
	// ended over Options.ReportGrace ago whose report was not taken.
	Requeued int
}

// sweepBatch is the most orders one Sweep script lists.
const sweepBatch = 100

// Sweep gives back every hold whose time has passed (each script does it
// too, before it counts) and, with Options.Expiry, enqueues again the
// expiry task of every hold that ended over ReportGrace ago and whose
// report no Expire or Release took: an enqueue lost with its process, or
// a Queue that was down. A task still pending is not doubled (same key
// and token). Run it every minute or so.
func (b *Budget) Sweep(ctx context.Context) (Swept, error) {
	var sw Swept
	rp, err := b.run(ctx, b.s.sweep, true,
		[]string{b.k.base, b.k.epoch, b.k.holds, b.k.unrep},
		b.o.RecordTTL.Milliseconds(), b.reportFlag(), b.o.ReportGrace.Milliseconds(), sweepBatch)
	if rp == nil {
		return sw, err
	}
	switch rp.status() {
	case "lost":
		return sw, ErrLost
	case "ok":
	default:
		return sw, rp.unexpected("sweep")
	}
	sw.Held = rp.int(2)
	late := reply(rp.list(3))
	if b.o.Expiry == nil || len(late) == 0 {
		return sw, err
	}
	jobs := make([]delay.Job, 0, len(late)/2)
	for i := 0; i+1 < len(late); i += 2 {
		exp := late.int(i + 1)
		jobs = append(jobs, delay.Job{Key: late.str(i), Token: b.expiryToken(exp), When: delay.At(ms(exp))})
	}
	for _, j := range jobs {
		if _, err := b.o.Expiry.Enqueue(ctx, j); err != nil {
			return sw, fmt.Errorf("budget: sweep: enqueue expiry of %q: %w", j.Key, err)
		}
		sw.Requeued++
	}
	// The listed orders stay in unrep until their task runs Expire, so a
	// second page would list them again: one page (sweepBatch) per Sweep.
	return sw, err
}
