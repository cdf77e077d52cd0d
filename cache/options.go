package cache

import (
	"fmt"
	"strings"
	"time"

	"github.com/tierset/tierset/score"
)

// Limits of one call.
const (
	// MaxCartLines bounds the queries of one MatchCart call. A cart is
	// sent as one pipeline; 1000 lines keep it well under a megabyte.
	MaxCartLines = 1000
	// MaxRefreshBatch bounds the promotions of one Refresh call, because
	// all of them are validated and encoded in memory before the first
	// write.
	MaxRefreshBatch = 10000
	// zaddChunk bounds the members of one ZADD and the fields of one HSET
	// inside a refresh transaction.
	zaddChunk = 1000
)

// Defaults applied by New to zero Options fields.
const (
	DefaultPrefix         = "tierset"
	DefaultMinorDigits    = 2
	DefaultGrace          = 24 * time.Hour
	DefaultMaxRecordBytes = 64 << 10
	DefaultRefreshRetries = 10
	// DefaultDecodeCacheSize is the default Options.DecodeCacheSize.
	DefaultDecodeCacheSize = 1 << 16
)

// Options configures a Cache. The zero value is valid: every zero field
// takes the default its comment names.
type Options struct {
	// Prefix starts every key. Default "tierset". It must not contain
	// braces (they would change the Redis Cluster hash tag), whitespace,
	// control characters or the glob characters * ? [ ] \ (List scans by
	// pattern).
	Prefix string
	// MinorDigits is the number of minor-unit digits used to encode Amount
	// queries (AmountQuery): 2 for USD/CNY, 3 for KWD. Default 2. For a
	// currency without minor units (JPY) set NoMinorUnits instead, since
	// 0 here means "default". A query encoded with digits other than the
	// stored promotion's answers ErrMetricMismatch.
	MinorDigits int
	// NoMinorUnits encodes Amount queries with 0 minor digits (JPY).
	// Default false. MinorDigits must then be 0.
	NoMinorUnits bool
	// Now is the clock that decides whether a promotion is active. Default
	// time.Now. It is the CALLER's clock, not Redis TIME: the cart service
	// decides what "now" is (and tests inject it). Redis's own clock only
	// drives key expiry (End + Grace). Windows compare at millisecond
	// resolution.
	Now func() time.Time
	// Grace is how long keys outlive a promotion's End (so a late reader
	// gets ErrNotActive, not ErrNotFound), and how long a replaced
	// version's gifts stay readable for a reader that fetched its tier just
	// before the refresh. Default 24h.
	Grace time.Duration
	// MaxRecordBytes caps a member record or gift list read from Redis;
	// anything larger is ErrCorrupt, and Refresh refuses to write a record
	// it could not read back. Default 64 KiB.
	MaxRecordBytes int
	// RefreshRetries bounds the WATCH retries of one promotion's refresh
	// transaction. Default 10.
	RefreshRetries int
	// Observer receives metrics events. Default NopObserver.
	Observer Observer
	// DecodeCacheSize bounds the memo of decoded member records, in
	// entries. Default DefaultDecodeCacheSize (65536); negative disables
	// the memo. A member record embeds its promotion's content hash, so a
	// memoized decode never goes stale; only records that decoded cleanly
	// are kept (a corrupt record is refused on every read), and records
	// over 512 bytes are never kept. The memo is 16 shards, each emptied
	// whole when it fills. Memory: an entry holds its record's bytes plus
	// about 160 bytes (BenchmarkMemoFootprint measured 216 bytes per entry
	// for a 59-byte record), so the default holds about 14 MiB for typical
	// records and at most about 45 MiB. A promotion uses one entry per
	// tier read plus its two sentinels.
	DecodeCacheSize int
	// NearCache, when set, holds the whole ladder of every promotion read
	// in process, kept true by Redis client tracking; see NearCacheOptions
	// for its bounds and defaults. Default nil: off. It needs a
	// *redis.Client or *redis.ClusterClient (else ErrBadOptions).
	NearCache *NearCacheOptions
	// Loader, when set, loads a promotion a read finds missing from the
	// source of truth and writes it through Refresh (read-through); see
	// Loader. Default nil: off.
	Loader Loader
	// Load tunes the read-through (leases, remembered misses, timeouts);
	// zero fields take the defaults LoadOptions names.
	Load LoadOptions
}

