package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
)

// nearMatch answers qs from held ladders. Lines whose ladder is not held
// read their promotion's whole tiers ZSET (one pipelined round trip for
// all of them), are answered from it, and install it. It reports
// handled=false, and does nothing, while tracking is down: then every
// line takes the Redis path.
func (c *Cache) nearMatch(ctx context.Context, qs []Query, opt MatchOptions, rs []Result) (handled bool, err error) {
	nc := c.near
	nc.start(ctx, c)
	if !nc.up.Load() {
		return false, nil
	}
	start := time.Now() // also the call's duration for the Observer
	nowNs, nowMs := start.UnixNano(), start.UnixMilli()
	if !c.wallNow {
		nowMs = c.now().UnixMilli()
	}
	var miss, direct, reread []int // line indexes
	var scores []int64             // query scores of the miss and re-read lines, by line
	hits := int64(0)               // added to nc.hits once per cart: one shared counter write, not one per line
	for i := range qs {
		rs[i] = Result{Promotion: qs[i].Promotion}
		l, st := nc.lookup(qs[i].Promotion, nowNs)
		var s int64
		var err error
		if st == nearServe {
			s, err = c.queryScore(&qs[i])
		} else {
			s, err = c.encodeQuery(&qs[i])
		}
		if err != nil {
			rs[i].Err = err
			continue
		}
		switch st {
		case nearServe:
			hits++
			if !c.nopObs {
				c.obs.OnNear(qs[i].Promotion, NearHit)
			}
			c.answer(l, &qs[i], s, nowMs, opt.Next, &rs[i])
		case nearBig:
			direct = append(direct, i)
		default:
			if scores == nil {
				scores = make([]int64, len(qs))
			}
			scores[i] = s
			if st == nearReread {
				reread = append(reread, i)
				continue
			}
			miss = append(miss, i)
			c.obs.OnNear(qs[i].Promotion, NearMiss)
		}
	}
	rts := 0
	if len(reread) > 0 {
		// Held ladders not servable (stale past staleServe, unconfirmed
		// past MaxStaleness): one re-read per promotion, shared with
		// every cart that asks meanwhile; a line whose ladder is still not
		// servable after it reads the ladder itself.
		ids := make([]string, 0, len(reread))
		for _, i := range reread {
			if id := qs[i].Promotion; !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		rts += c.nearReread(ctx, ids, true)
		nowNs = time.Now().UnixNano()
		for _, i := range reread {
			if l, st := nc.lookup(qs[i].Promotion, nowNs); st == nearServe {
				hits++
				if !c.nopObs {
					c.obs.OnNear(qs[i].Promotion, NearHit)
				}
				c.answer(l, &qs[i], scores[i], nowMs, opt.Next, &rs[i])
				continue
			}
			miss = append(miss, i)
			c.obs.OnNear(qs[i].Promotion, NearMiss)
		}
	}
	if hits > 0 {
		nc.hits.Add(hits)
	}
	if n := len(miss) + len(direct); n > 0 {
		nc.misses.Add(int64(n)) // direct: lines of promotions not held because too big
	}
	if len(miss) > 0 {
		rts++
		more, err := c.nearFill(ctx, qs, opt, rs, miss, scores, nowMs)
		if err != nil {
			c.obs.OnRoundTrips(OpMatch, rts)
			return true, fmt.Errorf("cache: match: %w", ctxErr(ctx, err))
		}
		direct = append(direct, more...)
	}
	if opt.Gifts {
		n, err := c.nearGifts(ctx, rs, direct)
		if n > 0 {
			c.obs.OnRoundTrips(OpGifts, n)
		}
		if err != nil {
			c.obs.OnRoundTrips(OpMatch, rts)
			return true, fmt.Errorf("cache: match gifts: %w", ctxErr(ctx, err))
		}
	}
	if len(direct) > 0 {
		// Lines the near cache cannot answer (a corrupt or oversized
		// ladder, a foreign key) take the Redis path, so their answers and
		// errors are exactly its own.
		sub := make([]Query, len(direct))
		for k, i := range direct {
			sub[k] = qs[i]
		}
		subRs := make([]Result, len(direct))
		if err := c.matchRedis(ctx, sub, opt, subRs); err != nil {
			return true, err
		}
		for k, i := range direct {
			rs[i] = subRs[k]
		}
	}
	if c.nopObs {
		return true, nil
	}
	c.obs.OnRoundTrips(OpMatch, rts)
	c.reportLookups(rs, direct, time.Since(start)) // matchRedis reported the direct lines
	return true, nil
}

// nearFill reads the ladders of the miss lines in one pipeline, answers
// them and installs what it read. It returns the lines that must take the
// Redis path instead.
func (c *Cache) nearFill(ctx context.Context, qs []Query, opt MatchOptions, rs []Result, miss []int, scores []int64, nowMs int64) (direct []int, err error) {
	nc := c.near
	type read struct {
		fill *nearFill
		cmd  *redis.StringSliceCmd
		meta *redis.IntCmd // EXISTS of the meta hash, read with the ladder
		l    *ladder
		bad  bool // take the Redis path
	}
	reads := make(map[string]*read, len(miss))
	// Every read begun is settled below, or abandoned here when its reply
	// never came: its promotion's record lives while it is in flight.
	defer func() {
		for _, rd := range reads {
			nc.abandon(rd.fill)
		}
	}()
	pipe := c.client.Pipeline()
	for _, i := range miss {
		id := qs[i].Promotion
		if reads[id] != nil {
			continue
		}
		// Begun before the read is sent: an invalidation, or another read
		// of the promotion settling, between the two makes settle refuse
		// the reply.
		rd := &read{fill: nc.begin(id)}
		rd.cmd = pipe.ZRange(ctx, c.tiersKey(id), 0, int64(nc.opt.MaxTiers)+2)
		// An empty ladder is ErrNotFound only without a meta hash; with
		// one the promotion is damaged, which the Redis path tells apart.
		rd.meta = pipe.Exists(ctx, c.metaKey(id))
		reads[id] = rd
	}
	nc.ladderReads.Add(int64(len(reads)))
	if _, err := pipe.Exec(ctx); err != nil {
		for _, rd := range reads {
			var rerr redis.Error
			for _, e := range []error{rd.cmd.Err(), rd.meta.Err()} {
				if e != nil && !errors.As(e, &rerr) {
					return nil, e
				}
			}
		}
	}
	for id, rd := range reads {
		raws, err := rd.cmd.Result()
		switch {
		case err != nil || rd.meta.Err() != nil:
			rd.bad = true // a Redis error reply: the Redis path files it per line
			nc.settle(rd.fill, nil, false)
		case len(raws) == 0:
			rd.bad = rd.meta.Val() != 0
			nc.settle(rd.fill, nil, false)
		case len(raws) > nc.opt.MaxTiers+2:
			rd.bad = true
			nc.settle(rd.fill, nil, true)
		default:
			l, err := c.buildLadder(id, raws)
			if err != nil {
				rd.bad = true
				nc.settle(rd.fill, nil, false)
				continue
			}
			rd.l = l
			nc.settle(rd.fill, l, false)
		}
	}
	for _, i := range miss {
		rd := reads[qs[i].Promotion]
		switch {
		case rd.bad:
			direct = append(direct, i)
		case rd.l == nil:
			rs[i].Err = ErrNotFound
		default:
			c.answer(rd.l, &qs[i], scores[i], nowMs, opt.Next, &rs[i])
		}
	}
	return direct, nil
}

// buildLadder decodes a whole tiers ZSET (as ZRANGE 0 -1 returns it) into
// a ladder: floor, tiers strictly ascending, ceiling, all of one version
// and metadata. Anything else is ErrCorrupt.
func (c *Cache) buildLadder(id string, raws []string) (*ladder, error) {
	if len(raws) < 2 {
		return nil, fmt.Errorf("%w: promotion %q has %d members", ErrCorrupt, id, len(raws))
	}
	l := &ladder{id: id, scores: make([]int64, 0, len(raws)-2), hits: make([]TierHit, 0, len(raws)-2)}
	tag := ownerTag(id)
	for k, raw := range raws {
		d, err := c.decode(id, raw)
		if err != nil {
			return nil, err
		}
		m := &d.m
		if m.hasOwner && m.owner != tag {
			return nil, fmt.Errorf("%w: promotion %q member %d belongs to another promotion", ErrCorrupt, id, k)
		}
		l.bytes += int64(len(raw)) + nearTierOverhead
		want := uint8(kindTier)
		switch k {
		case 0:
			want, l.floor, l.version = kindFloor, d, m.version
		case len(raws) - 1:
			want = kindCeiling
		}
		f := &l.floor.m
		if m.kind != want || m.version != f.version || m.metric != f.metric || m.digits != f.digits ||
			m.startMs != f.startMs || m.endMs != f.endMs {
			return nil, fmt.Errorf("%w: promotion %q member %d does not fit its ladder", ErrCorrupt, id, k)
		}
		if want == kindTier {
			if n := len(l.scores); n > 0 && l.scores[n-1] >= m.score {
				return nil, fmt.Errorf("%w: promotion %q tiers out of order", ErrCorrupt, id)
			}
			l.scores, l.hits = append(l.scores, m.score), append(l.hits, d.tierHit())
		}
	}
	return l, nil
}

// admit checks a versioned member against the query and the clock: the
// checks every answer, from Redis or from a ladder, applies first.
func (c *Cache) admit(q *Query, h *member, nowMs int64) error {
	switch {
	case q.Metric != h.metric:
		return fmt.Errorf("%w: promotion %q is %s, query is %s", ErrMetricMismatch, q.Promotion, h.metric, q.Metric)
	case h.metric == gradient.Amount && h.digits != c.digits:
		return fmt.Errorf("%w: promotion %q stores amounts with %d minor digits, this Cache encodes queries with %d (Options.MinorDigits)",
			ErrDigitsMismatch, q.Promotion, h.digits, c.digits)
	case !h.active(nowMs):
		return ErrNotActive
	}
	return nil
}

func (d *decoded) tierHit() TierHit {
	return TierHit{ID: d.m.tierID, Score: d.m.score, Threshold: d.threshold, Reward: d.m.reward, HasGifts: d.m.hasGifts}
}

// answer is evaluate for a held ladder: the same checks in the same
// order, a binary search for the hit, the tier above it as Next. Tier and
// Next point into the ladder (read-only, see Result): a cart answered
// from memory allocates only its results.
func (c *Cache) answer(l *ladder, q *Query, s, nowMs int64, next bool, r *Result) {
	r.Version = l.version
	f := &l.floor.m
	if err := c.admit(q, f, nowMs); err != nil {
		r.Err = err
		return
	}
	lo, hi := 0, len(l.scores) // first tier with score > s
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if l.scores[mid] <= s {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo > 0 {
		r.Tier = &l.hits[lo-1]
	} else {
		r.Err = ErrNoTier
	}
	if next && lo < len(l.scores) {
		r.Next = &l.hits[lo]
		r.Shortfall = f.scoreValue(l.scores[lo] - s)
	}
}

// nearGifts fills the gifts of near-answered hits: from the ladder's
// version when held, else with one HGETALL per (promotion, version) in
// one pipeline, kept on the ladder for the next reads. Lines in skip took
// the Redis path, which fetches its own.
func (c *Cache) nearGifts(ctx context.Context, rs []Result, skip []int) (int, error) {
	nc := c.near
	skipped := func(i int) bool {
		for _, k := range skip {
			if k == i {
				return true
			}
		}
		return false
	}
	type fetch struct {
		cmd   *redis.MapStringStringCmd
		lists map[string][]gradient.Gift
	}
	var fetches map[string]*fetch // by gifts key
	var pipe redis.Pipeliner
	nowNs := time.Now().UnixNano()
	var cp copies
	for i := range rs {
		t := rs[i].Tier
		if t == nil || !t.HasGifts || t.Gifts != nil || skipped(i) {
			continue
		}
		if l, _ := nc.get(rs[i].Promotion, nowNs); l != nil && l.version == rs[i].Version {
			if g := l.gifts.Load(); g != nil {
				if list, ok := (*g)[t.ID]; ok {
					rs[i].Tier = cp.withGifts(rs, t, list)
					continue
				}
			}
		}
		key := c.giftsKey(rs[i].Promotion, rs[i].Version)
		if fetches[key] == nil {
			if pipe == nil {
				pipe, fetches = c.client.Pipeline(), map[string]*fetch{}
			}
			fetches[key] = &fetch{cmd: pipe.HGetAll(ctx, key)}
		}
	}
	if pipe == nil {
		return 0, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		var rerr redis.Error
		for _, f := range fetches {
			if e := f.cmd.Err(); e != nil && !errors.As(e, &rerr) {
				return 1, e
			}
		}
	}
	var missing []int
	for i := range rs {
		t := rs[i].Tier
		if t == nil || !t.HasGifts || t.Gifts != nil || skipped(i) {
			continue
		}
		f := fetches[c.giftsKey(rs[i].Promotion, rs[i].Version)]
		if e := f.cmd.Err(); e != nil {
			_ = lineErr(e, &rs[i]) // a Redis error reply; transport errors returned above
			continue
		}
		if f.lists == nil {
			f.lists = c.decodeGiftLists(rs[i].Promotion, rs[i].Version, f.cmd.Val())
		}
		list, ok := f.lists[t.ID]
		if !ok {
			raw, present := f.cmd.Val()[t.ID]
			if !present {
				missing = append(missing, i)
				continue
			}
			_, err := decodeGifts(raw, c.maxBytes)
			rs[i].Err = fmt.Errorf("promotion %q tier %q: %w", rs[i].Promotion, t.ID, err)
			continue
		}
		rs[i].Tier = cp.withGifts(rs, t, list)
	}
	if len(missing) > 0 {
		// As on the Redis path: ErrDamaged while the version is current,
		// else ErrGiftsGone; one more round trip, only here.
		return 2, c.giftsMissing(ctx, rs, missing, true)
	}
	return 1, nil
}

// copies hands out the copies of held tiers and gift lists a call
// returns (callers may write to theirs; the held ones are shared) from a
// few slabs instead of two allocations a line.
type copies struct {
	tiers []TierHit
	gifts []gradient.Gift
}

// withGifts is withGifts(t, a copy of list), both copies from the slabs.
func (cp *copies) withGifts(rs []Result, t *TierHit, list []gradient.Gift) *TierHit {
	if len(cp.tiers) == cap(cp.tiers) {
		n := 0
		for i := range rs {
			if rs[i].Tier != nil && rs[i].Tier.HasGifts {
				n++
			}
		}
		cp.tiers = make([]TierHit, 0, max(n, 1))
	}
	if cap(cp.gifts)-len(cp.gifts) < len(list) {
		cp.gifts = make([]gradient.Gift, 0, max(2*cap(cp.gifts), 4*len(list), 16))
	}
	at := len(cp.gifts)
	cp.gifts = append(cp.gifts, list...)
	cp.tiers = append(cp.tiers, *t)
	h := &cp.tiers[len(cp.tiers)-1]
	h.Gifts = nil // as append([]gradient.Gift(nil), list...) gives an empty list
	if len(list) > 0 {
		h.Gifts = cp.gifts[at:len(cp.gifts):len(cp.gifts)] // an append by the caller copies, never reaching the next line's
	}
	return h
}

// decodeGiftLists decodes a version's gift hash and, when every list is
// clean, keeps it on the held ladder of that version. A corrupt list is
// left out (its lines get the decode error) and nothing is kept.
func (c *Cache) decodeGiftLists(id, version string, raw map[string]string) map[string][]gradient.Gift {
	out := make(map[string][]gradient.Gift, len(raw))
	clean := true
	var size int64
	for tier, v := range raw {
		g, err := decodeGifts(v, c.maxBytes)
		if err != nil {
			c.obs.OnDecodeError(id, recordGifts, err)
			clean = false
			continue
		}
		out[tier] = g
		size += int64(len(tier)+len(v)) + nearTierOverhead
	}
	if l, _ := c.near.get(id, time.Now().UnixNano()); clean && l != nil && l.version == version {
		c.near.addGifts(l, out, size)
	}
	return out
}
