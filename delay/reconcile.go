package delay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Source is the caller's source of truth, listed in pages.
type Source interface {
	// Pending returns at most limit tasks, still to run, due before before,
	// from the page after cursor ("" = the first page), and the next cursor
	// ("" = no more pages). Each job's Token is required ((Key, Token) is
	// how Redis and the source are matched) and its due time is When.At
	// (a job with When.After is refused as invalid).
	Pending(ctx context.Context, before time.Time, cursor string, limit int) (jobs []Job, next string, err error)
}

// ReconcileOptions configure Reconcile. The zero value is the default.
type ReconcileOptions struct {
	// PageSize is the source page size and the Redis batch (1..MaxBatch).
	// Default 500.
	PageSize int
	// KeepExtra disables the removal of pending tasks the source lacks.
	// Default false (they are removed).
	KeepExtra bool
	// MaxSourceTasks bounds the (key, token) set held in memory while
	// comparing. Default 1,000,000.
	MaxSourceTasks int
	// MoveDue moves a pending task present in Redis, never delivered yet,
	// whose due time differs from the one the source lists, to the
	// source's time (counted in Moved). A task delivered at least once
	// keeps its retry's due time. Use it when the source is the truth for
	// due times and nothing else reschedules its tasks while Reconcile
	// runs (Outbox.Reconcile in package pg holds its Reschedule off).
	// Default false: a present task never moves.
	MoveDue bool
}

// ReconcileResult counts what Reconcile did.
type ReconcileResult struct {
	Listed int // tasks the source listed
	Added  int // missing from Redis: enqueued (same key and token)
	// Restored counts tasks whose record Redis kept but whose due entry it
	// lost: put back in due under their old ID (Enqueued.Restored).
	Restored int
	Present  int // already in Redis, in any state: left alone (but see Moved)
	// Moved counts present tasks given the source's due time (MoveDue);
	// they are also counted in Present.
	Moved   int
	Invalid int // rejected source tasks (bad key, token or time); see FirstInvalid
	Removed int // pending in Redis, due before the bound, unknown to the source
	// Untracked counts pending tasks with a generated token (the source
	// cannot know them); they are never removed.
	Untracked int
	// Newer counts pending tasks enqueued after the listing began (or all
	// of them while the ID counter is lost): never removed, since the
	// source may list them on its next pass.
	Newer int
	// OtherShard counts source tasks of another shard, skipped by a
	// shard's own Reconcile (see Queue.Reconcile).
	OtherShard   int
	FirstInvalid error
}

type keyToken struct{ key, token string }

// Reconcile makes Redis agree with src for tasks due before before: it
// re-adds what Redis lacks (idempotent enqueue with the same key and
// token, so a present task never moves) and, unless KeepExtra, removes
// pending tasks due before before that src no longer lists, in batches of
// PageSize. In-flight and dead tasks are never removed. It is the
// compensation path after Redis lost data.
//
// A task completed in Redis but still listed by src is added again: src
// must stop listing a task once its handler has committed.
//
// On a shard of a Sharded queue (Sharded.Shard), source tasks whose key
// belongs to another shard are skipped and counted in OtherShard: a copy
// here would be a duplicate that no call by key reaches. Sharded.Reconcile
// reconciles the whole queue.
func (q *Queue) Reconcile(ctx context.Context, src Source, before time.Time, opts ReconcileOptions) (ReconcileResult, error) {
	route := func(string) int { return 0 }
	if q.shards > 0 {
		route = func(key string) int {
			if shardOf(key, q.shards) != q.shard {
				return -1
			}
			return 0
		}
	}
	return reconcile(ctx, []*Queue{q}, route, q.EnqueueBatch, src, before, opts)
}

