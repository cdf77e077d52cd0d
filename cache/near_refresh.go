package cache

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Re-reads of held ladders. A tracking invalidation does not drop a
// held ladder: it marks it stale and queues a background re-read, and carts keep being answered from it until the re-read
// lands, for at most staleServe after the invalidation arrived. A re-read
// is one flight per promotion per process, whoever asks (the background
// refresher, or carts that find the ladder stale past staleServe or
// unconfirmed past MaxStaleness): it checks the version and the tiers
// count (HGET meta version, ZCARD tiers) and, only when either differs,
// reads the whole ladder again. A republish of the same content (a
// revision bump, which rewrites only the meta hash's rev) is adopted: the
// ladder is kept and confirmed, not read again.
//
// Why serving the held ladder meanwhile never answers an older version
// than the process already answered: every answer of another version,
// by any path (a ladder read settling, the Redis path, Ladder, Info,
// List), drops the held ladder under the shard lock (settle, answered),
// so a held ladder is never older than an answer given. The invalidation
// only says Redis has something newer; until this process has answered
// it, answering the held version is what the process would have done had
// the invalidation arrived a round trip later.
//
// A cart that finds nothing held still reads the ladder itself, never
// joining another cart's read: a read sent before a write whose
// invalidation is still in transit would answer it the older version,
// though it began after the write returned. Joining a re-read is safe
// for the same reason serving the held ladder is: the re-read began after
// the ladder it replaces was installed.

// staleServe is how long after an invalidation arrived a ladder is still
// served while its re-read is in flight: min(1 s, MaxStaleness/2), the
// time the tracking connection may stay silent before it is pinged.
func (nc *near) staleServe() time.Duration { return nc.pingEvery() }

// refreshFlight is one re-read of a promotion; done closes when it ends.
// joined counts the carts that waited for it instead of reading (tests).
type refreshFlight struct {
	done   chan struct{}
	joined atomic.Int32
}

// reread is one promotion's part of a re-read batch.
type reread struct {
	id     string
	h      uint64
	held   *ladder
	flight *refreshFlight
	fill   *nearFill
	ver    *redis.StringCmd
	card   *redis.IntCmd
	cmd    *redis.StringSliceCmd
	meta   *redis.IntCmd
}

// softInvalidate handles a tracking invalidation of id (or a
// re-validation that found another version): reads in flight install
// nothing (as invalidate), and a held ladder is marked stale rather than
// dropped. It reports whether a ladder is held, so the caller queues its
// background re-read.
func (nc *near) softInvalidate(id string, nowNs int64) (queue bool) {
	h := nc.hash(id)
	sh := nc.shard(h)
	sh.mu.Lock()
	if k := sh.fills[id]; k != nil {
		k.gen++
	}
	delete(sh.big, id)
	l := sh.m[h]
	if l == nil || l.id != id {
		sh.mu.Unlock()
		return false
	}
	if l.staleAt.Load() == 0 {
		// The first unresolved invalidation's time: a stream of them does
		// not extend how long the ladder is served.
		l.staleAt.Store(nowNs)
	}
	sh.mu.Unlock()
	nc.obs.OnNear(id, NearInvalidate)
	return true
}

// queueReread adds ids to the background refresher's set.
func (nc *near) queueReread(ids []string) {
	if len(ids) == 0 {
		return
	}
	nc.pendMu.Lock()
	for _, id := range ids {
		nc.pending[id] = struct{}{}
	}
	nc.pendMu.Unlock()
	select {
	case nc.wake <- struct{}{}:
	default:
	}
}

// refresher re-reads, in the background, the ladders queued by
// invalidations, in batches of up to rereadBatch promotions (two
// pipelines each at most).
func (t *tracker) refresher(ctx context.Context) {
	defer t.wg.Done()
	nc := t.nc
	for {
		select {
		case <-ctx.Done():
			return
		case <-nc.wake:
		}
		nc.pendMu.Lock()
		ids := make([]string, 0, len(nc.pending))
		for id := range nc.pending {
			ids = append(ids, id)
		}
		clear(nc.pending)
		nc.pendMu.Unlock()
		if nc.holdRereads.Load() {
			continue
		}
		for i := 0; i < len(ids) && ctx.Err() == nil; i += rereadBatch {
			// MaxStaleness, not staleServe: a slow re-read still spares
			// the carts that wait for it a read each.
			rctx, cancel := context.WithTimeout(ctx, nc.opt.MaxStaleness)
			t.c.nearReread(rctx, ids[i:min(i+rereadBatch, len(ids))], false)
			cancel()
		}
	}
}

// rereadBatch bounds the promotions of one re-read pipeline.
const rereadBatch = 1000

