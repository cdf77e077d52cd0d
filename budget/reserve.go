package budget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/tierset/tierset/delay"
)

// State is where a reservation is.
type State string

// Reservation states.
const (
	Held      State = "held"      // counts against its caps until Expires
	Confirmed State = "confirmed" // a redemption: counts for good
	Released  State = "released"  // given back by Release
	Expired   State = "expired"   // its hold ended unconfirmed: given back
)

var states = map[string]State{"h": Held, "c": Confirmed, "r": Released, "x": Expired}

// Reservation is the outcome of Reserve.
type Reservation struct {
	Order string
	// State is Held, or Confirmed when the order was already confirmed.
	State State
	// Expires is when the hold ends, by Redis TIME.
	Expires time.Time
	// Epoch is the budget's epoch (see Rebuild).
	Epoch string
	// New is false when the call answered a reservation an earlier call
	// made (the same order with the same arguments: the caller's retry
	// after an error). The script go-redis sends again after a cut reply
	// is the same call: it answers New, and the Observer counts its grant.
	New bool
}

// Reserve checks every cap of every promotion of r and, if all allow it,
// counts r against them, all in one script: all or none. The hold counts
// until r.Hold passes (Redis TIME) unless Confirm makes it a redemption or
// Release gives it back. The same order with the same attributes and
// lines answers the same reservation (New false); with others,
// ErrConflict. A cap that would be passed returns a *LimitError
// (ErrLimit) and reserves nothing. With Options.Expiry, a new hold's
// expiry task is enqueued after the script (an enqueue that fails is
// logged; Sweep enqueues it again).
func (b *Budget) Reserve(ctx context.Context, r Request) (Reservation, error) {
	if err := b.checkOrder(r.Order); err != nil {
		return Reservation{}, err
	}
	if r.Hold < time.Millisecond || r.Hold > b.o.MaxHold {
		return Reservation{}, invalid("hold", "%v (allowed 1ms..%v)", r.Hold, b.o.MaxHold)
	}
	bd, ps, err := b.check(r.Attributes, r.Lines)
	if err != nil {
		return Reservation{}, err
	}
	for i, l := range bd.L {
		if m := ps[i].MaxPerCart; m > 0 && l.Uses > m {
			return Reservation{}, b.refused(&LimitError{Promotion: l.Promotion, Cap: Cap{Measure: Uses, Limit: m}, PerCart: true, Asked: l.Uses})
		}
	}
	rp, refs, err := b.reserve(ctx, r.Order, bd, ps, r.Hold, "r", callToken(), true)
	if err != nil && rp == nil {
		return Reservation{}, err
	}
	res, rerr := b.settle(ctx, r.Order, bd, rp, refs)
	if rerr != nil {
		return res, rerr
	}
	return res, err
}

// settle turns a reserve reply into the Reservation or the error, and
// files what a new hold owes: its expiry task and the Observer's grants.
func (b *Budget) settle(ctx context.Context, order string, bd body, rp reply, refs []capRef) (Reservation, error) {
	switch rp.status() {
	case "ok":
		res := Reservation{Order: order, State: states[rp.str(3)], Expires: ms(rp.int(4)), Epoch: rp.str(2), New: rp.int(5) == 1}
		if res.New {
			b.enqueueExpiry(ctx, order, rp.int(4))
			b.granted(bd.L)
		}
		return res, nil
	case "limit":
		return Reservation{}, b.refused(b.limitErr(rp, refs))
	case "conflict":
		return Reservation{}, fmt.Errorf("%w: order %q is %s", ErrConflict, order, states[rp.str(2)])
	case "lost":
		return Reservation{}, ErrLost
	case "damaged":
		return Reservation{}, fmt.Errorf("budget: order %q: its record key holds another type, written by something else: %s", order, rp.str(2))
	}
	return Reservation{}, rp.unexpected("reserve")
}

// reserve runs reserve.lua on one request in mode, once more with Redis
// TIME if this process's estimate of it was off by more than a period;
// batched, in the Budget's next batch (batch.go), else alone.
func (b *Budget) reserve(ctx context.Context, order string, bd body, ps []Promotion, hold time.Duration, mode, token string, batched bool) (reply, []capRef, error) {
	now := b.serverNow()
	for try := 0; ; try++ {
		p := b.newPending(order, bd, ps, hold, mode, token, now)
		var rp reply
		var err error
		if batched {
			rp, err = b.submit(ctx, p)
		} else {
			var rps []reply
			rps, err = b.runBatch(ctx, []*pending{p})
			rp = rps[0]
		}
		if rp == nil || rp.status() != "skew" {
			return rp, p.refs, err
		}
		if try > 0 {
			return nil, nil, errSkew
		}
		now = ms(rp.int(1))
	}
}

// callToken names one Reserve call: go-redis may send its script again
// after a cut reply, and the record it made answers that token as new.
func callToken() string {
	var t [8]byte
	_, _ = rand.Read(t[:])
	return hex.EncodeToString(t[:])
}

func (b *Budget) limitErr(rp reply, refs []capRef) error {
	i := int(rp.int(2)) - 1
	if i < 0 || i >= len(refs) {
		return rp.unexpected("reserve")
	}
	return &LimitError{Promotion: refs[i].promo, Cap: refs[i].cap, Used: rp.int(3), Asked: refs[i].asked}
}

// keepMs is how long a period key lives past its period's end: past the
// longest hold that can count in it, so a Release after the period ends
// still finds its counter.
func (b *Budget) keepMs() int64 { return (b.o.MaxHold + time.Hour).Milliseconds() }

