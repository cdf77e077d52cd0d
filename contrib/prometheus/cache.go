package prometheus

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierset/tierset/cache"
)

// DefaultMaxPromotions is CacheOptions.MaxPromotions's default.
const DefaultMaxPromotions = 200

// OtherPromotion is the promotion label of hits on promotions past the cap.
const OtherPromotion = "other"

// CacheOptions configures a CacheCollector.
type CacheOptions struct {
	// Namespace prefixes every metric name. Default "tierset".
	Namespace string
	// MaxPromotions caps the distinct promotion label values of
	// promotion_hits_total: the first MaxPromotions promotions hit get their
	// own series, later ones count under "other", so a catalogue of 100k
	// promotions cannot blow up the scrape. Default DefaultMaxPromotions.
	MaxPromotions int
	// DurationBuckets are lookup_duration_seconds's bounds. Default
	// 100 µs to ~1.6 s, doubling.
	DurationBuckets []float64
	// LoadBuckets are load_duration_seconds's bounds, RefreshBuckets
	// refresh_duration_seconds's. Default 1 ms to ~16 s, doubling (a
	// Loader's default timeout is 5 s).
	LoadBuckets, RefreshBuckets []float64
	// ConstLabels are added to every series. Default none.
	ConstLabels prometheus.Labels
}

// CacheCollector is a cache.Observer that is also a prometheus.Collector.
type CacheCollector struct {
	cache.NopObserver // methods added to cache.Observer later keep compiling

	lookups    *prometheus.CounterVec
	duration   prometheus.Histogram
	hits       *prometheus.CounterVec
	roundTrips *prometheus.CounterVec
	gifts      prometheus.Counter
	refreshes  *prometheus.CounterVec
	corrupt    *prometheus.CounterVec
	warnings   prometheus.Counter
	near       *prometheus.CounterVec
	// nearBy holds near's counters by event: OnNear runs per cart line.
	nearBy     [cache.NearDropAll + 1]prometheus.Counter
	loads      *prometheus.HistogramVec
	refreshDur prometheus.Histogram

	max      int
	mu       sync.RWMutex
	admitted map[string]prometheus.Counter
	other    prometheus.Counter
}

var (
	_ cache.Observer       = (*CacheCollector)(nil)
	_ prometheus.Collector = (*CacheCollector)(nil)
)

// NewCacheCollector returns a collector; register it and pass it as
// cache.Options.Observer.
func NewCacheCollector(o CacheOptions) *CacheCollector {
	if o.Namespace == "" {
		o.Namespace = "tierset"
	}
	if o.MaxPromotions <= 0 {
		o.MaxPromotions = DefaultMaxPromotions
	}
	if o.DurationBuckets == nil {
		o.DurationBuckets = prometheus.ExponentialBuckets(100e-6, 2, 15)
	}
	if o.LoadBuckets == nil {
		o.LoadBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)
	}
	if o.RefreshBuckets == nil {
		o.RefreshBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)
	}
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: o.Namespace, Subsystem: "cache", Name: name, Help: help, ConstLabels: o.ConstLabels}
	}
	c := &CacheCollector{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts(opts("lookups_total",
			"Cart lines looked up, by outcome.")), []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: o.Namespace, Subsystem: "cache",
			Name: "lookup_duration_seconds", Help: "Per cart line, the duration of the Match or MatchCart call it was part of.",
			ConstLabels: o.ConstLabels, Buckets: o.DurationBuckets}),
		hits: prometheus.NewCounterVec(prometheus.CounterOpts(opts("promotion_hits_total",
			"Tier hits per promotion; promotions past the cap count under \"other\".")), []string{"promotion"}),
		roundTrips: prometheus.NewCounterVec(prometheus.CounterOpts(opts("round_trips_total",
			"Redis round trips, by cache call.")), []string{"op"}),
		gifts: prometheus.NewCounter(prometheus.CounterOpts(opts("gift_fetches_total",
			"Calls that fetched gift lists from Redis: Cache.Gifts, or a Match or MatchCart with Gifts."))),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts(opts("refreshes_total",
			"Promotions refreshed, by outcome.")), []string{"outcome"}),
		corrupt: prometheus.NewCounterVec(prometheus.CounterOpts(opts("corrupt_reads_total",
			"Bytes read from Redis that failed to decode, by record.")), []string{"record"}),
		warnings: prometheus.NewCounter(prometheus.CounterOpts(opts("warnings_total",
			"Settings New accepted that an operator should fix."))),
		near: prometheus.NewCounterVec(prometheus.CounterOpts(opts("near_events_total",
			"Near cache events: hit and miss per cart line; install, invalidate, evict per ladder; drop_all when everything held was dropped.")),
			[]string{"event"}),
		loads: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: o.Namespace, Subsystem: "cache",
			Name: "load_duration_seconds", Help: "Read-through loads by outcome (the count is the calls), and how long the read waited.",
			ConstLabels: o.ConstLabels, Buckets: o.LoadBuckets}, []string{"outcome"}),
		refreshDur: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: o.Namespace, Subsystem: "cache",
			Name: "refresh_duration_seconds", Help: "Duration of each Refresh call, whatever its outcome.",
			ConstLabels: o.ConstLabels, Buckets: o.RefreshBuckets}),
		max:      o.MaxPromotions,
		admitted: map[string]prometheus.Counter{},
	}
	c.other = c.hits.WithLabelValues(OtherPromotion)
	// Every label value from the start, so rate() sees a zero before the
	// first event.
	for _, oc := range []cache.Outcome{cache.OutcomeHit, cache.OutcomeNoTier, cache.OutcomeNotFound, cache.OutcomeNotActive,
		cache.OutcomeError, cache.OutcomeDamaged} {
		c.lookups.WithLabelValues(oc.String())
	}
	for _, oc := range []cache.RefreshOutcome{cache.Added, cache.Updated, cache.Unchanged, cache.RefreshFailed, cache.Repaired} {
		c.refreshes.WithLabelValues(oc.String())
	}
	for _, op := range []cache.Op{cache.OpMatch, cache.OpGifts, cache.OpRefresh, cache.OpDelete, cache.OpInfo, cache.OpList} {
		c.roundTrips.WithLabelValues(op.String())
	}
	for _, r := range []string{"member", "gifts", "meta"} {
		c.corrupt.WithLabelValues(r)
	}
	for _, ev := range []cache.NearEvent{cache.NearHit, cache.NearMiss, cache.NearInstall, cache.NearInvalidate,
		cache.NearEvict, cache.NearDropAll} {
		c.nearBy[ev] = c.near.WithLabelValues(ev.String())
	}
	for _, oc := range []cache.LoadOutcome{cache.LoadLoaded, cache.LoadUnknown, cache.LoadRemembered, cache.LoadShared,
		cache.LoadFailed} {
		c.loads.WithLabelValues(oc.String())
	}
	return c
}

