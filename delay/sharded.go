package delay

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/slot"
)

// Sharded-queue limits.
const (
	// defaultShards is the shard count when ShardedOptions.Shards is 0.
	defaultShards = 8
	// maxShards bounds the shard count: a worker runs one take loop (and
	// holds one blocking connection) per shard.
	maxShards = 256
)

// ShardedOptions configure a Sharded queue.
type ShardedOptions struct {
	// Shards is the number of shards K. Defaults to 8; at most
	// 256 (a worker runs one take loop per shard). K is part of the data layout: a business key's shard is
	// hash(key) mod K, so changing K for a queue that still holds tasks
	// makes Cancel and Reschedule look in the wrong shard. Drain first.
	Shards int
	// Queue configures every shard (Prefix, Lease, Backoff, ...). Its
	// Observer sees shard names ("<name>:<i>"). Zero value: Options defaults.
	Queue Options
}

// Sharded is one logical delay queue spread over K shard queues named
// "<name>:0" … "<name>:K-1", so over K hash tags "{q:<name>:<i>}" and, on a
// Redis Cluster, over up to K masters. A single Queue lives on one hash
// tag, hence on one master, whatever the cluster size.
//
// A task's shard is a stable hash of its business key (For(key) is that
// shard). All tasks of one business key share a shard, so Cancel and
// Reschedule by key go to exactly one shard (O(1) routing, then the shard's reverse index),
// and every guarantee of Queue (ordering, idempotency by (key, token),
// fenced leases, recovery) holds inside each shard. Ordering across shards
// is by due time only approximately: two tasks due in the same millisecond
// on different shards have no defined order.
//
// Task IDs are unique per shard only; (For(t.Key), t.ID) is unique
// across the queue, and the methods taking a *Task route by t.Key.
//
// Which master holds a shard is decided by the CRC16 of its tag, not by
// the library: K shards are spread over the masters like K random slots.
// With K a few times the number of masters every master gets some shards;
// Placement shows where they landed.
type Sharded struct {
	name   string
	shards []*Queue
	// loaded: the enqueue script is in the script cache of every master
	// (as far as this process knows), see EnqueueBatch.
	loaded atomic.Bool
}

// Pause pauses every shard (Queue.Pause), in shard order. On an error the
// shards before the failing one are paused and the rest are not; Pause is
// idempotent, so the caller sends it again.
func (s *Sharded) Pause(ctx context.Context) error {
	for i, q := range s.shards {
		if err := q.Pause(ctx); err != nil {
			return fmt.Errorf("delay: shard %d: %w", i, err)
		}
	}
	return nil
}

// Resume resumes every shard (Queue.Resume), in shard order; on an error,
// as Pause.
func (s *Sharded) Resume(ctx context.Context) error {
	for i, q := range s.shards {
		if err := q.Resume(ctx); err != nil {
			return fmt.Errorf("delay: shard %d: %w", i, err)
		}
	}
	return nil
}

// SetRate limits the logical queue to r by giving each of its K shards
// r.PerSecond/K a second and a burst of r.Burst/K rounded up (so at most
// r.Burst + K - 1 at once). Keys spread evenly over shards (For), so
// with a backlog on every shard the whole delivers r.PerSecond; a shard
// without a backlog leaves its share unused. A rate whose share is under
// one task a day (r.PerSecond under K/86400) is refused; K/86400 itself
// is accepted. On an error, as Pause.
func (s *Sharded) SetRate(ctx context.Context, r Rate) error {
	r, err := r.withDefaults()
	if err != nil {
		return err
	}
	k := len(s.shards)
	// The bound is K × minRatePerSecond as the caller computes it; the
	// share of exactly that can round a unit in the last place under the
	// minimum (K = 23, 49, ...), so it is lifted to the minimum.
	if r.PerSecond > 0 && r.PerSecond < float64(k)*minRatePerSecond {
		return invalid("options", "Rate.PerSecond %v over %d shards is under minRatePerSecond %g a shard",
			r.PerSecond, k, minRatePerSecond)
	}
	if r.PerSecond > 0 {
		r = Rate{PerSecond: max(r.PerSecond/float64(k), minRatePerSecond), Burst: (r.Burst + k - 1) / k}
	}
	for i, q := range s.shards {
		if err := q.SetRate(ctx, r); err != nil {
			return fmt.Errorf("delay: shard %d: %w", i, err)
		}
	}
	return nil
}

