package cache

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierset/tierset/gradient"
)

// Defaults of NearCacheOptions.
const (
	// DefaultNearMaxPromotions is the default NearCacheOptions.MaxPromotions.
	DefaultNearMaxPromotions = 10000
	// DefaultNearMaxBytes is the default NearCacheOptions.MaxBytes (64 MiB).
	DefaultNearMaxBytes = 64 << 20
	// DefaultNearMaxStaleness is the default NearCacheOptions.MaxStaleness.
	DefaultNearMaxStaleness = 2 * time.Second
	// DefaultNearMaxTiers is the default NearCacheOptions.MaxTiers.
	DefaultNearMaxTiers = 10000
)

// NearCacheOptions bounds the in-process near cache (Options.NearCache).
// Zero fields take the defaults their comments name.
type NearCacheOptions struct {
	// MaxPromotions bounds the ladders held. Default 10000. When full, the
	// least recently used ladder of the same shard is dropped (the cache
	// is split into nearShards shards, each holding its share of the
	// bounds).
	MaxPromotions int
	// MaxBytes bounds the memory the ladders and gift lists account for:
	// record bytes plus a fixed overhead per tier (nearTierOverhead).
	// Default 64 MiB. A promotion larger than MaxBytes/nearShards is not
	// held (its lines take the Redis path); at the default that is 8 MiB,
	// about 25,000 tiers.
	MaxBytes int64
	// MaxStaleness is the hard bound on the age of an answer: a ladder is
	// served only if Redis confirmed its version less than MaxStaleness
	// ago. A background pass re-reads every held version every
	// MaxStaleness/2 (one pipelined HGET per ladder), so hot ladders stay
	// near; it bounds staleness even if an invalidation were lost. Default
	// 2s; at least 10ms.
	MaxStaleness time.Duration
	// MaxTiers: a promotion with more tiers than this is never held; its
	// lines take the Redis path. Default 10000.
	MaxTiers int
}

// nearTierOverhead is the accounted size of one held tier beyond its
// record bytes: the decoded record, its threshold and the slice slots.
const nearTierOverhead = 256

// nearStripes is the number of generation counters. A counter per key
// that ever was read would grow without bound; striped counters are fixed
// memory, and a collision only makes a read skip its install.
const nearStripes = 4096

// nearShards splits the cache into independently locked parts; each holds
// its share of the bounds, so a shard stays large enough for a big
// ladder.
const nearShards = 8

func (o *NearCacheOptions) withDefaults() (NearCacheOptions, error) {
	n := *o
	if err := orDefault("NearCache.MaxPromotions", &n.MaxPromotions, DefaultNearMaxPromotions, 0); err != nil {
		return n, err
	}
	if err := orDefault("NearCache.MaxBytes", &n.MaxBytes, DefaultNearMaxBytes, 0); err != nil {
		return n, err
	}
	if err := orDefault("NearCache.MaxStaleness", &n.MaxStaleness, DefaultNearMaxStaleness, 10*time.Millisecond); err != nil {
		return n, err
	}
	if err := orDefault("NearCache.MaxTiers", &n.MaxTiers, DefaultNearMaxTiers, 0); err != nil {
		return n, err
	}
	return n, nil
}

// ladder is one promotion's whole tiers ZSET of one version, decoded.
// Everything but validated, used and gifts is immutable once built.
type ladder struct {
	id      string
	h       uint64 // near.hash(id), set at install
	version string
	floor   *decoded
	// scores are the tiers' scores, ascending, and hits the tiers as
	// answers, by the same index: the search runs over one dense slice,
	// not a pointer per tier, and an answer is a copy, not a build.
	scores []int64
	hits   []TierHit
	bytes  int64
	// validated is when (UnixNano, taken before the read was sent) Redis
	// last confirmed this version.
	validated atomic.Int64
	// used is the shard tick of the last read, for LRU eviction; stored
	// only when it changes, so a hot ladder's line is not dirtied per read.
	used atomic.Uint64
	// gifts is this version's gift lists by tier ID, once fetched; a
	// version is immutable, so they need no invalidation of their own.
	gifts atomic.Pointer[map[string][]gradient.Gift]
}

// near is the in-process ladder cache. Entries are installed only while
// tracking is up, and only by a read whose snapshot (epoch and its
// promotion's generation stripe) is unchanged at install time.
type near struct {
	opt    NearCacheOptions
	obs    Observer
	seed   maphash.Seed
	shards []nearShard
	gens   [nearStripes]atomic.Uint64
	// epoch changes whenever tracking goes down or up, or the set of
	// tracked nodes changes: everything installed under an older epoch is
	// gone, and reads that started under it install nothing.
	epoch atomic.Uint64
	up    atomic.Bool

	hits, misses, drops atomic.Int64
	// lost counts the times tracking went down after being up.
	lost atomic.Int64
	// loseInvalidations makes the tracker ignore invalidation messages,
	// as if they were lost in transit (tests of the MaxStaleness bound).
	loseInvalidations atomic.Bool

	trackOnce sync.Once
	tracker   *tracker
}

