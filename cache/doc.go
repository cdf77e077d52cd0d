// Package cache keeps promotion tiers in Redis and answers "which tier
// does this cart line hit?" with one O(log N) command on the server.
//
// A warm-up job calls [Cache.Refresh] with [gradient.Promotion] values; a
// cart service calls [Cache.MatchCart] ([Cache.Match], [Cache.AppendMatchCart])
// with [Query] values built by [QuantityQuery] or [AmountQuery].
//
// # Use
//
//	c, _ := cache.New(rdb, cache.Options{})
//	_, err := c.Refresh(ctx, promos...) // warm-up: validated, then written whole
//	rs, err := c.MatchCart(ctx, []cache.Query{
//		cache.QuantityQuery("promo-7", 3),
//		cache.AmountQuery("promo-9", decimal.RequireFromString("42.50")),
//	}, cache.MatchOptions{Gifts: true})
//	for _, r := range rs {
//		// r.Tier is the tier reached, or r.Err says why not: ErrNoTier,
//		// ErrNotActive, ErrNotFound, ...
//	}
//
// Errors name states ([ErrNotFound], [ErrNoTier], [ErrDamaged], ...) and
// are checked with errors.Is; a promotion [gradient.Promotion.Validate]
// refuses is a [*gradient.ValidationError].
//
// # Key layout
//
// One hash tag per promotion, so every read and every transaction touches
// one Redis Cluster slot: a tiers ZSET, a meta hash and a gifts hash per
// version, and, beside them, a read-through's lease and remembered miss
// and an ordered Delete's tombstone. The table of the keys is written
// once, at the top of keys.go.
//
// Each member is a deterministic msgpack array carrying what a hit needs
// (tier ID, reward, has-gifts flag) plus the promotion's version, metric,
// minor digits, window and an owner tag checked on every read. A floor
// sentinel at score -1 and a ceiling at 2^53 make ZRANGE tiers <v> -inf
// BYSCORE REV LIMIT 0 1 return a tier on a hit, the floor when no tier is
// reached ([ErrNoTier], or [ErrNotActive] outside the window) and nothing
// only when the tiers key is gone; such a line is read again with its
// meta key (lua/recheck.lua): no meta is [ErrNotFound], meta without tiers
// is [ErrDamaged]. docs/design.md describes the format whole.
//
// # Guarantees
//
// docs/guarantees.md names the tests that hold each of these.
//
//   - Refresh validates every promotion before writing anything, then
//     writes each one in one MULTI/EXEC (WATCH on its meta key): readers
//     see the old version whole or the new one whole. Gift lists are stored
//     per version and the replaced version's list lives on for
//     [Options].Grace, so a hit's gifts always belong to its tier.
//   - The version is a content hash. Refreshing identical content is
//     [Unchanged] and writes nothing only when the stored promotion is
//     also whole (tiers, gift list and meta hash sizes, read in the round
//     trip that reads the version); anything less is rewritten,
//     [Repaired]. A promotion with a key evicted or deleted behind the
//     cache's back reads as [ErrDamaged] (never a wrong tier), and Info
//     reports the damage.
//   - A Refresh that fails midway returns a [*RefreshError] that sorts
//     every promotion of the call into committed, not committed or (when
//     even the read-back failed) unknown, by reading the failed one back.
//   - Delete removes tiers and meta at once and leaves the deleted
//     version's gift lists for [Options].Grace, as a refresh does.
//   - Writes are ordered by [gradient.Promotion].Revision, compared with
//     the revision Redis holds inside the write's own transaction: a
//     Refresh or Delete older than what Redis holds (a stored promotion,
//     or the tombstone an ordered Delete leaves for
//     [Options].TombstoneTTL) changes nothing and is reported [Stale],
//     never as an error; the same revision with other content is a
//     [*RevisionConflictError]. Revision 0 is unordered: last writer
//     wins among unordered writes, and it never replaces a promotion held
//     at a revision or passes an ordered tombstone ([Stale]).
//   - A cart costs one pipelined round trip whatever its size and tier
//     count (one per master on a Cluster, in parallel), plus one when some
//     hit has gifts and [MatchOptions].Gifts is set, plus one when some
//     line finds nothing stored (to tell not found from damaged) or a
//     gift list is missing (to tell gone from damaged). With
//     [MatchOptions].Next each line also reads the next tier; the two reads
//     carry versions, and a line whose versions differ (a refresh committed
//     between them) is re-read atomically (lua/recheck.lua).
//   - [Cache.List] and [Cache.IDs] read a per-slot index the writes keep
//     (once [Cache.Reindex] marked the prefix), not a SCAN of the keyspace.
//   - Whether a promotion is active is decided by the caller's clock,
//     [Options].Now, at millisecond resolution; Redis's clock only expires
//     keys at End + Grace.
//   - Bytes read from Redis are decoded under a size cap, with every length
//     checked against the input, the input consumed whole and panics
//     recovered: corrupt data is [ErrCorrupt], never a panic or a huge
//     allocation.
//
// # Near cache and read-through (opt-in)
//
// With [Options].NearCache, the first read of a promotion holds its whole
// ladder in process and later lines are answered from memory with no round
// trip. It is kept true by Redis client tracking (BCAST on the prefix, one
// tracking connection per node, per master on a Cluster): an invalidation
// has the ladder re-read once per process in the background (not at all
// when the content is unchanged; it is served meanwhile for at most
// min(1 s, MaxStaleness/2)), a read that raced one, or another read of its
// promotion (answered from a ladder read or from Redis, or by Ladder,
// Info or List), installs nothing (so a process never answers an older
// version of a promotion after a newer one), and while tracking is not
// established, or after its connection drops, nothing is held and every
// read goes to Redis. No answer comes from a ladder Redis confirmed more
// than [NearCacheOptions].MaxStaleness ago.
//
// With [Options].Loader, a line whose promotion is missing from Redis is
// loaded from the source of truth once (one [Loader].Load per process, and
// one across processes through a lease in Redis), written through
// [Cache.Refresh] as a fill, and answered; an ID the source does not know,
// or a promotion whose End + Grace has passed ([ErrNotActive]), is
// remembered for [LoadOptions].MissTTL. A fill writes only while its
// lease is still its own (every Refresh and Delete ends it), never over
// a whole promotion and never over a newer revision: a load that lost
// the race writes nothing ([LoadStale]) and its lines are answered from
// what Redis holds. A failed load is that line's [ErrLoad], never a
// wrong answer.
//
// Metrics go to an [Observer] (default [NopObserver]).
package cache
