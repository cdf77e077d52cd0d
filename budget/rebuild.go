package budget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// Redemption is one confirmed reservation as a ledger keeps it: what
// Rebuild counts.
type Redemption struct {
	// Order, when set, names the confirmed order. Rebuild then makes its
	// record in Redis confirmed, so a Confirm of it that arrives later
	// (from a ledger's outbox) counts nothing again, and a hold of it
	// still live stops counting: the redemption stands for it.
	Order      string
	Attributes map[string]string
	Lines      []Line
	// At is when it was confirmed: it picks the period of period caps.
	At time.Time
}

// rebuildBatch is the most counter increments one rebuild step sends.
const rebuildBatch = 500

// Rebuild sets the budget's counters from outside: the redemptions a
// ledger holds, plus the holds still live in Redis; every other counter
// is dropped. It then gives the budget a new epoch. A budget is built
// this way once before first use (Rebuild(ctx, nil)), and again after
// Redis lost its data (every call answers ErrLost until then). While it
// runs, every other call answers ErrLost; a second Rebuild started
// meanwhile takes over and the first returns ErrConflict. The counters
// of periods already over are skipped. A redemption naming its Order
// is counted once even if Redis still holds a hold of that order, or a
// record of it released or expired: the ledger is the truth.
//
// With Options.Replicas, a step too few replicas acknowledged took effect
// on the master all the same: Rebuild goes on to the end, so the budget
// is never left mid-rebuild, and returns the new epoch with
// ErrNotReplicated.
func (b *Budget) Rebuild(ctx context.Context, reds []Redemption) (epoch string, err error) {
	type ctr struct{ suffix, field string }
	sums := map[ctr]int64{}
	ends := map[ctr]int64{}
	var order []ctr
	var orders []string
	seen := map[string]bool{}
	for i, r := range reds {
		if r.At.IsZero() {
			return "", invalid("redemption", "%d: no time", i)
		}
		bd, ps, err := b.checkRedemption(r)
		if err != nil {
			return "", invalid("redemption", "%d: %w", i, err)
		}
		if r.Order != "" {
			if seen[r.Order] {
				return "", invalid("redemption", "%d: order %q twice", i, r.Order)
			}
			seen[r.Order] = true
			orders = append(orders, r.Order)
		}
		caps, _ := capArgs(bd, ps, r.At, false)
		// caps: n, then per cap field, delta, limit, ncand, candidates; the
		// middle candidate is the period holding r.At.
		for j := 1; j < len(caps); {
			f, d, nc := caps[j].(string), caps[j+1].(int64), caps[j+3].(int)
			mid := j + 4 + 3*(nc/2)
			k := ctr{caps[mid].(string), f}
			if _, ok := sums[k]; !ok {
				order = append(order, k)
				ends[k] = caps[mid+2].(int64)
			}
			sums[k] += d
			if sums[k] > MaxAmount {
				return "", invalid("redemption", "%d: counter %s %s passes 2^53", i, k.suffix, k.field)
			}
			j += 4 + 3*nc
		}
	}
	var tok [8]byte
	_, _ = rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	keys := []string{b.k.base, b.k.epoch, b.k.holds, b.k.unrep, b.k.keyset}
	// seq numbers the 'add' steps: the script does a step sent again
	// (after a lost reply) only once.
	seq := 0
	// notRep is the first step's ErrNotReplicated: that step ran, so the
	// next ones go on and the caller learns of it at the end.
	var notRep error
	step := func(name string, extra ...any) (reply, error) {
		if name == "add" {
			seq++
		}
		args := append([]any{name, token, b.o.RecordTTL.Milliseconds(), b.reportFlag(), b.keepMs(), seq}, extra...)
		rp, err := b.run(ctx, b.s.rebuild, true, keys, args...)
		if rp == nil {
			return nil, err
		}
		if rp.status() == "busy" {
			return nil, fmt.Errorf("%w: another Rebuild of budget %q took over", ErrConflict, b.name)
		}
		if rp.status() != "ok" {
			return nil, rp.unexpected("rebuild")
		}
		if err != nil && notRep == nil { // run returns a reply with an error only for ErrNotReplicated
			notRep = err
		}
		return rp, nil
	}
	if _, err := step("begin"); err != nil {
		return "", err
	}
	for len(order) > 0 {
		n := min(len(order), rebuildBatch)
		args := []any{n}
		for _, k := range order[:n] {
			args = append(args, k.suffix, k.field, sums[k], ends[k])
		}
		args = append(args, 0)
		if _, err := step("add", args...); err != nil {
			return "", err
		}
		order = order[n:]
	}
	for len(orders) > 0 {
		n := min(len(orders), rebuildBatch)
		args := []any{0, n}
		for _, o := range orders[:n] {
			args = append(args, o)
		}
		if _, err := step("add", args...); err != nil {
			return "", err
		}
		orders = orders[n:]
	}
	rp, err := step("end")
	if err != nil {
		return "", err
	}
	return rp.str(2), notRep
}

// CheckRedemption validates r as Rebuild would (its time aside) against
// the promotions defined now: a ledger checks a redemption with it before
// writing it. A refusal is a *ValidationError naming the input.
func (b *Budget) CheckRedemption(r Redemption) error {
	_, _, err := b.checkRedemption(r)
	return err
}

func (b *Budget) checkRedemption(r Redemption) (body, []Promotion, error) {
	if r.Order != "" {
		if err := b.checkOrder(r.Order); err != nil {
			return body{}, nil, err
		}
	}
	return b.check(r.Attributes, r.Lines)
}
