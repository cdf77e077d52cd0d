package delay

import (
	"fmt"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/redisconf"
)

// Queue is one named delay queue. All of its state lives under one hash tag
// (see keys.go), so a sharded queue is K Queues side by side. A Queue is safe
// for concurrent use.
type Queue struct {
	c     redis.UniversalClient
	name  string
	k     keys
	o     Options
	epoch int64 // codec epoch, Unix ms
	mult  int64 // 2^bits
	// offsetMs estimates Redis TIME minus the client clock, from the TIME
	// every script reply carries. Only the worker's timer uses it.
	offsetMs atomic.Int64
	// enqueueLoaded records that this queue loaded the enqueue script. A
	// pipeline that met NOSCRIPT halfway (another client loading the script
	// while it ran) would resend its first jobs after its last ones and
	// break same-millisecond order, so EnqueueBatch loads before its first
	// pipeline instead of discovering the script's absence inside one.
	enqueueLoaded atomic.Bool
	// group merges concurrent Enqueue calls into batches.
	group enqueueGroup
	// req names each mutating call; keepMs is Options.ReplyTTL as the
	// scripts take it (see once.go).
	req    reqIDs
	keepMs string
	// shard of shards, when NewSharded made the queue (shards 0: a plain
	// Queue); Reconcile skips source tasks of other shards.
	shard, shards int
	// hw follows the per-ms high-water mark of this process's enqueues.
	hw highWater
}