// NewSharded returns the sharded queue called name on c. It validates the
// name of every shard and the options, and sends nothing.
func NewSharded(c redis.UniversalClient, name string, opts ShardedOptions) (*Sharded, error) {
	k := opts.Shards
	switch {
	case k == 0:
		k = defaultShards
	case k < 0 || k > maxShards:
		return nil, invalid("options", "Shards %d (allowed 1..%d)", k, maxShards)
	}
	if err := validateName(name); err != nil {
		return nil, err
	}
	s := &Sharded{name: name, shards: make([]*Queue, k)}
	for i := range s.shards {
		q, err := New(c, shardName(name, i), opts.Queue)
		if err != nil {
			return nil, err
		}
		q.shard, q.shards = i, k
		s.shards[i] = q
	}
	return s, nil
}

// shardName is the queue name of shard i of the sharded queue name.
func shardName(name string, i int) string { return name + ":" + strconv.Itoa(i) }

// Name returns the logical queue name.
func (s *Sharded) Name() string { return s.name }

// Shards returns the shard queues in order (a copy of the slice): shard i
// is the queue "<name>:<i>". For reaches the shard of a business key.
func (s *Sharded) Shards() []*Queue { return append([]*Queue(nil), s.shards...) }

// shardIndex is the shard of a business key: the 64-bit FNV-1a hash of
// the key, put through MurmurHash3's 64-bit finalizer, mapped to 0..K-1 by
// its high bits (hash·K >> 64). FNV-1a alone spreads badly: its low bits
// see only the low bits of each byte ("order-2" and "order-6" would share
// a shard under mod 4 forever), and its high bits barely move with the
// last byte, which is where sequential keys differ. The mapping is stable
// across processes and releases: it is part of the data layout.
func (s *Sharded) shardIndex(key string) int { return shardOf(key, len(s.shards)) }

// shardOf is shardIndex for k shards.
func shardOf(key string, k int) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	hi, _ := bits.Mul64(x, uint64(k))
	return int(hi)
}

// Reconcile is Queue.Reconcile for the whole sharded queue: the source is
// listed once, each task is enqueued in its own shard (For its key,
// the shards written concurrently, as EnqueueBatch does), and, unless
// KeepExtra, each shard's pending tasks that the source lacks are removed.
// The result sums the shards'.
func (s *Sharded) Reconcile(ctx context.Context, src Source, before time.Time, opts ReconcileOptions) (ReconcileResult, error) {
	return reconcile(ctx, s.shards, s.shardIndex, s.EnqueueBatch, src, before, opts)
}

// For returns the shard queue that holds the tasks of a business key. The
// calls by key go there: s.For(key).Cancel(ctx, Selector{Key: key}),
// and likewise Reschedule and List by key, each one shard and one round
// trip.
func (s *Sharded) For(key string) *Queue { return s.shards[s.shardIndex(key)] }

// Enqueue adds j to the shard of j.Key (see Queue.Enqueue).
func (s *Sharded) Enqueue(ctx context.Context, j Job) (Enqueued, error) {
	return s.For(j.Key).Enqueue(ctx, j)
}

