package delay

import (
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/tierset/tierset/score"
)

// Defaults for the zero values of Options.
const (
	defaultMaxPayload  = 1 << 20
	defaultLease       = 30 * time.Second
	defaultMaxAttempts = 25
	// defaultReplyTTL is how long a mutating call's reply is kept when
	// Options.ReplyTTL is 0. go-redis re-sends a command at most
	// MaxRetries (3) times, each after a ReadTimeout (3 s) at worst plus a
	// backoff of at most 512 ms: 10.5 s in all with its default options,
	// and the Worker re-sends an ack within a few more seconds.
	defaultReplyTTL = 30 * time.Second
	// defaultHighWaterWarn is Options.HighWaterWarn's default: the score
	// design's advice to alert above about 80% of a millisecond's space.
	defaultHighWaterWarn = 0.8
	// MaxBatch is the largest Take, sweep, requeue or purge batch: Lua unpack
	// breaks near 8k on Redis and 5k on miniredis, and scripts stay short.
	MaxBatch = 1000
	// maxErrText caps the stored last-error text.
	maxErrText = 1024
)

// Options configure a Queue. The zero value of every field is its default.
type Options struct {
	// Prefix is the first part of every key. Default DefaultPrefix ("tierset").
	// It may not hold braces, whitespace or control characters.
	Prefix string
	// Codec turns (due ms, seq) into scores. Default: the zero
	// score.TimeCodec (Unix epoch, 10 sequence bits).
	Codec score.TimeCodec
	// MaxPayload caps a payload in bytes. Defaults to 1 MiB.
	MaxPayload int
	// Lease is how long a taken task stays with its consumer before the
	// sweep may hand it out again. Defaults to 30 s.
	Lease time.Duration
	// MaxAttempts is the number of deliveries after which Retry or an
	// expired lease dead-letters the task. Defaults to 25.
	MaxAttempts int
	// Backoff gives the Retry delay after a failed delivery (attempt counts
	// deliveries, from 1). Default: DefaultBackoff.
	Backoff func(attempt int) time.Duration
	// Observer receives events (deliveries with lateness, retries, dead
	// letters, errors). Default: the zero Observer, which ignores them.
	Observer Observer
	// Logger logs what goes wrong whatever the Observer: OnError and
	// OnLoss at level Error, OnWarning at Warn, each kind (queue and
	// operation, or a loss's or warning's sentinel) at most once every
	// 10 s with the count suppressed since ("suppressed", and for losses
	// "suppressed_tasks"); the last event an interval suppressed is logged
	// when it ends, so a burst is never logged as its first event alone.
	// It is called on the goroutine that met the event: a slow handler
	// slows that queue's worker. Defaults to slog.Default();
	// slog.New(slog.DiscardHandler) silences it.
	Logger *slog.Logger
	// DoneTTL keeps a finished task's (Key, Token) known for at least this
	// long after its ack: enqueueing the same pair again reports Duplicate
	// with StateDone and makes no task, so a producer's late retry cannot
	// run a finished task twice. Only tasks enqueued with a caller's Token
	// keep one (a generated token is unknown to any producer), and not
	// tasks cancelled in flight. A finished task then costs its record
	// without payload, its index entry and a ZSET member (as much memory
	// as a pending task: docs/benchmarks.md) until the sweep after DoneTTL
	// removes it; it counts toward the 64 tasks a key may hold meanwhile.
	// Default 0: off, finished tasks leave nothing.
	DoneTTL time.Duration
	// AllowNoContextTimeout accepts a *redis.Client, *redis.ClusterClient
	// or *redis.Ring built with ContextTimeoutEnabled false, reporting it
	// to Observer.OnWarning. Default false: New refuses such a
	// client with ErrInvalid, because go-redis then ignores ctx
	// deadlines on the socket and a Redis stall holds Enqueue for
	// ReadTimeout (3 s by default) whatever the caller's ctx says.
	AllowNoContextTimeout bool
	// AllowEviction lets Check (and so Pool.Run) accept a server whose
	// maxmemory-policy is allkeys-*, which can evict the queue's keys and
	// lose tasks: it then warns through Observer.OnWarning instead of
	// failing with ErrEvictionPolicy. Default false.
	AllowEviction bool
	// ReplyTTL is how long the reply of each mutating call (enqueue, take,
	// ack, retry, cancel, ...) is kept in Redis, so that the call sent again
	// after its reply was lost (go-redis retries it with default options;
	// the Worker re-sends acks and takes) returns the first run's outcome
	// instead of running twice. It must cover the client's whole retry
	// window: MaxRetries × (ReadTimeout + MaxRetryBackoff) and more. Each
	// kept reply costs its reply bytes (take keeps IDs and scores, not
	// payloads) until the queue's later calls delete it, by Redis TIME:
	// it has no TTL, so a volatile-* policy cannot evict it. Default
	// 30 s.
	ReplyTTL time.Duration
	// HighWaterWarn is the share of one millisecond's 2^bits seqs (the
	// score codec's space) at which the queue warns, once a minute at
	// most, through Observer.OnWarning (ErrHighWater): an enqueue of this
	// process was given seq+1 ≥ HighWaterWarn × 2^bits. Past the whole
	// space, tasks spill into the next millisecond. Stats.HighWater holds
	// the queue-wide mark. In (0, 1]. Defaults to 0.8.
	HighWaterWarn float64
	// Now is the client clock. It never decides what is due (Redis TIME
	// does); it only arms the worker's timer, through an offset to Redis
	// TIME measured on every reply. Default time.Now. Tests inject skew here.
	Now func() time.Time

	// obs is Observer behind the logging of Logger, set by withDefaults.
	obs observer
}