// nearReread re-reads the held ladders of ids that need it (stale or
// unconfirmed), one flight per promotion: it leads the flights not yet in
// flight, in one batch, and with wait also waits for the others (until
// ctx ends). It returns the round trips it spent.
func (c *Cache) nearReread(ctx context.Context, ids []string, wait bool) int {
	nc := c.near
	var lead []*reread
	var join []*refreshFlight
	nowNs := time.Now().UnixNano()
	for _, id := range ids {
		h := nc.hash(id)
		sh := nc.shard(h)
		sh.mu.Lock()
		if fl := sh.flights[id]; fl != nil {
			sh.mu.Unlock()
			if wait {
				fl.joined.Add(1)
				join = append(join, fl)
			}
			continue
		}
		l := sh.m[h]
		if l == nil || l.id != id || (l.staleAt.Load() == 0 && nowNs-max(l.validated.Load(), nc.confirmed.Load()) < int64(nc.opt.MaxStaleness)/2) {
			sh.mu.Unlock() // nothing held (a cart reads it), or confirmed since it was queued
			continue
		}
		fl := &refreshFlight{done: make(chan struct{})}
		sh.flights[id] = fl
		sh.mu.Unlock()
		lead = append(lead, &reread{id: id, h: h, held: l, flight: fl})
	}
	rts := 0
	if len(lead) > 0 {
		rts = c.runReread(ctx, lead)
	}
	if wait {
		for _, fl := range join {
			select {
			case <-fl.done:
			case <-ctx.Done():
				return rts
			}
		}
	}
	return rts
}

// runReread runs the flights rs: a version check of each, then one
// ladder read of those whose content changed. Every flight ends here,
// and every read begun is settled, adopted or abandoned.
func (c *Cache) runReread(ctx context.Context, rs []*reread) (rts int) {
	nc := c.near
	defer func() {
		for _, r := range rs {
			nc.abandon(r.fill)
			sh := nc.shard(r.h)
			sh.mu.Lock()
			if sh.flights[r.id] == r.flight {
				delete(sh.flights, r.id)
			}
			sh.mu.Unlock()
			close(r.flight.done)
		}
	}()
	pipe := c.client.Pipeline()
	for _, r := range rs {
		// Begun before the check is sent: an invalidation, or another read
		// settling, while it is in flight makes it adopt nothing and
		// install nothing.
		r.fill = nc.begin(r.id)
		r.ver = pipe.HGet(ctx, c.metaKey(r.id), metaVersion)
		r.card = pipe.ZCard(ctx, c.tiersKey(r.id))
	}
	rts++
	nc.checks.Add(int64(len(rs)))
	if _, err := pipe.Exec(ctx); err != nil && transportErr(rs, func(r *reread) []error { return []error{r.ver.Err(), r.card.Err()} }) {
		return rts // nothing confirmed: the ladders age out or are re-read again
	}
	var again []*reread
	for _, r := range rs {
		v, err := r.ver.Result()
		if err == nil && r.card.Err() == nil && v == r.held.version && r.card.Val() == int64(len(r.held.scores)+2) {
			nc.adopt(r.fill, r.held)
			continue
		}
		again = append(again, r)
	}
	if len(again) == 0 {
		return rts
	}
	pipe = c.client.Pipeline()
	for _, r := range again {
		r.cmd = pipe.ZRange(ctx, c.tiersKey(r.id), 0, int64(nc.opt.MaxTiers)+2)
		r.meta = pipe.Exists(ctx, c.metaKey(r.id))
	}
	rts++
	nc.ladderReads.Add(int64(len(again)))
	if _, err := pipe.Exec(ctx); err != nil && transportErr(again, func(r *reread) []error { return []error{r.cmd.Err(), r.meta.Err()} }) {
		return rts
	}
	for _, r := range again {
		raws, err := r.cmd.Result()
		switch {
		case err != nil || r.meta.Err() != nil:
			nc.settle(r.fill, nil, false) // a Redis error reply: carts take the Redis path
		case len(raws) > nc.opt.MaxTiers+2:
			nc.settle(r.fill, nil, true)
		case len(raws) == 0:
			nc.settle(r.fill, nil, false)
		default:
			l, err := c.buildLadder(r.id, raws)
			if err != nil {
				l = nil
			}
			nc.settle(r.fill, l, false)
		}
	}
	return rts
}

// transportErr reports whether a pipeline's error is more than Redis
// error replies (which the reads handle one by one).
func transportErr(rs []*reread, errs func(*reread) []error) bool {
	var rerr redis.Error
	for _, r := range rs {
		for _, e := range errs(r) {
			if e != nil && !errors.Is(e, redis.Nil) && !errors.As(e, &rerr) {
				return true
			}
		}
	}
	return false
}

// adopt ends re-read f, which found l's version and tier count unchanged:
// if nothing moved while it was in flight (tracking up and unchanged, no
// invalidation of the promotion, no other read of it settled) and l is
// still held, l is confirmed as of f's send and served again. Adopting
// answers nothing new, so the generation stays.
func (nc *near) adopt(f *nearFill, l *ladder) {
	sh := nc.shard(f.h)
	sh.mu.Lock()
	fresh := nc.up.Load() && nc.epoch.Load() == f.epoch && f.key.gen == f.gen
	sh.release(f)
	ok := fresh && sh.m[l.h] == l
	if ok {
		l.staleAt.Store(0)
		if l.validated.Load() < f.at {
			l.validated.Store(f.at)
		}
	}
	sh.mu.Unlock()
	if ok {
		nc.adopted.Add(1)
	}
}
