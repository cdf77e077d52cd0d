package cache

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
	// Stale counts writes refused because Redis holds a newer revision
	// (or, for a read-through fill, because another writer came first).
	Stale int
	// Conflicts counts writes refused with a *RevisionConflictError.
	Conflicts int
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
	case Stale:
		r.Stale++
	case Conflict:
		r.Conflicts++
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
	// Revision is the revision Redis holds for the promotion after the
	// call: the one written (Added, Updated, Repaired, or Unchanged with
	// a newer revision recorded), or the one kept (Unchanged, Stale,
	// Conflict; for a Stale write against a deleted promotion, its
	// tombstone's). For Delete: the tombstone's revision, 0 for an
	// unordered Delete. When Stale, Version is the stored version ("" when
	// none is stored).
	Revision int64
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
// Writes are ordered by gradient.Promotion.Revision, compared with the
// revision Redis holds inside the same WATCH/MULTI transaction (see
// "Ordering of writers" in docs/design.md):
//   - a revision older than the stored one, or not newer than the
//     tombstone an ordered Delete left, writes nothing and is reported
//     Stale (RefreshReport.Stale, Observer.OnRefresh), never as an error:
//     the newer write already won;
//   - the stored revision with other content writes nothing, is reported
//     Conflict, and the call's error matches ErrRevisionConflict (one
//     *RevisionConflictError per promotion, joined); the other promotions
//     of the call are still written, and retrying gives the same answer;
//   - revision 0 is unordered: it replaces whatever is stored unordered,
//     last writer wins, but never a promotion stored with a revision or
//     one an ordered Delete removed (while its tombstone lives): that
//     writes nothing and is Stale, so a writer without revisions (an old
//     file, a process of another release) cannot undo an ordered one.
//
// A promotion whose content hash equals the stored version is Unchanged,
// and nothing is written for it, only when it is also whole: its tiers key
// holds every member, its gift list hash every gift list and its meta hash
// every field, read in the same round trip as the version. Otherwise it
// is rewritten and reported Repaired. An Unchanged write with a newer
// revision records that revision alone. A call of several promotions
// first reads them all in one pipelined round trip: those Unchanged at a
// revision the write does not raise are settled there, without a WATCH
// transaction; every other promotion is decided again inside its own.
//
// Keys expire at End + Grace (no expiry for an open End); the replaced
// version's gifts expire Grace from now. Writes are atomic per promotion,
// not per call: when one fails, the report lists the promotions stored so
// far and the error is a *RefreshError that sorts every promotion of the
// call into committed, not committed or unknown, after reading the failed
// one back.
func (c *Cache) Refresh(ctx context.Context, promos ...gradient.Promotion) (RefreshReport, error) {
	return c.refreshObserved(ctx, promos, nil)
}

// refreshObserved is Refresh, or a read-through fill (fl), reported to
// Observer.OnRefreshDone.
func (c *Cache) refreshObserved(ctx context.Context, promos []gradient.Promotion, fl *fill) (RefreshReport, error) {
	if c.nopObs {
		return c.refreshWith(ctx, promos, fl)
	}
	start := time.Now()
	rep, err := c.refreshWith(ctx, promos, fl)
	c.obs.OnRefreshDone(len(promos), time.Since(start), err)
	return rep, err
}

// refreshWith is Refresh, as a read-through fill when fl is set (one
// promotion).
func (c *Cache) refreshWith(ctx context.Context, promos []gradient.Promotion, fl *fill) (RefreshReport, error) {
	if len(promos) > MaxRefreshBatch {
		return RefreshReport{}, invalid("batch", "%d promotions (max %d)", len(promos), MaxRefreshBatch)
	}
	all := make([]*encoded, len(promos))
	seen := make(map[string]int, len(promos))
	for i := range promos {
		p := &promos[i]
		if j, dup := seen[p.ID]; dup {
			return RefreshReport{}, invalid("promotions", "%q at positions %d and %d", p.ID, j, i)
		}
		seen[p.ID] = i
		e, err := encodePromotion(p, c.maxBytes)
		if err != nil {
			return RefreshReport{}, err
		}
		all[i] = e
	}
	var rep RefreshReport
	var conflicts []error
	var settled []bool
	var early []RefreshResult
	if fl == nil && len(all) > 1 {
		settled, early = c.settleUnchanged(ctx, all)
	}
	for k, e := range all {
		if settled != nil && settled[k] {
			c.invalidateLocal(e.id) // as refreshOne's callers do, written or not
			c.obs.OnRefresh(e.id, Unchanged)
			rep.add(early[k])
			continue
		}
		res, rts, err := c.refreshOne(ctx, e, fl)
		c.invalidateLocal(e.id) // at once, even on error: the write may have committed
		c.obs.OnRoundTrips(OpRefresh, rts)
		var rc *RevisionConflictError
		if errors.As(err, &rc) {
			// Nothing written for it (decided before MULTI); the others go on.
			conflicts = append(conflicts, err)
			err = nil
		}
		if err != nil {
			return rep, c.refreshFailed(ctx, &rep, all, k, res, ctxErr(ctx, err))
		}
		c.obs.OnRefresh(e.id, res.Outcome)
		rep.add(res)
	}
	return rep, errors.Join(conflicts...)
}

