// Package deadletters holds the whole-set dead-letter operations the CLI
// and the console share: every dead letter's ID, and requeueing a list of
// IDs in script-sized pieces.
package deadletters

import (
	"context"

	"github.com/tierset/tierset/delay"
)

// page is how many dead letters one read lists and one script requeues.
const page = 1000

// AllIDs lists every dead letter's ID of q, page by page.
func AllIDs(ctx context.Context, q *delay.Queue) ([]string, error) {
	var ids []string
	o := delay.ListOptions{State: delay.StateDead, Limit: page}
	for {
		p, err := q.List(ctx, o)
		if err != nil {
			return nil, err
		}
		for _, t := range p.Tasks {
			ids = append(ids, t.ID)
		}
		if p.Next == "" {
			return ids, nil
		}
		o.Cursor = p.Next
	}
}

// Requeue requeues ids, a page a script, and returns how many were
// requeued (those already gone are not counted).
func Requeue(ctx context.Context, q *delay.Queue, ids []string) (int, error) {
	total := 0
	for i := 0; i < len(ids); i += page {
		n, err := q.Requeue(ctx, delay.Selector{IDs: ids[i:min(i+page, len(ids))]})
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
