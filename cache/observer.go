package cache

import "time"

// Outcome classifies one looked-up cart line for an Observer.
type Outcome uint8

const (
	// OutcomeHit: a tier was reached.
	OutcomeHit Outcome = iota + 1
	// OutcomeNoTier: the promotion exists and is active, no tier reached.
	OutcomeNoTier
	// OutcomeNotFound: no such promotion.
	OutcomeNotFound
	// OutcomeNotActive: the promotion exists, outside its window.
	OutcomeNotActive
	// OutcomeError: a bad query, metric mismatch or corrupt record.
	OutcomeError
	// OutcomeDamaged: the promotion's stored keys are not whole
	// (ErrDamaged); a Refresh repairs it.
	OutcomeDamaged
)

func (o Outcome) String() string {
	switch o {
	case OutcomeHit:
		return "hit"
	case OutcomeNoTier:
		return "no_tier"
	case OutcomeNotFound:
		return "not_found"
	case OutcomeNotActive:
		return "not_active"
	case OutcomeError:
		return "error"
	case OutcomeDamaged:
		return "damaged"
	}
	return "unknown"
}

// RefreshOutcome is what Refresh did to one promotion.
type RefreshOutcome uint8

const (
	// Added: no version of the promotion was stored (no meta hash: never
	// stored, deleted, expired, or its meta hash evicted).
	Added RefreshOutcome = iota + 1
	// Updated: a different version was replaced.
	Updated
	// Unchanged: the stored version has the same content hash and is
	// whole; nothing was written.
	Unchanged
	// RefreshFailed: the write failed (reported to the Observer only).
	RefreshFailed
	// Repaired: the stored version had the same content hash but was not
	// whole (RefreshResult.Damage says what was missing); it was rewritten.
	Repaired
	// Stale: the write (or delete) carried a revision older than the one
	// Redis holds (a stored promotion or a Delete's tombstone), or was a
	// read-through fill that lost to another writer; nothing was written.
	// RefreshResult.Revision is the revision Redis holds. Never an error:
	// the newer write already won.
	Stale
	// Conflict: the write carried the revision Redis holds, with other
	// content; nothing was written and the call's error matches
	// ErrRevisionConflict (a *RevisionConflictError naming the promotion).
	Conflict
	// Deleted: Delete removed the stored promotion.
	Deleted
	// Absent: Delete found nothing stored (an ordered Delete still left
	// its tombstone).
	Absent
)

func (o RefreshOutcome) String() string {
	switch o {
	case Added:
		return "added"
	case Updated:
		return "updated"
	case Unchanged:
		return "unchanged"
	case RefreshFailed:
		return "failed"
	case Repaired:
		return "repaired"
	case Stale:
		return "stale"
	case Conflict:
		return "conflict"
	case Deleted:
		return "deleted"
	case Absent:
		return "absent"
	}
	return "unknown"
}

// Op names a Cache call for Observer.OnRoundTrips.
type Op uint8

const (
	OpMatch Op = iota + 1
	// OpGifts: Cache.Gifts, and the gift list reads of a Match or
	// MatchCart with MatchOptions.Gifts, reported apart from its OpMatch
	// round trips so gift fetches can be counted on their own.
	OpGifts
	OpRefresh
	OpDelete
	OpInfo
	OpList
)

func (o Op) String() string {
	switch o {
	case OpMatch:
		return "match"
	case OpGifts:
		return "gifts"
	case OpRefresh:
		return "refresh"
	case OpDelete:
		return "delete"
	case OpInfo:
		return "info"
	case OpList:
		return "list"
	}
	return "unknown"
}

// The stored records Observer.OnDecodeError names.
const (
	recordMember = "member"
	recordGifts  = "gifts"
	recordMeta   = "meta"
)

// NearEvent is what happened in the near cache, for Observer.OnNear.
type NearEvent uint8

const (
	// NearHit: a cart line was answered from a held ladder.
	NearHit NearEvent = iota + 1
	// NearMiss: while tracking was up, a line's ladder was not held (or
	// older than MaxStaleness), so it was read from Redis.
	NearMiss
	// NearInstall: a ladder read from Redis is now held.
	NearInstall
	// NearInvalidate: a held ladder's promotion changed: a tracking
	// invalidation or the re-validation pass finding another version (the
	// ladder is re-read, and served meanwhile within a bound), or this
	// process's Refresh or Delete, or a read racing a write seeing another
	// version or none (the ladder is dropped).
	NearInvalidate
	// NearEvict: a held ladder was dropped to stay within the bounds.
	NearEvict
	// NearDropAll: everything held was dropped at once (tracking was lost,
	// re-established, its nodes changed, or Close); promotion is "".
	NearDropAll
)

