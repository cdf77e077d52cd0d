package delay

import (
	"context"
	"fmt"
	"strconv"
)

// release gives tasks that the worker took but never started back to due
// at the score they were taken at, not counted as an attempt, so a
// prefetch that was not used costs neither a lease wait nor an attempt.
// errs[i] is tasks[i]'s outcome (ErrLeaseLost when the lease was already
// gone); err is a transport error. One script per MaxBatch tasks.
func (q *Queue) release(ctx context.Context, tasks []*Task) (errs []error, err error) {
	errs = make([]error, len(tasks))
	keys := []string{q.k.tasks, q.k.inflight, q.k.idx, q.k.due, q.k.wake, q.k.lease}
	for from := 0; from < len(tasks); from += MaxBatch {
		part := tasks[from:min(from+MaxBatch, len(tasks))]
		args := make([]any, 0, 3*len(part))
		sent := make([]int, 0, len(part))
		for k, t := range part {
			sc, eerr := q.o.Codec.Encode(t.Due.UnixMilli(), t.Seq)
			if eerr != nil { // Take decoded this very score; left to the lease if not
				errs[from+k] = fmt.Errorf("delay: release %s: %w", t.ID, eerr)
				continue
			}
			args = append(args, t.ID, strconv.FormatInt(t.lease.Fence, 10), strconv.FormatInt(sc, 10))
			sent = append(sent, from+k)
		}
		if len(sent) == 0 {
			continue
		}
		r, err := q.mutate(ctx, scriptRelease, "release", q.req.next(), keys, args...)
		if err != nil {
			return nil, err
		}
		for k, i := range sent {
			if e := codeErr(r.int(k)); e != nil {
				errs[i] = fmt.Errorf("delay: release %s: %w", tasks[i].ID, e)
			}
		}
	}
	return errs, nil
}
