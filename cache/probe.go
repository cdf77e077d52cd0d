package cache

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// stored is what the probe read of a stored promotion.
type stored struct {
	version, prev                string
	rev                          int64 // the meta hash's revision (0: unordered or none)
	hasRev                       bool  // the meta hash has the rev field (written since revisions)
	tomb                         int64 // the tombstone's revision, 0 when there is none
	leaseOK                      bool  // a fill's lease still holds its token
	members, giftLists, metaLens int64
}

// pipeliner is what the probe needs: a *redis.Tx inside WATCH, or the
// client for a read-back.
type pipeliner interface {
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// fill marks a refresh as a read-through load's write-through: it
// applies only while the load's lease still holds token (every other
// write and delete of the promotion deletes the lease, as a memcached
// lease token is invalidated), and never replaces a whole promotion.
type fill struct{ lease, token string }

// probe reads, in one round trip, the stored version, previous version
// and revision of e's promotion, its tombstone (and a fill's lease), and
// the sizes of its tiers key, its gift list hash for e's version and its
// meta hash.
func (c *Cache) probe(ctx context.Context, p pipeliner, e *encoded, fl *fill) (stored, error) {
	var q probeCmds
	_, err := p.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		q = c.queueProbe(ctx, pipe, e, fl, true)
		return nil
	})
	if err != nil {
		return stored{}, err
	}
	return q.stored(fl), nil
}

// probeCmds are one probe's reads, queued on a pipeline.
type probeCmds struct {
	meta   *redis.MapStringStringCmd
	strs   *redis.SliceCmd // nil when the tombstone is not read
	zc, gl *redis.IntCmd
}

// queueProbe queues the probe of e: the whole meta hash in one read (its
// fields and their count: one key lookup, not two), the tombstone (and a
// fill's lease) when tomb is set, and the sizes of the tiers key and of
// the gift list hash of e's version.
func (c *Cache) queueProbe(ctx context.Context, pipe redis.Pipeliner, e *encoded, fl *fill, tomb bool) probeCmds {
	var q probeCmds
	q.meta = pipe.HGetAll(ctx, c.metaKey(e.id))
	switch {
	case fl != nil:
		q.strs = pipe.MGet(ctx, c.tombKey(e.id), fl.lease)
	case tomb:
		q.strs = pipe.MGet(ctx, c.tombKey(e.id))
	}
	q.zc = pipe.ZCard(ctx, c.tiersKey(e.id))
	q.gl = pipe.HLen(ctx, c.giftsKey(e.id, e.version))
	return q
}

// stored is what the queued reads found (after the pipeline ran).
func (q probeCmds) stored(fl *fill) stored {
	var s stored
	m := q.meta.Val()
	s.version, s.prev = m[metaVersion], m[metaPrev]
	if rev, ok := m[metaRev]; ok {
		s.rev, s.hasRev = revOf(rev), true
	}
	s.metaLens = int64(len(m))
	if q.strs != nil {
		if v := q.strs.Val(); len(v) >= 1 {
			s.tomb = revOf(v[0])
			if fl != nil && len(v) == 2 {
				tok, _ := v[1].(string)
				s.leaseOK = tok == fl.token
			}
		}
	}
	s.members, s.giftLists = q.zc.Val(), q.gl.Val()
	return s
}

// revOf parses a stored revision; anything unreadable counts as 0
// (unordered), so a hand-edited field cannot block writes forever.
func revOf(v any) int64 {
	str, _ := v.(string)
	n, err := strconv.ParseInt(str, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// damage says what of e's version is missing from s, "" when s holds e's
// version whole. Eviction and DEL remove whole keys, so the counts catch
// them; a member or field removed by hand is caught by the counts too.
func (s *stored) damage(e *encoded) string {
	switch {
	case s.members == 0:
		return "tiers key missing"
	case s.members != int64(len(e.members)):
		return fmt.Sprintf("tiers key holds %d of %d members", s.members, len(e.members))
	case e.withGift > 0 && s.giftLists == 0:
		return "gift list hash missing"
	case s.giftLists != int64(e.withGift):
		return fmt.Sprintf("gift list hash holds %d of %d lists", s.giftLists, e.withGift)
	case s.metaLens != s.metaFields():
		return fmt.Sprintf("meta hash holds %d of %d fields", s.metaLens, s.metaFields())
	}
	return ""
}

// metaFields is the field count of a whole meta hash: one less for a
// promotion written before revisions, which is whole at revision 0 (so an
// upgrade does not rewrite every promotion; an ordered write records its
// revision).
func (s *stored) metaFields() int64 {
	if s.version != "" && !s.hasRev {
		return metaFieldCount - 1
	}
	return metaFieldCount
}

// whole reports whether s looks like a whole promotion of some version:
// its meta hash whole and its tiers key there. (The probe counts the gift
// lists of the written version only, so another version's are not
// checked.)
func (s *stored) whole() bool {
	return s.version != "" && s.members > 0 && s.metaLens == s.metaFields()
}

// settleUnchanged reads every promotion of a multi-promotion Refresh in
// one pipelined round trip, without WATCH, and returns, per promotion,
// whether it is settled Unchanged: stored whole with the same content at
// a revision the write does not raise (res is then its result). Such a
// write writes nothing, and inside refreshOne it would be decided from
// the same reads, with a WATCH that is only undone by UNWATCH (the probe
// is not atomic there either); so it skips WATCH, the probe again and
// UNWATCH: 1 round trip per call instead of 3 per promotion, and 3 key
// lookups instead of 7 (the tombstone only decides a write when no
// version is stored, which never settles here). Everything else (added,
// updated, repaired, stale, conflict, a newer revision to record) goes
// through refreshOne, which probes again inside its WATCH, so every write
// is decided in its own transaction as before. A failed read settles
// nothing: refreshOne meets the failure and reports it.
func (c *Cache) settleUnchanged(ctx context.Context, all []*encoded) (settled []bool, res []RefreshResult) {
	qs := make([]probeCmds, len(all))
	_, err := c.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for k, e := range all {
			qs[k] = c.queueProbe(ctx, pipe, e, nil, false)
		}
		return nil
	})
	c.obs.OnRoundTrips(OpRefresh, 1)
	settled, res = make([]bool, len(all)), make([]RefreshResult, len(all))
	if err != nil {
		return settled, res
	}
	for k, e := range all {
		s := qs[k].stored(nil)
		if out, bump, err := decide(&s, e, nil); out != Unchanged || bump || err != nil {
			continue
		}
		// refreshOne refuses keys of two slots before it reads; leave it
		// those.
		if sameSlot(c.tiersKey(e.id), c.metaKey(e.id), c.giftsKey(e.id, e.version), c.tombKey(e.id), c.leaseKey(e.id), c.indexKey(e.id)) != nil {
			continue
		}
		settled[k] = true
		res[k] = RefreshResult{ID: e.id, Outcome: Unchanged, Version: e.version, Previous: s.version, Revision: s.rev}
	}
	return settled, res
}