// EnqueueBatch enqueues jobs grouped by shard: each shard's part goes
// through that shard's EnqueueBatch (one pipeline per MaxBatch jobs), and
// the shards are written concurrently, so on a Redis Cluster every master
// holding a shard works at once. Results are in input order; the returned
// error joins the transport errors of the shards that failed (results of
// the shards that succeeded are still filled in).
func (s *Sharded) EnqueueBatch(ctx context.Context, jobs []Job) ([]Enqueued, error) {
	out := make([]Enqueued, len(jobs))
	// The shards' pipelines use EVALSHA. Were the script missing, one
	// shard's fallback SCRIPT LOAD could land in the middle of another
	// shard's pipeline on the same server: the commands before it would
	// fail NOSCRIPT and be resent after the ones behind it, breaking the
	// enqueue order within that shard. Loading once up front (on every
	// master of a cluster) rules that out.
	if !s.loaded.Load() && len(jobs) > 0 {
		if err := scriptEnqueueBatch.Load(ctx, s.shards[0].Client()).Err(); err != nil {
			return out, wrapErr(ctx, "enqueue batch: script load", err)
		}
		s.loaded.Store(true)
	}
	groups := make([][]int, len(s.shards))
	for i, j := range jobs {
		sh := s.shardIndex(j.Key)
		groups[sh] = append(groups[sh], i)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(s.shards))
	for sh, idx := range groups {
		if len(idx) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			part := make([]Job, len(idx))
			for k, i := range idx {
				part[k] = jobs[i]
			}
			res, err := s.shards[sh].EnqueueBatch(ctx, part)
			for k, i := range idx {
				if k < len(res) {
					out[i] = res[k]
				}
			}
			if err != nil {
				errs[sh] = fmt.Errorf("delay: shard %d: %w", sh, err)
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// ackTask completes t in its shard (routed by t.Key).
func (s *Sharded) ackTask(ctx context.Context, t *Task) error {
	if t == nil {
		return invalid("task", "nil task")
	}
	return s.For(t.Key).ackTask(ctx, t)
}

// retry gives t back to its shard with backoff (see Queue.retry).
func (s *Sharded) retry(ctx context.Context, t *Task, cause error) (outcome, error) {
	if t == nil {
		return 0, invalid("task", "nil task")
	}
	return s.For(t.Key).retry(ctx, t, cause)
}

// killTask dead-letters t in its shard (see Queue.killTask).
func (s *Sharded) killTask(ctx context.Context, t *Task, cause error) (outcome, error) {
	if t == nil {
		return 0, invalid("task", "nil task")
	}
	return s.For(t.Key).killTask(ctx, t, cause)
}

// extend extends t's lease in its shard (see Queue.extend).
func (s *Sharded) extend(ctx context.Context, t *Task, lease time.Duration) (time.Time, error) {
	if t == nil {
		return time.Time{}, invalid("task", "nil task")
	}
	return s.For(t.Key).extend(ctx, t, lease)
}

// Stats reads every shard's Stats, in shard order.
func (s *Sharded) Stats(ctx context.Context) ([]Stats, error) {
	out := make([]Stats, len(s.shards))
	for i, q := range s.shards {
		st, err := q.Stats(ctx)
		if err != nil {
			return nil, fmt.Errorf("delay: shard %d: %w", i, err)
		}
		out[i] = st
	}
	return out, nil
}

// Placement maps each master address to the shards whose hash tag it
// serves, from the cluster's slot map (CLUSTER SLOTS). On a client that is
// not a *redis.ClusterClient every shard is on the one server, reported
// under the key "".
func (s *Sharded) Placement(ctx context.Context) (map[string][]int, error) {
	out := map[string][]int{}
	cc, ok := s.shards[0].Client().(*redis.ClusterClient)
	if !ok {
		for i := range s.shards {
			out[""] = append(out[""], i)
		}
		return out, nil
	}
	//lint:ignore SA1019 CLUSTER SHARDS, its replacement, needs Redis 7.0; CLUSTER SLOTS is deprecated, not removed, and answers on every version
	ranges, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, wrapErr(ctx, "placement", err)
	}
	for i, q := range s.shards {
		sl := slot.Of(q.k.due)
		addr := "?"
		for _, r := range ranges {
			if sl >= r.Start && sl <= r.End && len(r.Nodes) > 0 {
				addr = r.Nodes[0].Addr
				break
			}
		}
		out[addr] = append(out[addr], i)
	}
	return out, nil
}