type nearShard struct {
	mu    sync.RWMutex
	m     map[uint64]*ladder  // by the hash of the ID, so a read hashes its ID once; a collision is a miss
	big   map[string]struct{} // promotions over MaxTiers, until invalidated
	bytes int64
	tick  atomic.Uint64
	maxN  int
	maxB  int64
	_     [32]byte
}

// nearSnap is what a read saw before it went to Redis.
type nearSnap struct {
	epoch uint64
	gen   uint64
	at    int64 // UnixNano
}

func newNear(o NearCacheOptions, obs Observer) *near {
	// A power of two, so that a shard is picked with a mask.
	n := 1 << (bits.Len(uint(min(nearShards, max(1, o.MaxPromotions)))) - 1)
	nc := &near{opt: o, obs: obs, seed: maphash.MakeSeed(), shards: make([]nearShard, n)}
	for i := range nc.shards {
		sh := &nc.shards[i]
		sh.m = make(map[uint64]*ladder)
		sh.big = make(map[string]struct{})
		sh.maxN = max(1, o.MaxPromotions/n)
		sh.maxB = o.MaxBytes / int64(n)
	}
	return nc
}

func (nc *near) hash(id string) uint64 { return maphash.String(nc.seed, id) }

func (nc *near) shard(h uint64) *nearShard { return &nc.shards[h&uint64(len(nc.shards)-1)] }

func (nc *near) stripe(h uint64) *atomic.Uint64 { return &nc.gens[(h>>32)%nearStripes] }

// get returns the held ladder of id if it is fresh at nowNs. big reports a
// promotion known to exceed MaxTiers.
func (nc *near) get(id string, nowNs int64) (l *ladder, big bool) {
	h := nc.hash(id)
	sh := nc.shard(h)
	sh.mu.RLock()
	if l = sh.m[h]; l != nil && l.id != id {
		l = nil
	}
	if l == nil {
		_, big = sh.big[id]
	}
	sh.mu.RUnlock()
	if l == nil {
		return nil, big
	}
	if nowNs-l.validated.Load() >= int64(nc.opt.MaxStaleness) {
		return nil, false
	}
	if t := sh.tick.Load(); l.used.Load() != t {
		l.used.Store(t)
	}
	return l, false
}

// snap records the state a read must still find when it installs.
func (nc *near) snap(id string) nearSnap {
	return nearSnap{epoch: nc.epoch.Load(), gen: nc.stripe(nc.hash(id)).Load(), at: time.Now().UnixNano()}
}

// install holds l, unless tracking is down or changed, or id was
// invalidated, since s was taken. It evicts least recently used ladders
// of the shard to stay within its bounds and refuses a ladder larger than
// a shard's byte share. Its events reach the Observer after the lock is
// released, so an Observer may call NearStats.
func (nc *near) install(l *ladder, s nearSnap) bool {
	h := nc.hash(l.id)
	sh := nc.shard(h)
	var evicted []string
	sh.mu.Lock()
	if !nc.up.Load() || nc.epoch.Load() != s.epoch || nc.stripe(h).Load() != s.gen || l.bytes > sh.maxB {
		sh.mu.Unlock()
		return false
	}
	l.h = h
	l.validated.Store(s.at)
	l.used.Store(sh.tick.Add(1))
	if old := sh.m[h]; old != nil {
		sh.bytes -= old.bytes
		delete(sh.m, h)
	}
	for len(sh.m) >= sh.maxN || sh.bytes+l.bytes > sh.maxB {
		if id := sh.evictOldest(); id != "" {
			evicted = append(evicted, id)
		}
		nc.drops.Add(1)
	}
	sh.m[h] = l
	sh.bytes += l.bytes
	sh.mu.Unlock()
	for _, id := range evicted {
		nc.obs.OnNear(id, NearEvict)
	}
	nc.obs.OnNear(l.id, NearInstall)
	return true
}

// markBig remembers that id exceeds MaxTiers, under the same checks as
// install, so its lines skip the ladder read until it changes.
func (nc *near) markBig(id string, s nearSnap) {
	h := nc.hash(id)
	sh := nc.shard(h)
	sh.mu.Lock()
	if nc.up.Load() && nc.epoch.Load() == s.epoch && nc.stripe(h).Load() == s.gen && len(sh.big) < sh.maxN {
		sh.big[id] = struct{}{}
	}
	sh.mu.Unlock()
}

