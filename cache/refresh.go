package cache

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	Repaired   int
}

func (r *RefreshReport) add(res RefreshResult) {
	r.Promotions = append(r.Promotions, res)
	switch res.Outcome {
	case Added:
		r.Added++
	case Updated:
		r.Updated++
	case Unchanged:
		r.Unchanged++
	case Repaired:
		r.Repaired++
	}
}

// RefreshResult is one promotion's refresh outcome.
type RefreshResult struct {
	ID      string
	Outcome RefreshOutcome
	// Version is the stored content hash after the refresh.
	Version string
	// Previous is the version that was replaced ("" when Added, equal to
	// Version when Unchanged or Repaired).
	Previous string
	// Damage says what was missing when Outcome is Repaired, else "".
	Damage string
}

// RefreshError is the error of a Refresh that failed after it began to
// write. Every promotion of the call is in exactly one of Committed,
// NotCommitted and Unknown, in input order. It unwraps to the cause.
type RefreshError struct {
	// Failed is the promotion whose write failed.
	Failed string
	// Committed: this promotion's content is stored whole, as the
	// report's entry for it says (Added, Updated, Repaired or Unchanged).
	// That includes Failed when its transaction committed but its reply
	// was lost, as a read-back after the failure showed.
	Committed []string
	// NotCommitted: this call did not store the content (Failed, when the
	// read-back showed it missing or not whole, and every promotion after
	// it, which were not tried).
	NotCommitted []string
	// Unknown holds Failed when the read-back failed too, so nobody can
	// say whether its transaction committed. A Refresh of it settles it.
	Unknown []string
	Err     error
}

func (e *RefreshError) Error() string {
	return fmt.Sprintf("cache: refresh promotion %q: %v (committed %d, not committed %d, unknown %d)",
		e.Failed, e.Err, len(e.Committed), len(e.NotCommitted), len(e.Unknown))
}

func (e *RefreshError) Unwrap() error { return e.Err }

// Refresh validates every promotion first and writes nothing if any is
// invalid (the error is a *gradient.ValidationError naming the promotion,
// tier and field; it matches gradient.ErrInvalid). Then it writes each
// promotion in its own MULTI/EXEC transaction: a concurrent reader sees the
// old version whole or the new one whole, never a mix, and never a tier
// without its gifts (gift lists are stored per version).
//
// A promotion whose content hash equals the stored version is Unchanged,
// and nothing is written for it, only when it is also whole: its tiers key
// holds every member, its gift list hash every gift list and its meta hash
// every field, read in the same round trip as the version. Otherwise it
// is rewritten and reported Repaired.
//
// Keys expire at End + Grace (no expiry for an open End); the replaced
// version's gifts expire Grace from now. Writes are atomic per promotion,
// not per call: when one fails, the report lists the promotions stored so
// far and the error is a *RefreshError that sorts every promotion of the
// call into committed, not committed or unknown, after reading the failed
// one back.
func (c *Cache) Refresh(ctx context.Context, promos ...gradient.Promotion) (RefreshReport, error) {
	if c.nopObs {
		return c.refresh(ctx, promos)
	}
	start := time.Now()
	rep, err := c.refresh(ctx, promos)
	c.obs.OnRefreshDone(len(promos), time.Since(start), err)
	return rep, err
}

func (c *Cache) refresh(ctx context.Context, promos []gradient.Promotion) (RefreshReport, error) {
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
	for k, e := range all {
		res, rts, err := c.refreshOne(ctx, e)
		c.invalidateLocal(e.id) // at once, even on error: the write may have committed
		c.obs.OnRoundTrips(OpRefresh, rts)
		if err != nil {
			return rep, c.refreshFailed(ctx, &rep, all, k, res, ctxErr(ctx, err))
		}
		c.obs.OnRefresh(e.id, res.Outcome)
		rep.add(res)
	}
	return rep, nil
}

// refreshFailed builds the RefreshError of a call whose k-th promotion
// failed with err. The failed promotion is read back: its transaction may
// have committed with its reply lost (go-redis does not re-send EXEC).
func (c *Cache) refreshFailed(ctx context.Context, rep *RefreshReport, all []*encoded, k int, res RefreshResult, err error) error {
	rerr := &RefreshError{Failed: all[k].id, Err: err}
	for _, e := range all[:k] {
		rerr.Committed = append(rerr.Committed, e.id)
	}
	p, perr := c.probe(ctx, c.client, all[k])
	c.obs.OnRoundTrips(OpRefresh, 1)
	switch {
	case perr != nil:
		c.obs.OnRefresh(all[k].id, RefreshFailed)
		rerr.Unknown = []string{all[k].id}
		rerr.Err = fmt.Errorf("%w (read-back failed too: %w)", err, ctxErr(ctx, perr))
	case p.version == all[k].version && p.damage(all[k]) == "":
		if res.Outcome == 0 { // failed before it decided: stored whole already
			res.Outcome, res.Previous = Unchanged, p.version
		}
		c.obs.OnRefresh(all[k].id, res.Outcome)
		rep.add(res)
		rerr.Committed = append(rerr.Committed, all[k].id)
	default:
		c.obs.OnRefresh(all[k].id, RefreshFailed)
		rerr.NotCommitted = []string{all[k].id}
	}
	for _, e := range all[k+1:] {
		rerr.NotCommitted = append(rerr.NotCommitted, e.id)
	}
	return rerr
}