func (b *Budget) reportFlag() string {
	if b.o.Expiry != nil {
		return "1"
	}
	return "0"
}

func (b *Budget) expiryToken(expMs int64) string {
	return b.o.ExpiryToken + ":" + strconv.FormatInt(expMs, 10)
}

// enqueueExpiry files the expiry task of a hold ending at expMs.
func (b *Budget) enqueueExpiry(ctx context.Context, order string, expMs int64) {
	if b.o.Expiry == nil {
		return
	}
	_, err := b.o.Expiry.Enqueue(ctx, delay.Job{Key: order, Token: b.expiryToken(expMs), When: delay.At(ms(expMs))})
	if err != nil {
		b.o.Logger.ErrorContext(ctx, "budget: expiry task not enqueued; Sweep will", "budget", b.name, "order", order, "err", err)
	}
}

// Confirmation is a confirmed reservation: what a ledger records.
type Confirmation struct {
	Order      string
	Attributes map[string]string
	Lines      []Line
	// At is when it was confirmed, by Redis TIME.
	At    time.Time
	Epoch string
	// New is false when the order was already confirmed.
	New bool
}

// Confirm makes the order's hold a redemption: it counts for good.
// Confirming again answers the same (New false). A hold that expired is
// confirmed only if every cap still allows it, counted anew by Redis TIME
// now; otherwise the error matches ErrExpired and ErrLimit. A released
// order gives ErrReleased, an unknown one ErrNotFound.
func (b *Budget) Confirm(ctx context.Context, order string) (Confirmation, error) {
	if err := b.checkOrder(order); err != nil {
		return Confirmation{}, err
	}
	for try := 0; try < 3; try++ {
		rp, err := b.run(ctx, b.s.confirm, true,
			[]string{b.k.base, b.k.epoch, b.k.holds, b.k.unrep, b.k.record(order), b.k.log},
			order, b.o.RecordTTL.Milliseconds(), b.reportFlag(), b.o.LogMax)
		if rp == nil {
			return Confirmation{}, err
		}
		switch rp.status() {
		case "ok":
			c, derr := confirmation(order, rp.str(3), rp.int(4), rp.str(2), rp.int(5) == 1)
			if derr != nil {
				return c, derr
			}
			return c, err
		case "expired":
			c, done, err := b.reconfirm(ctx, order, rp.str(2))
			if done {
				return c, err
			}
			continue // the record changed meanwhile: read it again
		case "released":
			return Confirmation{}, fmt.Errorf("%w: order %q", ErrReleased, order)
		case "notfound":
			return Confirmation{}, fmt.Errorf("%w: order %q", ErrNotFound, order)
		case "lost":
			return Confirmation{}, ErrLost
		}
		return Confirmation{}, rp.unexpected("confirm")
	}
	return Confirmation{}, fmt.Errorf("budget: confirm %q: the record kept changing", order)
}

// reconfirm confirms an expired hold if the caps allow it now; done is
// false when the record was no longer expired.
func (b *Budget) reconfirm(ctx context.Context, order, req string) (Confirmation, bool, error) {
	attrs, lines, err := DecodeRequest(req)
	if err != nil {
		return Confirmation{}, true, err
	}
	bd, ps, err := b.check(attrs, lines)
	if err != nil {
		return Confirmation{}, true, fmt.Errorf("%w: order %q: %w", ErrExpired, order, err)
	}
	rp, refs, err := b.reserve(ctx, order, bd, ps, 0, "c", "", false)
	if rp == nil {
		return Confirmation{}, true, err
	}
	switch rp.status() {
	case "ok":
		c, derr := confirmation(order, req, rp.int(1), rp.str(2), true)
		if derr != nil {
			return c, true, derr
		}
		return c, true, err
	case "limit":
		return Confirmation{}, true, fmt.Errorf("%w: order %q: %w", ErrExpired, order, b.limitErr(rp, refs))
	case "state":
		return Confirmation{}, false, nil
	case "lost":
		return Confirmation{}, true, ErrLost
	}
	return Confirmation{}, true, rp.unexpected("confirm")
}

func confirmation(order, req string, at int64, epoch string, isNew bool) (Confirmation, error) {
	attrs, lines, err := DecodeRequest(req)
	return Confirmation{Order: order, Attributes: attrs, Lines: lines, At: ms(at), Epoch: epoch, New: isNew}, err
}

// Release gives the order's hold back. Releasing again, or an order whose
// hold expired, answers its state (Released or Expired) with no error. A
// confirmed order gives ErrConfirmed, an unknown one ErrNotFound.
func (b *Budget) Release(ctx context.Context, order string) (State, error) {
	if err := b.checkOrder(order); err != nil {
		return "", err
	}
	rp, err := b.run(ctx, b.s.release, true,
		[]string{b.k.base, b.k.epoch, b.k.holds, b.k.unrep, b.k.record(order)},
		order, b.o.RecordTTL.Milliseconds(), b.reportFlag(), callToken())
	if rp == nil {
		return "", err
	}
	switch rp.status() {
	case "ok":
		st := states[rp.str(2)]
		if st == Expired {
			// This Release took the expired order's report: it is the
			// order's one OnHoldExpired (a later Expire answers First
			// false).
			b.expired(Expiry{State: st, First: rp.int(3) == 1})
		}
		return st, err
	case "confirmed":
		return "", fmt.Errorf("%w: order %q", ErrConfirmed, order)
	case "notfound":
		return "", fmt.Errorf("%w: order %q", ErrNotFound, order)
	case "lost":
		return "", ErrLost
	}
	return "", rp.unexpected("release")
}