// evictOldest drops the least recently used ladder and returns its ID
// ("" when none is held).
func (sh *nearShard) evictOldest() string {
	var victim *ladder
	for _, l := range sh.m {
		if victim == nil || l.used.Load() < victim.used.Load() {
			victim = l
		}
	}
	if victim == nil {
		return ""
	}
	sh.bytes -= victim.bytes
	delete(sh.m, victim.h)
	return victim.id
}

// addGifts accounts a version's gift lists to l, if l is still held;
// returns false (and stores nothing) when they would break the bounds.
func (nc *near) addGifts(l *ladder, gifts map[string][]gradient.Gift, size int64) bool {
	sh := nc.shard(l.h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[l.h] != l || l.gifts.Load() != nil || sh.bytes+size > sh.maxB {
		return false
	}
	l.bytes += size
	sh.bytes += size
	l.gifts.Store(&gifts)
	return true
}

// invalidate drops id's ladder and makes every read of id in flight skip
// its install. The generation is bumped before the delete, both seen by
// install under the shard lock, so no interleaving keeps an old ladder.
func (nc *near) invalidate(id string) {
	h := nc.hash(id)
	nc.stripe(h).Add(1)
	sh := nc.shard(h)
	sh.mu.Lock()
	l := sh.m[h]
	if l != nil && l.id == id {
		sh.bytes -= l.bytes
		delete(sh.m, h)
	} else {
		l = nil
	}
	delete(sh.big, id)
	sh.mu.Unlock()
	if l != nil {
		nc.obs.OnNear(id, NearInvalidate)
	}
}

// setUp records whether tracking covers every node. Any change drops
// everything held: entries held before a drop may have missed
// invalidations, and a new node's keys were never tracked.
func (nc *near) setUp(up bool) {
	if was := nc.up.Swap(up); was && !up {
		nc.lost.Add(1)
	}
	nc.dropAll()
}

// dropAll reports NearDropAll only when something was held: tracking's
// first establishment drops nothing.
func (nc *near) dropAll() {
	nc.epoch.Add(1)
	held := false
	for i := range nc.shards {
		sh := &nc.shards[i]
		sh.mu.Lock()
		held = held || len(sh.m) > 0 || len(sh.big) > 0
		clear(sh.m)
		clear(sh.big)
		sh.bytes = 0
		sh.mu.Unlock()
	}
	if held {
		nc.obs.OnNear("", NearDropAll)
	}
}

// each calls fn for every held ladder (for re-validation).
func (nc *near) each(fn func(*ladder)) {
	for i := range nc.shards {
		sh := &nc.shards[i]
		sh.mu.RLock()
		for _, l := range sh.m {
			fn(l)
		}
		sh.mu.RUnlock()
	}
}

// revalidated moves l's confirmation to at, if l is still the ladder held.
func (nc *near) revalidated(l *ladder, at int64) {
	sh := nc.shard(l.h)
	sh.mu.RLock()
	if sh.m[l.h] == l && l.validated.Load() < at {
		l.validated.Store(at)
	}
	sh.mu.RUnlock()
}

// NearStats describes the near cache (zero when Options.NearCache is nil).
type NearStats struct {
	// Tracking: invalidation tracking covers every node, so ladders are
	// served and installed.
	Tracking bool
	// Promotions and Bytes are what is held now (Bytes as accounted
	// against NearCacheOptions.MaxBytes).
	Promotions int
	Bytes      int64
	// Hits and Misses count cart lines answered from memory and lines
	// that went to Redis while tracking was up; Evictions counts ladders
	// dropped to stay within the bounds.
	Hits, Misses, Evictions int64
	// TrackingLost counts the times tracking went down after being
	// established (a dropped connection, a restart, a failover, a
	// topology change): each time, everything held was dropped.
	TrackingLost int64
}

// NearStats returns the near cache's counters.
func (c *Cache) NearStats() NearStats {
	nc := c.near
	if nc == nil {
		return NearStats{}
	}
	st := NearStats{Tracking: nc.up.Load(), Hits: nc.hits.Load(), Misses: nc.misses.Load(), Evictions: nc.drops.Load(), TrackingLost: nc.lost.Load()}
	for i := range nc.shards {
		sh := &nc.shards[i]
		sh.mu.RLock()
		st.Promotions += len(sh.m)
		st.Bytes += sh.bytes
		sh.mu.RUnlock()
	}
	return st
}
