package cache

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
)

// Delete removes a promotion: its tiers and meta keys at once, so
// readers get ErrNotFound from then on. The gift lists of its current and
// previous version are kept for Options.Grace (or until they expire
// sooner on their own), as when Refresh replaces a version: a reader that
// fetched a tier just before the delete still gets its gifts, and only
// one that asks more than Grace later gets ErrGiftsGone. Any read-through
// load of the promotion in flight is ended: its write-through finds its
// lease gone and writes nothing (Stale).
//
// revision orders the delete like a write (see Refresh): 0 is unordered
// and deletes whatever is stored. A revision > 0 is the source's revision
// of the deletion: it applies only when Redis holds that revision or an
// older one, and leaves a tombstone (the promotion's :tomb key, holding
// the revision, for Options.TombstoneTTL) so that a later write of that
// revision or an older one is Stale: a load or warm-up that read the
// promotion before it was deleted cannot bring it back. It leaves the
// tombstone even when nothing is stored.
//
// The result's Outcome is Deleted (something was stored and is gone),
// Absent (nothing was stored), or Stale (Redis holds a newer revision,
// stored or as a tombstone: nothing was changed; Revision is that one).
// Observer.OnRefresh gets the same outcome.
func (c *Cache) Delete(ctx context.Context, id string, revision int64) (RefreshResult, error) {
	res := RefreshResult{ID: id, Revision: revision}
	if err := gradient.ValidateID(id); err != nil {
		return res, invalid("id", "%w", err)
	}
	if revision < 0 {
		return res, &gradient.ValidationError{Promotion: id, TierIndex: -1, Field: "revision", Err: gradient.ErrInvalid,
			Detail: fmt.Sprintf("%d is negative (0 means unordered)", revision)}
	}
	tiers, meta, tomb, lease := c.tiersKey(id), c.metaKey(id), c.tombKey(id), c.leaseKey(id)
	rts := 0
	txf := func(tx *redis.Tx) error {
		rts += 3 // WATCH, probe, EXEC (or UNWATCH)
		res = RefreshResult{ID: id, Revision: revision}
		var hm, tb *redis.SliceCmd
		if _, err := tx.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			hm = pipe.HMGet(ctx, meta, metaVersion, metaPrev, metaRev)
			tb = pipe.MGet(ctx, tomb)
			return nil
		}); err != nil {
			return err
		}
		var version, prev string
		var rev, tombRev int64
		if v := hm.Val(); len(v) == 3 {
			version, _ = v[0].(string)
			prev, _ = v[1].(string)
			rev = revOf(v[2])
		}
		if v := tb.Val(); len(v) == 1 {
			tombRev = revOf(v[0])
		}
		res.Previous = version
		if revision > 0 && (rev > revision || (version == "" && tombRev > revision)) {
			res.Outcome, res.Version, res.Revision = Stale, version, max(rev, tombRev)
			if version != "" {
				res.Revision = rev
			}
			return nil
		}
		keys := []string{tiers, meta}
		var gifts []string
		for _, v := range []string{version, prev} {
			if v != "" {
				gifts = append(gifts, c.giftsKey(id, v))
			}
		}
		index := c.indexKey(id)
		if err := sameSlot(append(append(keys, tomb, lease, index), gifts...)...); err != nil {
			return err
		}
		var del *redis.IntCmd
		_, err := tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			del = pipe.Del(ctx, keys...)
			// With meta, at once: List never reads a deleted promotion
			// from the index, and never misses a stored one (index.go).
			pipe.SRem(ctx, index, id)
			for _, k := range gifts {
				// LT: never lengthen a TTL (End + Grace may come sooner).
				pipe.Do(ctx, "pexpire", k, c.grace.Milliseconds(), "lt")
			}
			// A load in flight read the promotion before this delete: its
			// lease goes, so its write-through is Stale.
			pipe.Del(ctx, lease)
			if revision > 0 && revision >= tombRev {
				pipe.Set(ctx, tomb, strconv.FormatInt(revision, 10), c.tombTTL)
			}
			return nil
		})
		if err == nil {
			res.Outcome = Absent
			if del.Val() > 0 {
				res.Outcome = Deleted
			}
			if revision == 0 {
				res.Revision = 0
			}
		}
		return err
	}
	defer func() { c.obs.OnRoundTrips(OpDelete, rts) }()
	defer c.invalidateLocal(id)
	for attempt := 0; attempt < c.retries; attempt++ {
		err := c.client.Watch(ctx, txf, meta, tomb)
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		if err != nil {
			return RefreshResult{ID: id, Revision: revision}, fmt.Errorf("cache: delete promotion %q: %w", id, ctxErr(ctx, err))
		}
		c.obs.OnRefresh(id, res.Outcome)
		return res, nil
	}
	return RefreshResult{ID: id, Revision: revision}, fmt.Errorf("%w: delete %q after %d attempts", ErrConflict, id, c.retries)
}
