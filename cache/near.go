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
	// defaultNearMaxPromotions is the default NearCacheOptions.MaxPromotions.
	defaultNearMaxPromotions = 20000
	// defaultNearMaxBytes is the default NearCacheOptions.MaxBytes (64 MiB).
	defaultNearMaxBytes = 64 << 20
	// defaultNearMaxStaleness is the default NearCacheOptions.MaxStaleness.
	defaultNearMaxStaleness = 2 * time.Second
	// defaultNearMaxTiers is the default NearCacheOptions.MaxTiers.
	defaultNearMaxTiers = 10000
)

// NearCacheOptions bounds the in-process near cache (Options.NearCache).
// Zero fields take the defaults their comments name.
type NearCacheOptions struct {
	// MaxPromotions bounds the ladders held. Default 20000 (room for
	// 10,000 promotions over the shards, which a hash fills unevenly); negative is
	// ErrInvalid, any positive value is accepted. When full, the
	// least recently used ladder of the same shard is dropped (the cache
	// is split into nearShards shards, or the largest power of two not
	// above MaxPromotions when that is fewer, each holding its share of
	// the bounds, rounded down: a MaxPromotions of 15 holds at most 8).
	MaxPromotions int
	// MaxBytes bounds the memory the ladders and gift lists account for:
	// record bytes plus a fixed overhead per tier (nearTierOverhead).
	// Default 64 MiB; negative is ErrInvalid, any positive value is
	// accepted. A promotion larger than its shard's share (MaxBytes
	// divided by the shard count, see MaxPromotions) is not held (its
	// lines take the Redis path); at the defaults that is 8 MiB, about
	// 25,000 tiers.
	MaxBytes int64
	// MaxStaleness is the hard bound on the age of an answer: a ladder is
	// served only if Redis confirmed it less than MaxStaleness ago: by a
	// PING on every tracking connection, answered after every earlier
	// invalidation (sent every MaxStaleness/4, no command per ladder), and
	// for the ladders read since the previous pass by a re-read of their
	// version every MaxStaleness/2 (one pipelined HGET each). That pass
	// bounds the staleness of the ladders read in every pass interval
	// even if an invalidation were lost, as long as it runs within
	// MaxStaleness/2 of its turn: a lost invalidation is found by it
	// alone, and the PINGs confirm the ladder meanwhile. A ladder not
	// read for a whole interval is confirmed by the PINGs alone, which
	// vouch for it only as far as invalidations arrive. An invalidated
	// ladder is served for at most min(1 s, MaxStaleness/2) while it is
	// re-read, and never past MaxStaleness from its own last read or
	// version check. Defaults to 2s; at least 10ms (less, or negative, is
	// ErrInvalid); any larger value is accepted.
	MaxStaleness time.Duration
	// MaxTiers: a promotion with more tiers than this is never held; its
	// lines take the Redis path. Default 10000, which is also the most it
	// can be: a value above gradient.MaxTiers means gradient.MaxTiers,
	// since Refresh writes no more tiers than that.
	MaxTiers int
}

// nearTierOverhead is the accounted size of one held tier beyond its
// record bytes: the decoded record, its threshold and the slice slots.
const nearTierOverhead = 256

// nearShards splits the cache into independently locked parts; each holds
// its share of the bounds, so a shard stays large enough for a big
// ladder.
const nearShards = 8

