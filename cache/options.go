package cache

import (
	"time"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/keyname"
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
	defaultGrace          = 24 * time.Hour
	defaultMaxRecordBytes = 64 << 10
	defaultRefreshRetries = 10
	// defaultTombstoneTTL is the default Options.TombstoneTTL.
	defaultTombstoneTTL = 24 * time.Hour
	// defaultDecodeCacheSize is the default Options.DecodeCacheSize.
	defaultDecodeCacheSize = 1 << 16
)

// Options configures a Cache. The zero value is valid: every zero field
// takes the default its comment names.
type Options struct {
	// Prefix starts every key. Default "tierset". It must not contain
	// braces (they would change the Redis Cluster hash tag), whitespace,
	// control characters or the glob characters * ? [ ] \ (List scans by
	// pattern), and is at most 128 bytes of valid UTF-8 (keyname.Check).
	Prefix string
	// MinorDigits is the currency's minor-unit digits, used to encode
	// Amount queries (AmountQuery), read like gradient.Promotion's:
	// 0 means gradient.DefaultMinorDigits (2, as for USD or CNY),
	// gradient.NoMinorDigits a currency without minor units (JPY), 1..9
	// that many. Defaults to 2. An amount query against a promotion
	// stored with other digits answers ErrDigitsMismatch.
	MinorDigits int
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
	// TombstoneTTL is how long an ordered Delete (revision > 0) keeps the
	// revision it deleted at, in the promotion's :tomb key, after the
	// promotion is gone: until then a write of that revision or an older
	// one is Stale, so a read-through load or a warm-up that read the
	// promotion before the delete cannot bring it back. It must outlive
	// every writer that could still hold an older read: a read-through
	// load lives at most Load.LeaseTTL (with a Loader, New refuses a
	// TombstoneTTL not above it; other processes' loaders must keep theirs
	// below it too), a warm-up job as long as its run. Default 24h; a
	// tombstone costs about 100 bytes of Redis memory.
	TombstoneTTL time.Duration
	// RefreshRetries bounds the WATCH retries of one promotion's refresh
	// transaction. Default 10.
	RefreshRetries int
	// Observer receives metrics events. Default NopObserver. A typed nil
	// (a nil pointer in the interface) is ErrInvalid.
	Observer Observer
	// AllowNoContextTimeout accepts a *redis.Client, *redis.ClusterClient
	// or *redis.Ring built with ContextTimeoutEnabled false, reporting it
	// once to Observer.OnWarning. Default false: New refuses such a client
	// with ErrInvalid (Field "options"), because with it go-redis ignores ctx deadlines
	// on the socket and a Redis stall holds a cart lookup for ReadTimeout
	// (3 s by default) instead of the caller's budget; a refusal shows at
	// the first start, a silent stall only in an incident.
	AllowNoContextTimeout bool
	// DecodeCacheSize bounds the memo of decoded member records, in
	// entries. Defaults to 65536; negative disables
	// the memo. A member record embeds its promotion's content hash, so a
	// memoized decode never goes stale; only records that decoded cleanly
	// are kept (a corrupt record is refused on every read), and records
	// over 512 bytes are never kept. The memo is 16 shards, each emptied
	// whole when it fills. Memory: an entry holds its record's bytes plus
	// a fixed overhead (measured in docs/benchmarks.md, "Figures behind
	// the code"); records over 512 bytes are never kept, which bounds the
	// whole memo. A promotion uses one entry per tier read plus its two
	// sentinels.
	DecodeCacheSize int
	// NearCache, when set, holds the whole ladder of every promotion read
	// in process, kept true by Redis client tracking; see NearCacheOptions
	// for its bounds and defaults. Default nil: off. It needs a
	// *redis.Client or a *redis.ClusterClient that reads from masters
	// (else ErrInvalid), and Close, which stops its tracking
	// connections.
	NearCache *NearCacheOptions
	// Loader, when set, loads a promotion a read finds missing from the
	// source of truth and writes it through Refresh (read-through); see
	// Loader. Default nil: off. A typed nil (a nil LoaderFunc or pointer)
	// is ErrInvalid.
	Loader Loader
	// Load tunes the read-through (leases, remembered misses, timeouts);
	// zero fields take the defaults LoadOptions names.
	Load LoadOptions
}

func (o Options) withDefaults() (Options, error) {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if err := keyname.Check(o.Prefix); err != nil {
		return o, invalid("options", "prefix: %w", err)
	}
	if o.MinorDigits < gradient.NoMinorDigits || o.MinorDigits > score.MaxMinorDigits {
		return o, invalid("options", "MinorDigits %d (allowed 1..%d, 0 for the default %d, or gradient.NoMinorDigits)",
			o.MinorDigits, score.MaxMinorDigits, gradient.DefaultMinorDigits)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := orDefault("Grace", &o.Grace, defaultGrace, time.Millisecond); err != nil {
		return o, err
	}
	if err := orDefault("MaxRecordBytes", &o.MaxRecordBytes, defaultMaxRecordBytes, 0); err != nil {
		return o, err
	}
	if err := orDefault("RefreshRetries", &o.RefreshRetries, defaultRefreshRetries, 0); err != nil {
		return o, err
	}
	if err := orDefault("TombstoneTTL", &o.TombstoneTTL, defaultTombstoneTTL, time.Millisecond); err != nil {
		return o, err
	}
	switch {
	case o.Observer == nil:
		o.Observer = NopObserver{}
	case isNil(o.Observer):
		return o, invalid("options", "Observer is a nil %T", o.Observer)
	}
	if o.Loader != nil && isNil(o.Loader) {
		return o, invalid("options", "Loader is a nil %T", o.Loader)
	}
	if o.DecodeCacheSize == 0 {
		o.DecodeCacheSize = defaultDecodeCacheSize
	}
	return o, nil
}

// orDefault sets the option *v to def when it is zero (the zero value
// is the default) and refuses a value under least, naming the option.
func orDefault[T ~int | ~int64](name string, v *T, def, least T) error {
	switch {
	case *v == 0:
		*v = def
	case *v < least:
		return invalid("options", "%s %v (must be ≥ %v)", name, *v, least)
	}
	return nil
}