func (o Options) withDefaults() (Options, error) {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(o.Prefix, "{}*?[]\\") {
		return o, fmt.Errorf("%w: prefix %q contains a brace or glob character", ErrBadOptions, o.Prefix)
	}
	for _, r := range o.Prefix {
		if r <= ' ' || r == 0x7f {
			return o, fmt.Errorf("%w: prefix %q contains whitespace or a control character", ErrBadOptions, o.Prefix)
		}
	}
	switch {
	case o.NoMinorUnits && o.MinorDigits != 0:
		return o, fmt.Errorf("%w: NoMinorUnits with MinorDigits %d", ErrBadOptions, o.MinorDigits)
	case o.NoMinorUnits:
	case o.MinorDigits == 0:
		o.MinorDigits = DefaultMinorDigits
	case o.MinorDigits < 0 || o.MinorDigits > score.MaxMinorDigits:
		return o, fmt.Errorf("%w: MinorDigits %d (allowed 1..%d, or NoMinorUnits)", ErrBadOptions, o.MinorDigits, score.MaxMinorDigits)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.Grace == 0:
		o.Grace = DefaultGrace
	case o.Grace < time.Millisecond:
		return o, fmt.Errorf("%w: Grace %v (must be ≥ 1ms)", ErrBadOptions, o.Grace)
	}
	switch {
	case o.MaxRecordBytes == 0:
		o.MaxRecordBytes = DefaultMaxRecordBytes
	case o.MaxRecordBytes < 0:
		return o, fmt.Errorf("%w: MaxRecordBytes %d", ErrBadOptions, o.MaxRecordBytes)
	}
	switch {
	case o.RefreshRetries == 0:
		o.RefreshRetries = DefaultRefreshRetries
	case o.RefreshRetries < 0:
		return o, fmt.Errorf("%w: RefreshRetries %d", ErrBadOptions, o.RefreshRetries)
	}
	if o.Observer == nil {
		o.Observer = NopObserver{}
	}
	if o.DecodeCacheSize == 0 {
		o.DecodeCacheSize = DefaultDecodeCacheSize
	}
	return o, nil
}

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
	}
	return "unknown"
}

// RefreshOutcome is what Refresh did to one promotion.
type RefreshOutcome uint8

const (
	// Added: the promotion was not stored before.
	Added RefreshOutcome = iota + 1
	// Updated: a different version was replaced.
	Updated
	// Unchanged: the stored version has the same content hash; nothing
	// was written.
	Unchanged
	// RefreshFailed: the write failed (reported to the Observer only).
	RefreshFailed
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
	}
	return "unknown"
}

// Op names a Cache call for Observer.OnRoundTrips.
type Op uint8

const (
	OpMatch Op = iota + 1
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

// Record names what failed to decode, for Observer.OnDecodeError.
type Record uint8

const (
	RecordMember Record = iota + 1
	RecordGifts
	RecordMeta
)

func (r Record) String() string {
	switch r {
	case RecordMember:
		return "member"
	case RecordGifts:
		return "gifts"
	case RecordMeta:
		return "meta"
	}
	return "unknown"
}

// Observer receives the cache's metrics events; wire it to Prometheus,
// OpenTelemetry or expvar. Methods are called synchronously on the hot
// path with no allocation on the library side, so implementations should
// be cheap (an atomic add) and safe for concurrent use. Embed NopObserver
// to implement only some methods.
type Observer interface {
	// OnLookup is called once per cart line (and per Match) with its
	// outcome and the duration of the whole call it was part of.
	OnLookup(promotion string, outcome Outcome, d time.Duration)
	// OnRoundTrips reports the round trips one call made (a pipeline is
	// one, even when a Cluster client splits it over several masters).
	OnRoundTrips(op Op, n int)
	// OnRefresh is called once per promotion of a Refresh.
	OnRefresh(promotion string, outcome RefreshOutcome)
	// OnDecodeError is called when bytes read from Redis are corrupt.
	OnDecodeError(promotion string, rec Record, err error)
}

// NopObserver ignores every event. It is the default Observer.
type NopObserver struct{}

func (NopObserver) OnLookup(string, Outcome, time.Duration) {}
func (NopObserver) OnRoundTrips(Op, int)                    {}
func (NopObserver) OnRefresh(string, RefreshOutcome)        {}
func (NopObserver) OnDecodeError(string, Record, error)     {}