func (o *NearCacheOptions) withDefaults() (NearCacheOptions, error) {
	n := *o
	if err := orDefault("NearCache.MaxPromotions", &n.MaxPromotions, defaultNearMaxPromotions, 0); err != nil {
		return n, err
	}
	if err := orDefault("NearCache.MaxBytes", &n.MaxBytes, defaultNearMaxBytes, 0); err != nil {
		return n, err
	}
	if err := orDefault("NearCache.MaxStaleness", &n.MaxStaleness, defaultNearMaxStaleness, 10*time.Millisecond); err != nil {
		return n, err
	}
	if err := orDefault("NearCache.MaxTiers", &n.MaxTiers, defaultNearMaxTiers, 0); err != nil {
		return n, err
	}
	// Saturated: the ladder read asks for MaxTiers+2 members, which must
	// not overflow into a negative (empty) range.
	n.MaxTiers = min(n.MaxTiers, gradient.MaxTiers)
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
	// staleAt is 0 while no invalidation of the promotion is unresolved;
	// else when (UnixNano) the first unresolved one arrived. It is served
	// for staleServe after that, while its re-read (near_refresh.go) is
	// in flight; under the shard lock for writes.
	staleAt atomic.Int64
}

// near is the in-process ladder cache. Entries are installed only while
// tracking is up, and only by a read (a fill) during which nothing
// happened to its promotion: no invalidation, no other fill settled (see
// settle).
type near struct {
	opt    NearCacheOptions
	obs    Observer
	seed   maphash.Seed
	shards []nearShard
	// epoch changes whenever tracking goes down or up, or the set of
	// tracked nodes changes: everything installed under an older epoch is
	// gone, and reads that started under it install nothing.
	epoch atomic.Uint64
	up    atomic.Bool
	// confirmed is when (UnixNano) every tracking connection last proved
	// that all invalidations of writes committed before then had arrived
	// (a PING answered, near_tracking.go): a held ladder with no
	// invalidation since is confirmed as of then, without a read of its
	// own. 0 while tracking is down.
	confirmed atomic.Int64

	hits, misses, drops atomic.Int64
	// ladderReads counts whole-ladder reads (ZRANGE) sent, checks the
	// version checks of re-reads and adopted the re-reads that found the
	// held content unchanged (a republish with the same content).
	ladderReads, checks, adopted atomic.Int64
	// pending is the set of promotions whose ladders await a background
	// re-read after an invalidation; wake (capacity 1) tells the
	// refresher.
	pendMu  sync.Mutex
	pending map[string]struct{}
	wake    chan struct{}
	// lost counts the times tracking went down after being up.
	lost atomic.Int64
	// loseInvalidations makes the tracker ignore invalidation messages,
	// as if they were lost in transit (tests of the MaxStaleness bound).
	loseInvalidations atomic.Bool
	// passLate delays each version pass by that many ns past its turn,
	// and holdRereads drops the background re-reads, as if their
	// goroutines were starved (tests of the MaxStaleness bound).
	passLate    atomic.Int64
	holdRereads atomic.Bool

	trackOnce sync.Once
	tracker   *tracker
}

type nearShard struct {
	mu  sync.RWMutex
	m   map[uint64]*ladder  // by the hash of the ID, so a read hashes its ID once; a collision is a miss
	big map[string]struct{} // promotions over MaxTiers, until invalidated
	// fills is the generation of each promotion with a ladder read in
	// flight, dropped when its last read settles: a counter per promotion
	// ever read would grow without bound, one per read in flight cannot.
	fills map[string]*keyFills
	// flights is the re-read in flight of each held ladder's promotion
	// (near_refresh.go): one per promotion, whoever asks.
	flights map[string]*refreshFlight
	bytes   int64
	tick    atomic.Uint64
	// lastPass is the tick at the start of the latest re-validation
	// pass: only a ladder whose used tick is at least that was read since,
	// and is checked by the next pass.
	lastPass atomic.Uint64
	maxN     int
	maxB     int64
	_        [32]byte
}

// keyFills is one promotion's generation while ladder reads of it are in
// flight. Every invalidation of the promotion and every settled read
// advances it, under the shard lock.
type keyFills struct {
	gen      uint64
	inFlight int
}

// nearFill is one ladder read, from before it is sent until it settles:
// what it must still find for its reply to be installed.
type nearFill struct {
	id    string
	h     uint64
	epoch uint64
	key   *keyFills
	gen   uint64 // key.gen when the read was sent
	at    int64  // UnixNano, before the read was sent
	done  bool   // settled or abandoned; read and written only by the read's goroutine
}