// DefaultBackoff is 1 s · 2^(attempt-1), capped at 10 minutes, with "equal
// jitter": a uniform draw in [d/2, d].
func DefaultBackoff(attempt int) time.Duration {
	return ExpBackoff(time.Second, 10*time.Minute)(attempt)
}

// ExpBackoff returns base · 2^(attempt-1) capped at max, drawn uniformly
// from [d/2, d] so retries of many tasks spread out.
func ExpBackoff(base, max time.Duration) func(attempt int) time.Duration {
	return func(attempt int) time.Duration {
		d := base
		for i := 1; i < attempt && d < max; i++ {
			d *= 2
		}
		d = min(d, max)
		if d <= 1 {
			return d
		}
		half := d / 2
		return half + rand.N(d-half+1)
	}
}

func (o Options) withDefaults() (Options, error) {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if err := validatePrefix(o.Prefix); err != nil {
		return o, err
	}
	switch {
	case o.MaxPayload < 0:
		return o, invalid("options", "MaxPayload %d", o.MaxPayload)
	case o.MaxPayload == 0:
		o.MaxPayload = defaultMaxPayload
	}
	switch {
	case o.Lease < 0 || (o.Lease > 0 && o.Lease < time.Millisecond):
		return o, invalid("options", "Lease %v", o.Lease)
	case o.Lease == 0:
		o.Lease = defaultLease
	}
	switch {
	case o.MaxAttempts < 0:
		return o, invalid("options", "MaxAttempts %d", o.MaxAttempts)
	case o.MaxAttempts == 0:
		o.MaxAttempts = defaultMaxAttempts
	}
	if o.DoneTTL < 0 || (o.DoneTTL > 0 && o.DoneTTL < time.Millisecond) {
		return o, invalid("options", "DoneTTL %v", o.DoneTTL)
	}
	switch {
	case o.ReplyTTL < 0 || (o.ReplyTTL > 0 && o.ReplyTTL < time.Millisecond):
		return o, invalid("options", "ReplyTTL %v", o.ReplyTTL)
	case o.ReplyTTL == 0:
		o.ReplyTTL = defaultReplyTTL
	}
	switch {
	case math.IsNaN(o.HighWaterWarn) || o.HighWaterWarn < 0 || o.HighWaterWarn > 1:
		return o, invalid("options", "HighWaterWarn %v (allowed (0, 1])", o.HighWaterWarn)
	case o.HighWaterWarn == 0:
		o.HighWaterWarn = defaultHighWaterWarn
	}
	if o.Backoff == nil {
		o.Backoff = DefaultBackoff
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.obs == nil {
		o.obs = newLogObserver(o.Observer, o.Logger)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}