// refreshFailed builds the RefreshError of a call whose k-th promotion
// failed with err. The failed promotion is read back: its transaction may
// have committed with its reply lost (go-redis does not re-send EXEC).
func (c *Cache) refreshFailed(ctx context.Context, rep *RefreshReport, all []*encoded, k int, res RefreshResult, err error) error {
	rerr := &RefreshError{Failed: all[k].id, Err: err}
	for _, e := range all[:k] {
		rerr.Committed = append(rerr.Committed, e.id)
	}
	p, perr := c.probe(ctx, c.client, all[k], nil)
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

// decide is the ordering rule of one write: given what the probe read,
// what becomes of e. bump: the content is stored whole already but the
// write carries a newer revision, which is recorded alone.
func decide(s *stored, e *encoded, fl *fill) (out RefreshOutcome, bump bool, err error) {
	rev := e.promo.Revision
	ordered := rev > 0
	switch {
	case fl != nil && !s.leaseOK:
		// Another writer (or an expired lease) came after the load began:
		// what the load read may be older than what Redis holds.
		return Stale, false, nil
	case s.version == "" && ordered && s.tomb >= rev:
		return Stale, false, nil
	case s.version == "" && !ordered && s.tomb > 0:
		// An unordered write never brings back a promotion an ordered
		// Delete removed (a warm-up from a file without revisions, or
		// from another release, beside a source that has them).
		return Stale, false, nil
	case s.version == "":
		return Added, false, nil
	case ordered && s.rev > rev:
		return Stale, false, nil
	case ordered && s.rev == rev && s.version != e.version:
		return Conflict, false, &RevisionConflictError{ID: e.id, Revision: rev, Held: s.version, Wrote: e.version}
	case s.version == e.version && s.damage(e) == "":
		return Unchanged, ordered && rev > s.rev, nil
	case !ordered && s.rev > 0:
		// Nor does it replace, or repair, a promotion stored with a
		// revision: that would drop the revision to 0 and let any older
		// copy back in.
		return Stale, false, nil
	case s.version == e.version:
		return Repaired, false, nil
	case fl != nil && s.whole() && !(ordered && rev > s.rev):
		// A fill replaces a whole promotion of another version only when
		// its revision proves it newer.
		return Stale, false, nil
	}
	return Updated, false, nil
}

// refreshOne writes one promotion: WATCH its meta and tombstone keys (and
// a fill's lease), probe what is stored, decide by the ordering rule,
// then, unless nothing is to be written, MULTI { replace tiers,
// gifts:<new>, meta; set expiries; let the old gifts expire after Grace;
// drop the tombstone, the remembered miss and any load's lease } EXEC,
// retried when the WATCH fires.
func (c *Cache) refreshOne(ctx context.Context, e *encoded, fl *fill) (RefreshResult, int, error) {
	tiers, meta, gifts, tomb := c.tiersKey(e.id), c.metaKey(e.id), c.giftsKey(e.id, e.version), c.tombKey(e.id)
	lease := c.leaseKey(e.id)
	res := RefreshResult{ID: e.id, Version: e.version, Revision: e.promo.Revision}
	index := c.indexKey(e.id)
	if err := sameSlot(tiers, meta, gifts, tomb, lease, index); err != nil {
		return res, 0, err
	}
	watch := []string{meta, tomb}
	if fl != nil {
		watch = append(watch, fl.lease)
	}
	rts := 0
	txf := func(tx *redis.Tx) error {
		rts += 2 // WATCH, probe (EXEC counted below)
		res.Outcome, res.Damage, res.Version, res.Revision = 0, "", e.version, e.promo.Revision
		s, err := c.probe(ctx, tx, e, fl)
		if err != nil {
			return err
		}
		old, prev := s.version, s.prev
		res.Previous = old
		out, bump, err := decide(&s, e, fl)
		res.Outcome = out
		switch out {
		case Stale, Conflict:
			res.Version, res.Revision = old, max(s.rev, s.tomb)
			if old != "" {
				res.Revision = s.rev
			}
			rts++ // UNWATCH
			return err
		case Unchanged:
			if !bump {
				res.Revision = s.rev
				rts++
				return nil
			}
			rts++
			cmds, err := tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				pipe.HSet(ctx, meta, metaRev, strconv.FormatInt(e.promo.Revision, 10))
				pipe.Del(ctx, lease)
				pipe.SAdd(ctx, index, e.id) // a v0.1.0 writer's promotion joins the index
				return nil
			})
			return queuedErr(cmds, err)
		case Repaired:
			res.Damage = s.damage(e)
		case Added:
			prev = ""
		case Updated:
			prev = old
			if err := sameSlot(meta, c.giftsKey(e.id, old)); err != nil {
				return err
			}
		}
		rts++
		cmds, err := tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			// A warm clears a remembered miss and the tombstone, and ends
			// any read-through load in flight: its fill finds its lease
			// gone and writes nothing.
			pipe.Del(ctx, tiers, gifts, meta, c.absentKey(e.id), tomb, lease)
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
			// In the same transaction as meta: the index never lacks a
			// stored promotion (index.go).
			pipe.SAdd(ctx, index, e.id)
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
		err := c.client.Watch(ctx, txf, watch...)
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