// stored is what the wholeness probe read of a stored promotion.
type stored struct {
	version, prev                string
	members, giftLists, metaLens int64
}

// pipeliner is what the probe needs: a *redis.Tx inside WATCH, or the
// client for a read-back.
type pipeliner interface {
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// probe reads, in one round trip, the stored version and previous
// version of e's promotion and the sizes of its tiers key, its gift list
// hash for e's version and its meta hash.
func (c *Cache) probe(ctx context.Context, p pipeliner, e *encoded) (stored, error) {
	var hm *redis.SliceCmd
	var zc, gl, ml *redis.IntCmd
	meta := c.metaKey(e.id)
	_, err := p.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		hm = pipe.HMGet(ctx, meta, metaVersion, metaPrev)
		zc = pipe.ZCard(ctx, c.tiersKey(e.id))
		gl = pipe.HLen(ctx, c.giftsKey(e.id, e.version))
		ml = pipe.HLen(ctx, meta)
		return nil
	})
	if err != nil {
		return stored{}, err
	}
	var s stored
	if v := hm.Val(); len(v) == 2 {
		s.version, _ = v[0].(string)
		s.prev, _ = v[1].(string)
	}
	s.members, s.giftLists, s.metaLens = zc.Val(), gl.Val(), ml.Val()
	return s, nil
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
	case s.metaLens != metaFieldCount:
		return fmt.Sprintf("meta hash holds %d of %d fields", s.metaLens, metaFieldCount)
	}
	return ""
}

// refreshOne writes one promotion: WATCH meta, probe what is stored,
// then, unless it is e's version whole, MULTI { replace tiers,
// gifts:<new>, meta; set expiries; let the old gifts expire after Grace }
// EXEC, retried when the WATCH fires.
func (c *Cache) refreshOne(ctx context.Context, e *encoded) (RefreshResult, int, error) {
	tiers, meta, gifts := c.tiersKey(e.id), c.metaKey(e.id), c.giftsKey(e.id, e.version)
	res := RefreshResult{ID: e.id, Version: e.version}
	if err := sameSlot(tiers, meta, gifts); err != nil {
		return res, 0, err
	}
	rts := 0
	txf := func(tx *redis.Tx) error {
		rts += 2 // WATCH, probe (EXEC counted below)
		res.Outcome, res.Damage = 0, ""
		s, err := c.probe(ctx, tx, e)
		if err != nil {
			return err
		}
		old, prev := s.version, s.prev
		res.Previous = old
		switch {
		case old == e.version:
			if res.Damage = s.damage(e); res.Damage == "" {
				res.Outcome = Unchanged
				rts++ // UNWATCH: no EXEC released the watch
				return nil
			}
			res.Outcome = Repaired
		case old == "":
			res.Outcome, prev = Added, ""
		default:
			res.Outcome, prev = Updated, old
			if err := sameSlot(meta, c.giftsKey(e.id, old)); err != nil {
				return err
			}
		}
		rts++
		cmds, err := tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Del(ctx, tiers, gifts, meta, c.absentKey(e.id)) // a warm clears a remembered miss
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
			pipe.HSet(ctx, meta, e.metaFields(prev, c.now())...)
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
			if res.Outcome == Updated {
				pipe.PExpire(ctx, c.giftsKey(e.id, old), c.grace)
			}
			return nil
		})
		return queuedErr(cmds, err)
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

// queuedErr adds to an EXEC error the error of the command Redis refused
// to queue (OOM under noeviction makes EXEC say only EXECABORT).
func queuedErr(cmds []redis.Cmder, err error) error {
	if err == nil {
		return nil
	}
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil && cerr != err {
			return fmt.Errorf("%w (%w)", err, cerr)
		}
	}
	return err
}

// sameSlot is the client-side Redis Cluster guard run before every
// transaction: all its keys must hash to one slot.
func sameSlot(keys ...string) error {
	if err := slot.Same(keys...); err != nil {
		return fmt.Errorf("%w: %w", ErrCrossSlot, err)
	}
	return nil
}
