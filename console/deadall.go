package console

import (
	"context"

	"github.com/tierset/tierset/delay"
)

// allDeadIDs lists every dead letter's ID, 1000 a read.
func allDeadIDs(ctx context.Context, q *delay.Queue) ([]string, error) {
	var ids []string
	for off := 0; ; off += 1000 {
		page, err := q.ListDead(ctx, off, 1000)
		if err != nil {
			return nil, err
		}
		for _, t := range page.Tasks {
			ids = append(ids, t.ID)
		}
		if len(page.Tasks) < 1000 {
			return ids, nil
		}
	}
}

// requeueAll requeues ids, 1000 a script.
func requeueAll(ctx context.Context, q *delay.Queue, ids []string) (int, error) {
	total := 0
	for i := 0; i < len(ids); i += 1000 {
		n, err := q.Requeue(ctx, ids[i:min(i+1000, len(ids))]...)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
