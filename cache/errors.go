package cache

import (
	"errors"
	"fmt"

	"github.com/tierset/tierset/gradient"
)

// Sentinel errors. Every error this package returns wraps one of these (or
// a gradient validation error, which matches [gradient.ErrInvalid]), so
// callers branch with errors.Is. Redis and network errors are wrapped with
// %w, and a cancelled call also matches ctx.Err(). On a client given to
// tierset.KeepDialErrors, a call whose ctx ends while Redis refuses
// connections also names the client's last dial error (a tierset.DialError
// inside the chain), still matching ctx.Err().
var (
	// ErrNilClient: New was given a nil Redis client.
	ErrNilClient = errors.New("cache: nil redis client")
	// ErrInvalidOptions: an Options field out of range (a prefix with braces,
	// whitespace or glob characters, negative durations or sizes, minor
	// digits outside 0..9).
	ErrInvalidOptions = errors.New("cache: invalid options")
	// ErrNotFound: no promotion with this ID is stored under the prefix.
	ErrNotFound = errors.New("cache: promotion not found")
	// ErrNoTier: the value is below the lowest threshold. It also matches
	// gradient.ErrNoTier, so code written against the in-memory matcher
	// keeps working.
	ErrNoTier = fmt.Errorf("cache: no tier reached: %w", gradient.ErrNoTier)
	// ErrNotActive: the promotion exists but the caller's clock
	// (Options.Now) is outside its validity window [Start, End).
	ErrNotActive = errors.New("cache: promotion not active")
	// ErrCorrupt: bytes read from Redis that are not a record this package
	// wrote (bad msgpack, trailing bytes, oversized, impossible values).
	ErrCorrupt = errors.New("cache: corrupt record in redis")
	// ErrMetricMismatch: the query's metric, or the minor digits used to
	// encode an amount query, differ from the stored promotion's.
	ErrMetricMismatch = errors.New("cache: query metric does not match the promotion")
	// ErrBadQuery: a query that cannot be encoded (unknown metric, negative
	// or out-of-range value). Value errors also match gradient.ErrBadValue.
	ErrBadQuery = errors.New("cache: bad query")
	// ErrBadID: a promotion ID that gradient.ValidateID refuses. It also
	// matches gradient.ErrBadID.
	ErrBadID = fmt.Errorf("cache: bad promotion id: %w", gradient.ErrBadID)
	// ErrBatchTooLarge: more than MaxCartLines queries, or more than
	// MaxRefreshBatch promotions, in one call.
	ErrBatchTooLarge = errors.New("cache: batch too large")
	// ErrDuplicatePromotion: one Refresh call names the same promotion twice.
	ErrDuplicatePromotion = errors.New("cache: promotion appears twice in one refresh")
	// ErrDamaged: a stored promotion is not whole (a key evicted or
	// deleted behind the cache's back): meta without its tiers key, a
	// tiers key without its floor or ceiling sentinel, or a current
	// version without its gift list. It is distinct from ErrNotFound (no
	// trace of the promotion) and from ErrGiftsGone (a replaced or
	// deleted version's gifts expired). A Refresh of the promotion
	// rewrites it (outcome Repaired), even with unchanged content.
	ErrDamaged = errors.New("cache: stored promotion is damaged")
	// ErrGiftsGone: a hit's gift list is no longer stored and its version
	// is not the current one. This happens only to a reader that fetched
	// a tier more than Options.Grace before it asked for the gifts of a
	// version that was since replaced or deleted.
	ErrGiftsGone = errors.New("cache: gifts of this promotion version are gone")
	// ErrCrossSlot: the keys of one transaction would span Redis Cluster
	// hash slots. Refused on the client before anything is sent. With keys
	// built only by keys.go this cannot happen; the guard keeps it that way.
	ErrCrossSlot = errors.New("cache: keys of one transaction span hash slots")
	// ErrConflict: a refresh kept changing the promotion while a refresh
	// transaction retried (WATCH failed RefreshRetries times).
	ErrConflict = errors.New("cache: promotion changed concurrently, retries exhausted")
	// ErrUnknownPromotion: a Loader's answer for an ID its source does
	// not have. A line whose promotion the source does not know gets an
	// error matching both this and ErrNotFound.
	ErrUnknownPromotion = errors.New("cache: promotion unknown to the source")
	// ErrLoad: a read-through load failed: the loader's error, a panic, a
	// timeout, the caller's ctx ending while it waited, or a promotion
	// Refresh refused. The line gets it instead of an answer.
	ErrLoad = errors.New("cache: read-through load failed")
	// ErrRevisionConflict: a write carries the revision Redis already
	// holds for the promotion, with other content. A source must change
	// the revision with every change, so one of the two writers is wrong;
	// retrying gives the same answer. Returned as a
	// *RevisionConflictError that names the promotion.
	ErrRevisionConflict = errors.New("cache: same revision, different content")
)

// RevisionConflictError is a write refused because Redis holds the same
// revision of the promotion with other content (ErrRevisionConflict).
// Nothing of that promotion was written.
type RevisionConflictError struct {
	ID       string
	Revision int64
	// Held and Wrote are the content hashes (versions) of the stored
	// promotion and of the refused write.
	Held, Wrote string
}

func (e *RevisionConflictError) Error() string {
	return fmt.Sprintf("cache: promotion %q revision %d: stored version %s, write carries version %s: %v",
		e.ID, e.Revision, e.Held, e.Wrote, ErrRevisionConflict.Error())
}

// Is makes a RevisionConflictError match ErrRevisionConflict.
func (e *RevisionConflictError) Is(target error) bool { return target == ErrRevisionConflict }
