package cache

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/slot"
)

// RefreshReport says what Refresh did, per promotion in input order.
type RefreshReport struct {
	Promotions []RefreshResult
	Added      int
	Updated    int
	Unchanged  int
}

// RefreshResult is one promotion's refresh outcome.
type RefreshResult struct {
	ID      string
	Outcome RefreshOutcome
	// Version is the stored content hash after the refresh.
	Version string
	// Previous is the version that was replaced ("" when Added, equal to
	// Version when Unchanged).
	Previous string
}

// Refresh validates every promotion first and writes nothing if any is
// invalid (the error is a *gradient.ValidationError naming the promotion,
// tier and field; it matches gradient.ErrInvalid). Then it writes each
// promotion in its own MULTI/EXEC transaction: a concurrent reader sees the
// old version whole or the new one whole, never a mix, and never a tier
// without its gifts (gift lists are stored per version). A promotion whose
// content hash equals the stored version is Unchanged and nothing is
// written for it.
//
// Keys expire at End + Grace (no expiry for an open End); the replaced
// version's gifts expire Grace from now. Writes are atomic per promotion,
// not per call: if a write fails, the promotions before it are stored, the
// report lists them and the error names the one that failed.
func (c *Cache) Refresh(ctx context.Context, promos ...gradient.Promotion) (RefreshReport, error) {
	if len(promos) > MaxRefreshBatch {
		return RefreshReport{}, fmt.Errorf("%w: %d promotions (max %d)", ErrBatchTooLarge, len(promos), MaxRefreshBatch)
	}
	all := make([]*encoded, len(promos))
	seen := make(map[string]int, len(promos))
	for i := range promos {
		p := &promos[i]
		if j, dup := seen[p.ID]; dup {
			return RefreshReport{}, fmt.Errorf("%w: %q at positions %d and %d", ErrDuplicatePromotion, p.ID, j, i)
		}
		seen[p.ID] = i
		e, err := encodePromotion(p, c.maxBytes)
		if err != nil {
			return RefreshReport{}, err
		}
		all[i] = e
	}
	var rep RefreshReport
	for _, e := range all {
		res, rts, err := c.refreshOne(ctx, e)
		c.obs.OnRoundTrips(OpRefresh, rts)
		if err != nil {
			c.obs.OnRefresh(e.id, RefreshFailed)
			return rep, fmt.Errorf("cache: refresh promotion %q: %w", e.id, ctxErr(ctx, err))
		}
		c.obs.OnRefresh(e.id, res.Outcome)
		rep.Promotions = append(rep.Promotions, res)
		switch res.Outcome {
		case Added:
			rep.Added++
		case Updated:
			rep.Updated++
		case Unchanged:
			rep.Unchanged++
		}
	}
	return rep, nil
}

// refreshOne writes one promotion: WATCH meta, read the stored version,
// then MULTI { replace tiers, gifts:<new>, meta; set expiries; let the old
// gifts expire after Grace } EXEC, retried when the WATCH fires.
func (c *Cache) refreshOne(ctx context.Context, e *encoded) (RefreshResult, int, error) {
	tiers, meta, gifts := c.tiersKey(e.id), c.metaKey(e.id), c.giftsKey(e.id, e.version)
	res := RefreshResult{ID: e.id, Version: e.version}
	if err := sameSlot(tiers, meta, gifts); err != nil {
		return res, 0, err
	}
	rts := 0
	txf := func(tx *redis.Tx) error {
		rts += 2 // WATCH, HGET (EXEC counted below)
		old, err := tx.HGet(ctx, meta, metaVersion).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		res.Previous = old
		if old == e.version {
			res.Outcome = Unchanged
			rts++ // UNWATCH: no EXEC released the watch
			return nil
		}
		res.Outcome = Added
		if old != "" {
			res.Outcome = Updated
			if err := sameSlot(meta, c.giftsKey(e.id, old)); err != nil {
				return err
			}
		}
		rts++
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Del(ctx, tiers, gifts, meta)
			for i := 0; i < len(e.members); i += zaddChunk {
				end := min(i+zaddChunk, len(e.members))
				zs := make([]redis.Z, 0, end-i)
				for k := i; k < end; k++ {
					zs = append(zs, redis.Z{Score: float64(e.scores[k]), Member: e.members[k]})
				}
				pipe.ZAdd(ctx, tiers, zs...)
			}
			for i := 0; i < len(e.gifts); i += 2 * zaddChunk {
				end := min(i+2*zaddChunk, len(e.gifts))
				vals := make([]any, 0, end-i)
				for _, v := range e.gifts[i:end] {
					vals = append(vals, v)
				}
				pipe.HSet(ctx, gifts, vals...)
			}
			pipe.HSet(ctx, meta, e.metaFields(old, c.now())...)
			keys := []string{tiers, meta}
			if len(e.gifts) > 0 {
				keys = append(keys, gifts)
			}
			if end := e.promo.End; !end.IsZero() {
				at := end.Add(c.grace)
				for _, k := range keys {
					pipe.PExpireAt(ctx, k, at)
				}
			}
			// DEL above already cleared any TTL an earlier version left
			// on these keys, so an open End means no expiry.
			if old != "" {
				pipe.PExpire(ctx, c.giftsKey(e.id, old), c.grace)
			}
			return nil
		})
		return err
	}
	for attempt := 0; attempt < c.retries; attempt++ {
		err := c.client.Watch(ctx, txf, meta)
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		if err != nil {
			return res, rts, err
		}
		return res, rts, nil
	}
	return res, rts, fmt.Errorf("%w: %d attempts", ErrConflict, c.retries)
}

// sameSlot is the client-side Redis Cluster guard run before every
// transaction: all its keys must hash to one slot.
func sameSlot(keys ...string) error {
	if err := slot.Same(keys...); err != nil {
		return fmt.Errorf("%w: %w", ErrCrossSlot, err)
	}
	return nil
}
