package delay

import (
	"errors"
	"time"

	"github.com/tierset/tierset/internal/inputerr"
)

// Sentinel errors. Every error this package returns wraps one of these (or a
// score/ sentinel for due times out of the codec's range, or the context's
// error on cancellation), so callers branch with errors.Is. Bad input is
// one sentinel, ErrInvalid, carried by a *ValidationError that names the
// input; the others name states. On a client given to
// tierset.KeepDialErrors, a call whose ctx ends while Redis refuses
// connections also names the client's last dial error (a tierset.DialError
// inside the chain), still matching the context's error.
var (
	// ErrInvalid: a refused input (argument or option). Every such error
	// is a *ValidationError naming the input; it matches ErrInvalid.
	ErrInvalid = errors.New("delay: invalid input")
	// ErrLeaseLost: the lease is no longer held: it expired and the task was
	// swept back or handed to another consumer (new fence).
	ErrLeaseLost = errors.New("delay: lease lost")
	// ErrNotFound: no such task: it never existed or is already finished.
	ErrNotFound = errors.New("delay: task not found")
	// ErrTooManyTasks: the business key already has 64 tasks (the cap bounds every
	// per-key script loop).
	ErrTooManyTasks = errors.New("delay: too many tasks for one business key")
	// ErrSeqExhausted: a task's search met 64 consecutive full
	// milliseconds (2^bits tasks each). A burst at one instant does not
	// (each task starts where the last one for that instant landed); tasks
	// for one instant interleaved with others, past 65,536 at 10 bits, can.
	ErrSeqExhausted = errors.New("delay: sequence space exhausted")
	// ErrCorrupt: a task record in Redis that does not decode.
	ErrCorrupt = errors.New("delay: corrupt task record")
	// ErrCounterLost: the task ID counter (the ctr hash) was gone while the
	// queue held tasks, or behind an ID that has a record (eviction, a
	// stray DEL). The enqueue wrote nothing; the queue repairs the counter
	// past every ID it finds (Repair) and sends it again, so an ID is never
	// reused and a record never overwritten.
	ErrCounterLost = errors.New("delay: task ID counter lost")
	// ErrIndexLost: the key index was gone while the queue held tasks, so
	// duplicates and Cancel could not be told. The enqueue wrote nothing;
	// the queue rebuilds the index from the records (Repair) and sends it again.
	ErrIndexLost = errors.New("delay: key index lost")
	// ErrRecordLost: a task ID due or in flight whose record is gone (an
	// evicted tasks bucket). The ID is moved to the dead set, counted in
	// Stats.Lost and reported to Observer.OnLoss; Reconcile re-adds the
	// task from its Source.
	ErrRecordLost = errors.New("delay: task record lost")
	// ErrDueLost: a task record in no set (its due entry lost, e.g. an
	// evicted due set). Enqueueing its (Key, Token) again puts it back in
	// due (Enqueued.Restored, Stats.Restored, Observer.OnLoss); Repair
	// counts such records.
	ErrDueLost = errors.New("delay: task due entry lost")
	// ErrEvictionPolicy: the server's maxmemory-policy (allkeys-*) may evict
	// the queue's keys, which loses tasks. Check refuses it unless
	// Options.AllowEviction, which turns it into an Observer warning.
	ErrEvictionPolicy = errors.New("delay: server eviction policy may evict queue keys")
	// ErrConfigUnavailable: the server refused CONFIG GET (managed
	// services rename or block it), so Check could not read the eviction
	// policy. A warning, never a refusal.
	ErrConfigUnavailable = errors.New("delay: server refused CONFIG GET")
	// ErrHighWater: the tasks given one millisecond's score space (2^bits
	// seqs) passed Options.HighWaterWarn of it; past all of it, tasks
	// spill into the next millisecond (Stats.SeqOverflows). A warning
	// (Observer.OnWarning), once a window, never a refusal.
	ErrHighWater = errors.New("delay: a millisecond's sequence space is nearly full")
	// ErrCrossSlot: the keys of one script or pipeline would span Redis
	// Cluster hash slots. Refused on the client before anything is sent;
	// the error also wraps the guard's own detail. With keys built only by
	// newKeys this cannot happen; the guard keeps it that way.
	ErrCrossSlot = errors.New("delay: keys of one script span hash slots")
	// ErrRedis wraps every error that comes from the Redis client.
	ErrRedis = errors.New("delay: redis")
	// ErrSkipRetry: a handler error wrapping it dead-letters the task at once.
	ErrSkipRetry = errors.New("delay: permanent failure, no retry")
	// ErrPanic: the handler panicked; the task is retried.
	ErrPanic = errors.New("delay: handler panicked")
	// ErrShutdownTimeout: handlers were still running at ShutdownTimeout; their
	// tasks are left to their leases.
	ErrShutdownTimeout = errors.New("delay: shutdown timeout, handlers abandoned to their leases")
	// ErrDuplicateID: another live pool holds this pool's PoolOptions.ID
	// in the worker registry (its entry was refreshed while this pool
	// waited for it to expire). Run ends with it.
	ErrDuplicateID = errors.New("delay: pool ID held by another live pool")
)

// Permanent marks err as permanent: a handler returning it sends the task
// straight to the dead-letter set. errors.Is(Permanent(err), ErrSkipRetry)
// and errors.Is(Permanent(err), err) both hold.
func Permanent(err error) error {
	if err == nil {
		return ErrSkipRetry
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() []error { return []error{ErrSkipRetry, e.err} }

// RetryAfter marks err as a failure to retry after d instead of the
// delay Options.Backoff gives: a handler returning it puts the task back
// in due d from Redis TIME (or dead-letters it at MaxAttempts), err's
// text kept as its last error. errors.Is(RetryAfter(d, err), err) holds.
// A negative d counts as 0.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("delay: retry requested")
	}
	return &retryAfterError{d: max(d, 0), err: err}
}

type retryAfterError struct {
	d   time.Duration
	err error
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// ValidationError is a refused input: nothing was sent or written. It
// matches ErrInvalid, and errors.Is(err, &ValidationError{Field: f})
// tells which input.
//
// Field names the input: "name" (a queue name: empty, longer than
// 128 bytes, or holding braces, glob characters, whitespace or
// control characters), "prefix" (a key prefix, same rules), "key" (a
// business key: empty, longer than MaxKeyBytes or holding control
// characters), "token" (longer than MaxTokenBytes, or holding control
// characters or a comma), "payload" (above Options.MaxPayload),
// "when" (At and After both set), "delay" (a negative delay), "batch"
// (a count, limit, cursor or page state out of range), "selector" (a
// Selector naming no task, holding a malformed ID, or of a form the
// operation does not take), "lease" (an empty lease, or a lease duration
// under 1ms), "task" (a nil task) or "options" (an option outside its
// documented range; Detail names it).
//
// Detail says what was refused and what is allowed; Cause is the
// underlying error, or nil.
type ValidationError = inputerr.Error[input]

// input ties ValidationError to this package's name and ErrInvalid.
type input struct{}

func (input) Package() (string, error) { return "delay", ErrInvalid }

// invalid returns the *ValidationError for field; format and args make
// Detail as fmt.Errorf would, and a %w verb sets Cause.
func invalid(field, format string, args ...any) error {
	return inputerr.New[input](field, format, args...)
}
