package cache

import (
	"errors"
	"fmt"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/inputerr"
)

// Sentinel errors. Every error this package returns wraps one of these (or
// a gradient validation error, which matches [gradient.ErrInvalid]), so
// callers branch with errors.Is. Bad input is one sentinel, ErrInvalid,
// carried by a *ValidationError that names the input; the others name
// states. Redis and network errors are wrapped with %w, and a cancelled
// call also matches ctx.Err(). On a client given to
// tierset.KeepDialErrors, a call whose ctx ends while Redis refuses
// connections also names the client's last dial error (a tierset.DialError
// inside the chain), still matching ctx.Err().
var (
	// ErrInvalid: a refused input (argument, query or option). Every such
	// error is a *ValidationError naming the input. A promotion that
	// gradient refuses is a *gradient.ValidationError instead, which
	// matches gradient.ErrInvalid.
	ErrInvalid = errors.New("cache: invalid input")
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
	// ErrMetricMismatch: the query's metric (quantity or amount) differs
	// from the stored promotion's.
	ErrMetricMismatch = errors.New("cache: query metric does not match the promotion")
	// ErrDigitsMismatch: an amount query was encoded with other minor
	// digits (Options.MinorDigits) than the stored promotion's currency
	// has. The message names both counts.
	ErrDigitsMismatch = errors.New("cache: query minor digits do not match the promotion's")
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

// ValidationError is a refused input: nothing was sent or written. It
// matches ErrInvalid, and errors.Is(err, &ValidationError{Field: f})
// tells which input.
//
// Field names the input: "client" (a nil Redis client, typed nils
// included), "cache" (a method called on a nil *Cache), "options" (an
// Options field out of range: a prefix with braces, whitespace or glob
// characters, negative durations or sizes, minor digits outside 0..9;
// Detail names it), "id" (a promotion ID gradient.ValidateID refuses;
// the error also matches gradient.ErrBadID), "query" (an unknown
// metric, or a negative or out-of-range value, which also matches
// gradient.ErrBadValue), "batch" (more than MaxCartLines queries or
// MaxRefreshBatch promotions in one call) or "promotions" (one
// Refresh naming a promotion twice).
//
// Detail says what was refused and what is allowed; Cause is the
// underlying error, or nil.
type ValidationError = inputerr.Error[input]

// input ties ValidationError to this package's name and ErrInvalid.
type input struct{}

func (input) Package() (string, error) { return "cache", ErrInvalid }

// invalid returns the *ValidationError for field; format and args make
// Detail as fmt.Errorf would, and a %w verb sets Cause.
func invalid(field, format string, args ...any) error {
	return inputerr.New[input](field, format, args...)
}