// New returns the queue called name on c. It validates name and opts and
// sends nothing. c is a redis.UniversalClient because the queue needs
// scripts, pipelines (EnqueueBatch) and a blocking BLPOP (Worker); a
// *redis.Client and a *redis.ClusterClient both work.
func New(c redis.UniversalClient, name string, opts Options) (*Queue, error) {
	if nilClient(c) {
		return nil, invalid("options", "nil client")
	}
	if err := validateName(name); err != nil {
		return nil, err
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := redisconf.CheckDeadlines(c); err != nil {
		if !o.AllowNoContextTimeout {
			return nil, invalid("options", "%w (or set Options.AllowNoContextTimeout)", err)
		}
		o.obs.OnWarning(name, fmt.Errorf("delay: %w", err))
	}
	k := newKeys(o.Prefix, name)
	// Names and prefixes without braces cannot move a key off the queue's
	// tag; checking the whole layout once here makes that a tested fact.
	if err := checkSlot("new", k.all()); err != nil {
		return nil, err
	}
	q := &Queue{
		c: c, name: name, k: k, o: o,
		epoch: o.Codec.EpochMs(), mult: int64(1) << o.Codec.Bits(),
		keepMs: strconv.FormatInt(o.ReplyTTL.Milliseconds(), 10),
	}
	q.req.nonce = newNonce()
	return q, nil
}

// Name returns the queue name.
func (q *Queue) Name() string { return q.name }

// Client returns the client the queue talks through.
func (q *Queue) Client() redis.UniversalClient { return q.c }

// Options returns the queue's options with defaults filled in.
func (q *Queue) Options() Options {
	o := q.o
	o.obs = nil // a New given these options logs through their Logger
	return o
}

// Keys lists the queue's fixed keys and the base name under which its
// record buckets live (base + ":" + suffix). All share the queue's hash
// tag, so the buckets do too.
func (q *Queue) Keys() []string { return q.k.all() }

// State is where a task is.
type State string

// Task states, as List and Task report them and List selects them. The
// CLI and the console show these words.
const (
	StateDue       State = "due"       // pending and due by Redis TIME: a worker takes it next
	StateScheduled State = "scheduled" // pending, due later
	StatePending   State = "pending"   // in the due set: due or scheduled (Enqueued.State; a List filter for both)
	StateInFlight  State = "inflight"  // taken, under a lease
	StateCancelled State = "cancelled" // in flight but cancelled: its ack removes it, it is never retried
	StateDead      State = "dead"      // in the dead-letter set
	StateDone      State = "done"      // acked, its (Key, Token) kept for Options.DoneTTL
)

// When is a due time: absolute (At) or relative to Redis TIME (After).
// The zero When is "now". Times are rounded up to the next millisecond, so
// a task never runs before the instant asked for.
type When struct {
	At    time.Time
	After time.Duration
}

// At is "run at t" (for instance a time stored in a database).
func At(t time.Time) When { return When{At: t} }

// After is "run d after now", now being Redis TIME when the script runs.
func After(d time.Duration) When { return When{After: d} }

// Job is a task to enqueue.
type Job struct {
	// Key is the business key (an order ID, say): 1..MaxKeyBytes bytes, no
	// control characters. Cancel and Reschedule find tasks by it.
	Key string
	// Token makes (Key, Token) idempotent. Empty: the library makes one
	// (the task ID), so each such Enqueue is a new task.
	Token string
	// Payload is opaque, at most Options.MaxPayload bytes.
	Payload []byte
	When
}

// Enqueued reports the outcome of an Enqueue.
type Enqueued struct {
	ID    string
	Token string // the caller's token, or the generated one (= ID)
	// Due is the task's due time and Seq its sequence in that millisecond,
	// for a new or pending task (zero otherwise).
	Due time.Time
	Seq int64
	// Duplicate: (Key, Token) already existed; nothing was changed.
	Duplicate bool
	// Restored: (Key, Token) had a record in no set (Redis lost its due
	// entry); it is due again at the When asked for, under its old ID
	// (ErrDueLost, reported to Observer.OnLoss and in Stats.Restored).
	Restored bool
	State    State
	// Err is a per-job error in EnqueueBatch (nil in Enqueue's result).
	Err error
}

func (q *Queue) observeTime(nowMs int64, sent, recv time.Time) {
	if nowMs <= 0 {
		return
	}
	mid := sent.Add(recv.Sub(sent) / 2)
	q.offsetMs.Store(nowMs - mid.UnixMilli())
}

// ServerNow estimates Redis TIME from the client clock and the last
// measured offset.
func (q *Queue) ServerNow() time.Time {
	return q.o.Now().Add(time.Duration(q.offsetMs.Load()) * time.Millisecond)
}

// ceilMs rounds d up to whole milliseconds without the overflow of
// d+1ms-1 near math.MaxInt64 (which turned a huge delay negative).
func ceilMs(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond > 0 {
		ms++
	}
	return ms
}

func ceilUnixMs(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Sub(time.UnixMilli(ms)) > 0 {
		ms++
	}
	return ms
}

// whenArgs checks w in Go (same codec as the script) and returns the
// script's mode and value.
func (q *Queue) whenArgs(w When) (string, int64, error) {
	if !w.At.IsZero() && w.After != 0 {
		return "", 0, invalid("when", "set either At or After, not both")
	}
	if !w.At.IsZero() {
		ms := ceilUnixMs(w.At)
		if _, err := q.o.Codec.Encode(ms, 0); err != nil {
			return "", 0, err
		}
		return "at", ms, nil
	}
	if w.After < 0 {
		return "", 0, invalid("delay", "%v", w.After)
	}
	d := ceilMs(w.After)
	if _, err := q.o.Codec.Encode(q.ServerNow().UnixMilli()+d, 0); err != nil {
		return "", 0, err
	}
	return "after", d, nil
}

func (q *Queue) checkJob(j Job) (string, int64, error) {
	if err := validateKey(j.Key); err != nil {
		return "", 0, err
	}
	if err := validateToken(j.Token); err != nil {
		return "", 0, err
	}
	if len(j.Payload) > q.o.MaxPayload {
		return "", 0, invalid("payload", "%d bytes (max %d)", len(j.Payload), q.o.MaxPayload)
	}
	return q.whenArgs(j.When)
}

// nilClient reports a nil client, typed nils included: a nil *redis.Client
// in the interface is not == nil, and its first command would dereference
// it.
func nilClient(c redis.UniversalClient) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
