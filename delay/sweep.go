package delay

import (
	"context"
	"fmt"
)

// SweepResult counts what a Sweep did.
type SweepResult struct {
	Returned int // expired leases back in the due set (the expired delivery counted as an attempt)
	Dead     int // expired at MaxAttempts: dead-lettered
	Deleted  int // cancelled in flight (or unreadable): removed
	// Tombstones is how many tombstones (Options.DoneTTL) past their end
	// were deleted, at most limit.
	Tombstones int
	// Lost counts expired leases whose record was gone (ErrRecordLost),
	// moved to the dead set and reported to Observer.OnLoss.
	Lost int
}

// Sweep handles at most limit (1..MaxBatch) leases that expired by Redis TIME.
func (q *Queue) Sweep(ctx context.Context, limit int) (SweepResult, error) {
	if limit < 1 || limit > MaxBatch {
		return SweepResult{}, invalid("batch", "%d", limit)
	}
	r, err := q.mutate(ctx, scriptSweep, "sweep", q.req.next(),
		[]string{q.k.inflight, q.k.tasks, q.k.idx, q.k.due, q.k.dead, q.k.ctr, q.k.stats, q.k.wake, q.k.lease, q.k.done},
		limit, q.o.MaxAttempts, q.epoch, q.mult, q.o.Codec.MaxMs())
	if err != nil {
		return SweepResult{}, err
	}
	res := SweepResult{Returned: int(r.int(1)), Dead: int(r.int(2)), Deleted: int(r.int(3)), Tombstones: int(r.int(4)),
		Lost: int(r.int(5))}
	if res.Lost > 0 {
		q.o.obs.OnLoss(q.name, fmt.Errorf("%w: %d in-flight task IDs without a record moved to the dead set", ErrRecordLost, res.Lost), res.Lost)
	}
	if res.Returned+res.Dead > 0 {
		q.o.obs.OnSweep(q.name, res.Returned, res.Dead)
	}
	return res, nil
}