func newNear(o NearCacheOptions, obs Observer) *near {
	// A power of two, so that a shard is picked with a mask.
	n := 1 << (bits.Len(uint(min(nearShards, max(1, o.MaxPromotions)))) - 1)
	nc := &near{opt: o, obs: obs, seed: maphash.MakeSeed(), shards: make([]nearShard, n),
		pending: map[string]struct{}{}, wake: make(chan struct{}, 1)}
	for i := range nc.shards {
		sh := &nc.shards[i]
		sh.m = make(map[uint64]*ladder)
		sh.big = make(map[string]struct{})
		sh.fills = make(map[string]*keyFills)
		sh.flights = make(map[string]*refreshFlight)
		sh.maxN = max(1, o.MaxPromotions/n)
		sh.maxB = o.MaxBytes / int64(n)
	}
	return nc
}

func (nc *near) hash(id string) uint64 { return maphash.String(nc.seed, id) }

func (nc *near) shard(h uint64) *nearShard { return &nc.shards[h&uint64(len(nc.shards)-1)] }

// nearState is what lookup found for a promotion.
type nearState uint8

const (
	nearMissing nearState = iota // nothing held: read the ladder
	nearServe                    // a ladder that may be served
	nearBig                      // known to exceed MaxTiers: the Redis path
	nearReread                   // held but not servable: re-read it (near_refresh.go)
)

// get returns the held ladder of id if it may be served at nowNs. big
// reports a promotion known to exceed MaxTiers.
func (nc *near) get(id string, nowNs int64) (l *ladder, big bool) {
	l, st := nc.lookup(id, nowNs)
	if st != nearServe {
		l = nil
	}
	return l, st == nearBig
}

// lookup finds id's ladder. A held ladder is served only if Redis
// confirmed its version less than MaxStaleness ago and no invalidation
// of it has been unresolved for staleServe or longer; else it is
// nearReread (and returned, so the re-read can compare against it).
func (nc *near) lookup(id string, nowNs int64) (*ladder, nearState) {
	h := nc.hash(id)
	sh := nc.shard(h)
	big := false
	sh.mu.RLock()
	l := sh.m[h]
	if l != nil && l.id != id {
		l = nil
	}
	if l == nil {
		_, big = sh.big[id]
	}
	sh.mu.RUnlock()
	if l == nil {
		if big {
			return nil, nearBig
		}
		return nil, nearMissing
	}
	if t := sh.tick.Load(); l.used.Load() != t {
		l.used.Store(t)
	}
	if nowNs-max(l.validated.Load(), nc.confirmed.Load()) >= int64(nc.opt.MaxStaleness) {
		return l, nearReread
	}
	// An invalidated ladder is served while its re-read is in flight for
	// staleServe, but never past MaxStaleness from its own last read or
	// version check: the tracking PINGs (nc.confirmed) say nothing of a
	// ladder known to be replaced. Without that cap a lost invalidation
	// the version pass found MaxStaleness/2 after the write was served
	// staleServe more, the whole bound with no room for a late pass.
	if s := l.staleAt.Load(); s != 0 && (nowNs-s >= int64(nc.staleServe()) || nowNs-l.validated.Load() >= int64(nc.opt.MaxStaleness)) {
		return l, nearReread
	}
	return l, nearServe
}

// begin starts a ladder read of id: call it before the read is sent, and
// settle (or abandon) the result exactly once.
func (nc *near) begin(id string) *nearFill {
	h := nc.hash(id)
	sh := nc.shard(h)
	f := &nearFill{id: id, h: h, epoch: nc.epoch.Load(), at: time.Now().UnixNano()}
	sh.mu.Lock()
	k := sh.fills[id]
	if k == nil {
		k = &keyFills{}
		sh.fills[id] = k
	}
	k.inFlight++
	f.key, f.gen = k, k.gen
	sh.mu.Unlock()
	return f
}