func (e NearEvent) String() string {
	switch e {
	case NearHit:
		return "hit"
	case NearMiss:
		return "miss"
	case NearInstall:
		return "install"
	case NearInvalidate:
		return "invalidate"
	case NearEvict:
		return "evict"
	case NearDropAll:
		return "drop_all"
	}
	return "unknown"
}

// LoadOutcome is how one read-through of a promotion ended, for
// Observer.OnLoad.
type LoadOutcome uint8

const (
	// LoadLoaded: this read's load called the Loader and stored what it
	// returned.
	LoadLoaded LoadOutcome = iota + 1
	// LoadUnknown: this read's load called the Loader, which said
	// ErrUnknownPromotion; the miss is remembered.
	LoadUnknown
	// LoadRemembered: a remembered miss answered without calling the
	// Loader (this process's, another process's mark in Redis, or a
	// concurrent read's load that found it unknown).
	LoadRemembered
	// LoadShared: the promotion was stored by a load this read did not
	// run: a concurrent read's in this process, or another process's
	// (found stored, or waited for under its lease).
	LoadShared
	// LoadFailed: the read got an ErrLoad (the Loader failed or timed
	// out, Redis failed, the read's ctx ended while it waited, or a
	// failure remembered for Load.FailTTL answered it).
	LoadFailed
	// LoadStale: this read's load called the Loader, but its write-through
	// lost to a writer that came after the load began (a Refresh, a
	// Delete, or a newer revision): nothing was written, and the lines
	// are answered from what Redis holds.
	LoadStale
	// LoadEnded: this read's load called the Loader, which returned a
	// promotion whose End + Grace has passed: it is not written, it is
	// remembered like an unknown ID (Load.MissTTL), and the lines answer
	// ErrNotActive.
	LoadEnded
)

func (o LoadOutcome) String() string {
	switch o {
	case LoadLoaded:
		return "loaded"
	case LoadUnknown:
		return "unknown"
	case LoadRemembered:
		return "remembered"
	case LoadShared:
		return "shared"
	case LoadFailed:
		return "failed"
	case LoadStale:
		return "stale"
	case LoadEnded:
		return "ended"
	}
	return "invalid"
}

// Observer receives the cache's metrics events; wire it to Prometheus,
// OpenTelemetry or expvar. Methods are called synchronously on the hot
// path with no allocation on the library side, so implementations should
// be cheap (an atomic add) and safe for concurrent use. Embed NopObserver
// to implement only some methods.
type Observer interface {
	// OnLookup is called once per cart line (and per Match) with its
	// outcome and the duration of the whole call it was part of. With a
	// Loader, a line that was loaded is reported once, with the answer
	// its re-read gave.
	OnLookup(promotion string, outcome Outcome, d time.Duration)
	// OnRoundTrips reports the round trips one call made (a pipeline is
	// one, even when a Cluster client splits it over several masters).
	OnRoundTrips(op Op, n int)
	// OnRefresh is called once per promotion of a Refresh (Stale when a
	// write older than what Redis holds was refused, Conflict for a
	// RevisionConflictError), and once per Delete (Deleted, Absent or
	// Stale).
	OnRefresh(promotion string, outcome RefreshOutcome)
	// OnDecodeError is called when bytes read from Redis are corrupt;
	// record is the stored record that failed: "member" (a tier or
	// sentinel of the tiers key), "gifts" (a gift list) or "meta".
	OnDecodeError(promotion, record string, err error)
	// OnWarning reports a setting New accepted that an operator should
	// fix (a client without ContextTimeoutEnabled, allowed by
	// Options.AllowNoContextTimeout).
	OnWarning(err error)
	// OnNear reports a near cache event (Options.NearCache): NearHit and
	// NearMiss once per cart line, the others once per ladder.
	OnNear(promotion string, ev NearEvent)
	// OnLoad is called once per promotion a read had to load
	// (Options.Loader), per Match or MatchCart call, when that read has
	// its answer; d is how long the read waited for it.
	OnLoad(promotion string, outcome LoadOutcome, d time.Duration)
	// OnRefreshDone is called once per Refresh call (including those a
	// Loader's read-through makes) with its promotion count, its duration
	// and its error (nil on success).
	OnRefreshDone(n int, d time.Duration, err error)
}

// NopObserver ignores every event. It is the default Observer.
type NopObserver struct{}

func (NopObserver) OnLookup(string, Outcome, time.Duration)   {}
func (NopObserver) OnRoundTrips(Op, int)                      {}
func (NopObserver) OnRefresh(string, RefreshOutcome)          {}
func (NopObserver) OnDecodeError(string, string, error)       {}
func (NopObserver) OnWarning(error)                           {}
func (NopObserver) OnNear(string, NearEvent)                  {}
func (NopObserver) OnLoad(string, LoadOutcome, time.Duration) {}
func (NopObserver) OnRefreshDone(int, time.Duration, error)   {}