// reconcile is Reconcile over shards: route is the index in shards of a
// source task's key (-1: another shard's, skipped), enqueue adds jobs
// that route to a shard, each to its own.
func reconcile(ctx context.Context, shards []*Queue, route func(key string) int,
	enqueue func(context.Context, []Job) ([]Enqueued, error), src Source, before time.Time, opts ReconcileOptions) (ReconcileResult, error) {
	var res ReconcileResult
	if src == nil {
		return res, invalid("options", "nil source")
	}
	if opts.PageSize < 0 || opts.PageSize > MaxBatch || opts.MaxSourceTasks < 0 {
		return res, invalid("options", "page size %d, max source tasks %d", opts.PageSize, opts.MaxSourceTasks)
	}
	if opts.PageSize == 0 {
		opts.PageSize = 500
	}
	if opts.MaxSourceTasks == 0 {
		opts.MaxSourceTasks = 1_000_000
	}
	bound, err := shards[0].o.Codec.DueBound(before.UnixMilli() - 1)
	if err != nil {
		return res, err
	}
	// Only tasks that existed before the listing began may be removed: IDs
	// only grow, so a task enqueued meanwhile (a relay, a producer) has an
	// ID above this mark and is never taken for one the source dropped.
	marks := make([]uint64, len(shards))
	for i, q := range shards {
		if marks[i], err = q.idMark(ctx); err != nil {
			return res, err
		}
	}
	known := map[keyToken]bool{}
	moves := make([][]moveDue, len(shards)) // per shard
	cursor := ""
	for {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("delay: reconcile: %w", err)
		}
		page, next, err := src.Pending(ctx, before, cursor, opts.PageSize)
		if err != nil {
			return res, fmt.Errorf("delay: reconcile: source: %w", err)
		}
		res.Listed += len(page)
		jobs := make([]Job, 0, len(page))
		for _, st := range page {
			if st.Token == "" || st.After != 0 {
				res.Invalid++
				if res.FirstInvalid == nil {
					field, what := "token", "has no token"
					if st.Token != "" {
						field, what = "when", "has When.After (a source lists absolute times)"
					}
					res.FirstInvalid = invalid(field, "source task %q %s", st.Key, what)
				}
				continue
			}
			if route(st.Key) < 0 {
				res.OtherShard++
				continue
			}
			known[keyToken{st.Key, st.Token}] = true
			jobs = append(jobs, Job{Key: st.Key, Token: st.Token, Payload: st.Payload, When: At(st.At)}) // a copy
		}
		if len(known) > opts.MaxSourceTasks {
			return res, invalid("options", "source lists more than MaxSourceTasks (%d)", opts.MaxSourceTasks)
		}
		out, err := enqueue(ctx, jobs)
		if err != nil {
			return res, err
		}
		for i, e := range out {
			switch {
			case e.Err != nil:
				res.Invalid++
				if res.FirstInvalid == nil {
					res.FirstInvalid = e.Err
				}
			case e.Restored:
				res.Restored++
			case e.Duplicate:
				res.Present++
				if j := jobs[i]; opts.MoveDue && e.State == StatePending && e.Due.UnixMilli() != ceilUnixMs(j.When.At) {
					i := route(j.Key)
					moves[i] = append(moves[i], moveDue{id: e.ID, key: j.Key, token: j.Token, at: j.When.At})
				}
			default:
				res.Added++
			}
		}
		if next == "" || len(page) == 0 {
			break
		}
		cursor = next
	}
	for i, q := range shards {
		if err := q.moveDue(ctx, moves[i], opts.PageSize, &res); err != nil {
			return res, err
		}
	}
	if opts.KeepExtra {
		return res, nil
	}
	for i, q := range shards {
		if err := q.removeExtra(ctx, bound, marks[i], known, opts.PageSize, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// removeExtra removes q's pending tasks due before bound that known
// lacks and that existed at mark, in batches of page.
func (q *Queue) removeExtra(ctx context.Context, bound int64, mark uint64, known map[keyToken]bool, page int, res *ReconcileResult) error {
	// Collect first, remove after: removing while paging by offset would skip.
	var extra []string
	for offset := int64(0); ; offset += int64(page) {
		ids, err := q.c.ZRangeArgs(ctx, redis.ZRangeArgs{
			Key: q.k.due, ByScore: true, Start: "-inf", Stop: bound,
			Offset: offset, Count: int64(page),
		}).Result()
		if err != nil {
			return wrapErr(ctx, "reconcile: scan", err)
		}
		if len(ids) == 0 {
			break
		}
		recs, err := q.records(ctx, ids)
		if err != nil {
			return wrapErr(ctx, "reconcile: records", err)
		}
		for i, v := range recs {
			s, ok := v.(string)
			if !ok {
				continue
			}
			rec, err := decodeRecord(s, q.o.MaxPayload)
			if err != nil {
				continue // unreadable: Take parks it in the dead set
			}
			if rec.token == "" {
				res.Untracked++
				continue
			}
			if known[keyToken{rec.key, rec.token}] {
				continue
			}
			if n, err := strconv.ParseUint(ids[i], 36, 64); err != nil || n > mark {
				res.Newer++
				continue
			}
			extra = append(extra, ids[i])
		}
		if len(ids) < page {
			break
		}
	}
	for i := 0; i < len(extra); i += page {
		batch := extra[i:min(i+page, len(extra))]
		args := make([]any, len(batch))
		for k, id := range batch {
			args[k] = id
		}
		r, err := q.mutate(ctx, scriptRemove, "reconcile: remove", q.req.next(), []string{q.k.due, q.k.tasks, q.k.idx}, args...)
		if err != nil {
			return err
		}
		res.Removed += int(r.int(1))
	}
	return nil
}

type moveDue struct {
	id, key, token string
	at             time.Time
}

// moveDue gives each task of moves that was never delivered its source
// due time, by token. A task taken and retried between the check of its
// attempt and the move is moved too: its retry comes early, never lost.
func (q *Queue) moveDue(ctx context.Context, moves []moveDue, page int, res *ReconcileResult) error {
	for i := 0; i < len(moves); i += page {
		batch := moves[i:min(i+page, len(moves))]
		ids := make([]string, len(batch))
		for k, m := range batch {
			ids[k] = m.id
		}
		recs, err := q.records(ctx, ids)
		if err != nil {
			return wrapErr(ctx, "reconcile: records", err)
		}
		for k, v := range recs {
			s, ok := v.(string)
			if !ok {
				continue // gone meanwhile (taken and acked, or cancelled)
			}
			rec, err := decodeRecord(s, q.o.MaxPayload)
			if err != nil || rec.attempt > 0 || rec.key != batch[k].key || rec.token != batch[k].token {
				continue
			}
			r, err := q.Reschedule(ctx, Selector{Key: batch[k].key, Token: batch[k].token}, At(batch[k].at))
			if err != nil {
				return fmt.Errorf("delay: reconcile: move %q: %w", batch[k].key, err)
			}
			res.Moved += r.Moved
		}
	}
	return nil
}

// idMark is the highest task ID issued so far, 0 when the counter is
// missing (then no task counts as older than the listing).
func (q *Queue) idMark(ctx context.Context) (uint64, error) {
	v, err := q.c.HGet(ctx, q.k.ctr, "id").Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, wrapErr(ctx, "reconcile: id mark", err)
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: ID counter %q", ErrCorrupt, v)
	}
	return n, nil
}

// records reads the records of ids (nil where absent) with one HMGET per
// tasks bucket, pipelined: one round trip.
func (q *Queue) records(ctx context.Context, ids []string) ([]any, error) {
	type group struct {
		pos    []int
		fields []string
		cmd    *redis.SliceCmd
	}
	var order []string
	groups := map[string]*group{}
	for i, id := range ids {
		k := q.k.taskBucket(id)
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
			order = append(order, k)
		}
		g.pos = append(g.pos, i)
		g.fields = append(g.fields, id)
	}
	pipe := q.c.Pipeline()
	for _, k := range order {
		groups[k].cmd = pipe.HMGet(ctx, k, groups[k].fields...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := make([]any, len(ids))
	for _, g := range groups {
		vals := g.cmd.Val()
		for j, i := range g.pos {
			if j < len(vals) {
				out[i] = vals[j]
			}
		}
	}
	return out, nil
}