// release ends f's record; caller holds the shard lock.
func (sh *nearShard) release(f *nearFill) {
	f.done = true
	if f.key.inFlight--; f.key.inFlight == 0 {
		delete(sh.fills, f.id)
	}
}

// abandon ends a read whose reply never came (a transport error): it
// answered nothing, so it changes nothing. A settled read is left alone;
// f.done needs no lock, as one goroutine owns a read from begin to end.
func (nc *near) abandon(f *nearFill) {
	if f.done {
		return
	}
	sh := nc.shard(f.h)
	sh.mu.Lock()
	sh.release(f)
	sh.mu.Unlock()
}

// settle ends read f, whose reply the caller is about to answer from: l
// is the ladder it read, nil when the promotion was absent or the reply
// cannot be held (a Redis error, a corrupt ladder); big reports a
// promotion over MaxTiers. It reports whether l is now held.
//
// Versions are content hashes and do not order, so the order of replies
// is known only from what happened in process while f was in flight:
//   - Nothing (tracking up and unchanged, no invalidation of id, no other
//     read of id settled): f's reply is at least as new as everything
//     this process answered for id before f was sent (Redis answers in
//     order), and as the ladder held (installed before f was sent). l
//     replaces it; with no l, the held ladder is dropped, older than what
//     f saw.
//   - Something: f's reply may be older than a ladder installed since
//     (its read reached Redis before the write the other read saw, and
//     the invalidation is still in transit), or newer than it. l is not
//     installed, and a held ladder of another version is dropped, so the
//     next read asks Redis, whose answer is at least as new as both.
//
// Either way the promotion's generation advances, so every read of id
// sent before this one settles finds "something": an answer f gave
// (say revision 3) is never followed by the install of an older reply
// (revision 2) that was in flight beside it.
//
// Its events reach the Observer after the lock is released, so an
// Observer may call NearStats.
func (nc *near) settle(f *nearFill, l *ladder, big bool) bool {
	sh := nc.shard(f.h)
	var evicted []string
	installed, dropped := false, false
	if f.done {
		return false
	}
	sh.mu.Lock()
	fresh := nc.up.Load() && nc.epoch.Load() == f.epoch && f.key.gen == f.gen
	f.key.gen++
	sh.release(f)
	held := sh.m[f.h]
	if held != nil && held.id != f.id {
		held = nil
	}
	fits := l != nil && l.bytes <= sh.maxB
	big = big || (l != nil && !fits) // never fits: later reads skip the ladder read
	switch {
	case fresh && fits:
		if held != nil {
			sh.bytes -= held.bytes
			delete(sh.m, f.h)
		}
		l.h = f.h
		l.validated.Store(f.at)
		l.used.Store(sh.tick.Add(1))
		for len(sh.m) >= sh.maxN || sh.bytes+l.bytes > sh.maxB {
			if id := sh.evictOldest(); id != "" {
				evicted = append(evicted, id)
			}
			nc.drops.Add(1)
		}
		sh.m[f.h] = l
		sh.bytes += l.bytes
		installed = true
	case held != nil && (fresh || l == nil || held.version != l.version):
		sh.bytes -= held.bytes
		delete(sh.m, f.h)
		dropped = true
	}
	if fresh && big && len(sh.big) < sh.maxN {
		sh.big[f.id] = struct{}{}
	}
	sh.mu.Unlock()
	for _, id := range evicted {
		nc.obs.OnNear(id, NearEvict)
	}
	switch {
	case installed:
		nc.obs.OnNear(f.id, NearInstall)
	case dropped:
		nc.obs.OnNear(f.id, NearInvalidate)
	}
	return installed
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
// its install: both under the shard lock, as settle checks them, so no
// interleaving keeps an old ladder.
func (nc *near) invalidate(id string) {
	h := nc.hash(id)
	sh := nc.shard(h)
	sh.mu.Lock()
	if k := sh.fills[id]; k != nil {
		k.gen++
	}
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

// answered records that a read of id which did not go through a fill (the
// Redis path: tracking down when it began, a promotion over MaxTiers, a
// ladder that could not be held) is about to answer version ("" when
// nothing was stored). It counts as a settled read: every ladder read of
// id in flight installs nothing (it may have reached Redis before the
// write this answer saw, its invalidation still in transit), and a held
// ladder of another version is dropped, so the next read asks Redis. A
// ladder read sent after this is at least as new.
func (nc *near) answered(id, version string) {
	h := nc.hash(id)
	sh := nc.shard(h)
	// Most Redis-path answers find nothing to do (tracking down, nothing
	// held): a read lock says so. A read of id begun after it was sent
	// after this answer's reply arrived, so it is at least as new.
	sh.mu.RLock()
	l := sh.m[h]
	idle := sh.fills[id] == nil && (l == nil || l.id != id || l.version == version)
	sh.mu.RUnlock()
	if idle {
		return
	}
	sh.mu.Lock()
	if k := sh.fills[id]; k != nil {
		k.gen++
	}
	l = sh.m[h]
	if l != nil && l.id == id && l.version != version {
		sh.bytes -= l.bytes
		delete(sh.m, h)
	} else {
		l = nil
	}
	sh.mu.Unlock()
	if l != nil {
		nc.obs.OnNear(id, NearInvalidate)
	}
}

// nearAnswered is near.answered for the reads that answer a version
// outside Match (Ladder, Info, Infos, List): the process never answers
// an older version after one of these. A no-op without a near cache.
func (c *Cache) nearAnswered(id, version string) {
	if c.near != nil {
		c.near.answered(id, version)
	}
}

// setUp records whether tracking covers every node. Any change drops
// everything held: entries held before a drop may have missed
// invalidations, and a new node's keys were never tracked.
func (nc *near) setUp(up bool) {
	if was := nc.up.Swap(up); was && !up {
		nc.lost.Add(1)
	}
	nc.confirmed.Store(0)
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

// recentlyUsed starts a re-validation pass: it returns the held ladders
// read since the previous pass began (not those awaiting a re-read, which
// confirms them anyway), and moves the passes' ticks on.
func (nc *near) recentlyUsed() []*ladder {
	var out []*ladder
	for i := range nc.shards {
		sh := &nc.shards[i]
		sh.mu.Lock()
		prev := sh.lastPass.Load()
		sh.lastPass.Store(sh.tick.Add(1))
		for _, l := range sh.m {
			if l.used.Load() >= prev && l.staleAt.Load() == 0 {
				out = append(out, l)
			}
		}
		sh.mu.Unlock()
	}
	return out
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
	// LadderReads counts whole ladders read from Redis (one ZRANGE
	// each), by carts and by re-reads. Rereads counts the re-reads of
	// invalidated or unconfirmed ladders (one version check each, plus a
	// ladder read when the content changed), and Unchanged those that
	// found the held content unchanged and kept it without reading it
	// again.
	LadderReads, Rereads, Unchanged int64
}

// NearStats returns the near cache's counters (zero for a nil *Cache).
func (c *Cache) NearStats() NearStats {
	if c == nil || c.near == nil {
		return NearStats{}
	}
	nc := c.near
	st := NearStats{Tracking: nc.up.Load(), Hits: nc.hits.Load(), Misses: nc.misses.Load(), Evictions: nc.drops.Load(), TrackingLost: nc.lost.Load(),
		LadderReads: nc.ladderReads.Load(), Rereads: nc.checks.Load(), Unchanged: nc.adopted.Load()}
	for i := range nc.shards {
		sh := &nc.shards[i]
		sh.mu.RLock()
		st.Promotions += len(sh.m)
		st.Bytes += sh.bytes
		sh.mu.RUnlock()
	}
	return st
}