// OnLookup counts the line's outcome, its duration and, for a hit, its promotion.
func (c *CacheCollector) OnLookup(promotion string, oc cache.Outcome, d time.Duration) {
	c.lookups.WithLabelValues(oc.String()).Inc()
	c.duration.Observe(d.Seconds())
	if oc == cache.OutcomeHit {
		c.promotion(promotion).Inc()
	}
}

// promotion returns the hit counter of p, or "other" once the cap is reached.
func (c *CacheCollector) promotion(p string) prometheus.Counter {
	c.mu.RLock()
	ctr, ok := c.admitted[p]
	full := len(c.admitted) >= c.max
	c.mu.RUnlock()
	if ok {
		return ctr
	}
	if full || p == OtherPromotion {
		return c.other
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ctr, ok := c.admitted[p]; ok {
		return ctr
	}
	if len(c.admitted) >= c.max {
		return c.other
	}
	ctr = c.hits.WithLabelValues(p)
	c.admitted[p] = ctr
	return ctr
}

// OnRoundTrips counts round trips by call, and gift fetches that went to
// Redis (Cache.Gifts, or a Match or MatchCart with Gifts).
func (c *CacheCollector) OnRoundTrips(op cache.Op, n int) {
	c.roundTrips.WithLabelValues(op.String()).Add(float64(n))
	if op == cache.OpGifts && n > 0 {
		c.gifts.Inc()
	}
}

// OnRefresh counts one refreshed promotion by outcome.
func (c *CacheCollector) OnRefresh(_ string, oc cache.RefreshOutcome) {
	c.refreshes.WithLabelValues(oc.String()).Inc()
}

// OnDecodeError counts a corrupt read by record kind.
func (c *CacheCollector) OnDecodeError(_, record string, _ error) {
	c.corrupt.WithLabelValues(record).Inc()
}

// OnWarning counts a setting an operator should fix.
func (c *CacheCollector) OnWarning(error) { c.warnings.Inc() }

// OnNear counts a near cache event.
func (c *CacheCollector) OnNear(_ string, ev cache.NearEvent) {
	if int(ev) < len(c.nearBy) && c.nearBy[ev] != nil {
		c.nearBy[ev].Inc()
		return
	}
	c.near.WithLabelValues(ev.String()).Inc()
}

// OnLoad observes one read-through's wait under its outcome.
func (c *CacheCollector) OnLoad(_ string, oc cache.LoadOutcome, d time.Duration) {
	c.loads.WithLabelValues(oc.String()).Observe(d.Seconds())
}

// OnRefreshDone observes one Refresh call's duration.
func (c *CacheCollector) OnRefreshDone(_ int, d time.Duration, _ error) {
	c.refreshDur.Observe(d.Seconds())
}

func (c *CacheCollector) collectors() parts {
	return parts{c.lookups, c.duration, c.hits, c.roundTrips, c.gifts, c.refreshes, c.corrupt,
		c.warnings, c.near, c.loads, c.refreshDur}
}

// Describe implements prometheus.Collector.
func (c *CacheCollector) Describe(ch chan<- *prometheus.Desc) { c.collectors().Describe(ch) }

// Collect implements prometheus.Collector.
func (c *CacheCollector) Collect(ch chan<- prometheus.Metric) { c.collectors().Collect(ch) }
