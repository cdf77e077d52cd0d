package tiers

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/cacheraw"
	"github.com/tierset/tierset/score"
)

// Impl names, as they appear in the table, the CSV and benchmark names.
const (
	implRange    = "range"
	implRaw      = "raw"
	implFullScan = "fullscan"
	implCart     = "cart"
	implRawCart  = "rawcart"
)

var (
	errEmpty = errors.New("bench: ZRANGE returned nothing (key missing or key layout mismatch)")
	errNoHit = errors.New("bench: no tier for a value drawn above the lowest threshold")
	// errNearMissed marks a near row whose lookups were not all answered
	// from memory: it measured Redis, not the near cache.
	errNearMissed = errors.New("bench: near row answered from Redis")
)

// matchRange is the library's match. A result without a tier is returned
// as (nil, err).
func matchRange(ctx context.Context, c *cache.Cache, q cache.Query) (*cache.TierHit, error) {
	r, err := c.Match(ctx, q, cache.MatchOptions{})
	if err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, r.Err
	}
	return r.Tier, nil
}

// zrangeArgs is the library's command, written out by hand.
func zrangeArgs(q *singleQuery) redis.ZRangeArgs {
	// Rev: Start is the high bound.
	return redis.ZRangeArgs{Key: q.key, Start: q.bound, Stop: score.NegInf, ByScore: true, Rev: true, Count: 1}
}

// matchRaw issues the library's ZRANGE through go-redis and decodes
// nothing: the floor any Go client pays for that command.
func matchRaw(ctx context.Context, rc redis.Cmdable, q *singleQuery) (string, error) {
	v, err := rc.ZRangeArgs(ctx, zrangeArgs(q)).Result()
	if err != nil {
		return "", fmt.Errorf("bench: raw zrange: %w", err)
	}
	if len(v) == 0 {
		return "", errEmpty
	}
	return v[0], nil
}

// fullScanHit is what the full scan found: the member, its score and its
// decoded tier.
type fullScanHit struct {
	Member  string
	Score   int64
	Decoded cache.TierHit
}

// matchFullScan is the anti-pattern the range match replaces: fetch the
// whole sorted set, decode every member, pick the largest threshold ≤ s in
// Go. It reports ok=false when s is below every tier. Every member is
// decoded with the library's own decoder (cacheraw.DecodeTier, the same
// guarded reader Match uses, without its memo), so the comparison is of
// the access pattern, not of decoders. The floor and ceiling sentinels are
// decoded like every member but are not tiers.
func matchFullScan(ctx context.Context, rc redis.Cmdable, key string, s int64) (hit fullScanHit, ok bool, err error) {
	zs, err := rc.ZRangeWithScores(ctx, key, 0, -1).Result()
	if err != nil {
		return hit, false, fmt.Errorf("bench: fullscan zrange: %w", err)
	}
	if len(zs) == 0 {
		return hit, false, errEmpty
	}
	type record struct {
		member  string
		score   int64
		decoded cache.TierHit
	}
	records := make([]record, 0, len(zs))
	for i := range zs {
		m, _ := zs[i].Member.(string)
		sc, err := score.ParseFloat(zs[i].Score)
		if err != nil {
			return hit, false, fmt.Errorf("bench: fullscan score: %w", err)
		}
		d, isTier, err := cacheraw.DecodeTier(m)
		if err != nil {
			return hit, false, fmt.Errorf("bench: fullscan decode: %w", err)
		}
		if isTier && isTierScore(sc) {
			records = append(records, record{m, sc, d})
		}
	}
	best := -1
	for i := range records {
		if records[i].score <= s && (best < 0 || records[i].score > records[best].score) {
			best = i
		}
	}
	if best < 0 {
		return hit, false, nil
	}
	return fullScanHit{records[best].member, records[best].score, records[best].decoded}, true, nil
}

// matchCart is the library's cart match (one pipeline).
func matchCart(ctx context.Context, c *cache.Cache, qs []cache.Query) ([]cache.Result, error) {
	rs, err := c.MatchCart(ctx, qs, cache.MatchOptions{})
	if err != nil {
		return nil, err
	}
	if len(rs) != len(qs) {
		return nil, fmt.Errorf("bench: MatchCart returned %d results for %d lines", len(rs), len(qs))
	}
	return rs, nil
}

// matchRawCart pipelines the cart's ZRANGEs through go-redis and decodes
// nothing. cmds is the caller's scratch, len(cmds) == len(cart).
func matchRawCart(ctx context.Context, rc redis.UniversalClient, cart []singleQuery, cmds []*redis.StringSliceCmd) error {
	p := rc.Pipeline()
	for i := range cart {
		cmds[i] = p.ZRangeArgs(ctx, zrangeArgs(&cart[i]))
	}
	if _, err := p.Exec(ctx); err != nil {
		return fmt.Errorf("bench: raw pipeline: %w", err)
	}
	for _, c := range cmds {
		if len(c.Val()) == 0 {
			return errEmpty
		}
	}
	return nil
}

// target is one backend a workload is measured on.
type target struct {
	lib  *cache.Cache
	rc   redis.UniversalClient
	near *cache.Cache // nil: no near rows (see nearSkipped)
}

// impl is one measured implementation. newOp returns a fresh op for one
// goroutine (ops may keep per-goroutine scratch); op(ctx, i) performs
// lookup number i of the pre-generated values.
type impl struct {
	name  string
	tiers int
	lines int // lookups per op
	// hits, when set, counts lookups answered from memory: every timed
	// lookup must raise it (near rows).
	hits  func() int64
	newOp func() func(ctx context.Context, i int) error
}

// impls returns the five implementations over w, and the two near rows
// when t has a near cache. Every timed value is a
// hit by construction; anything else is an error that aborts the run.
func (t target) impls(w *workload) []impl {
	n, nc := len(w.single), len(w.carts)
	lines := len(w.promos)
	return append([]impl{
		{name: implRange, tiers: w.tiers, lines: 1, newOp: func() func(context.Context, int) error {
			return func(ctx context.Context, i int) error {
				h, err := matchRange(ctx, t.lib, w.single[i%n].q)
				if err == nil && h == nil {
					err = errNoHit
				}
				return err
			}
		}},
		{name: implRaw, tiers: w.tiers, lines: 1, newOp: func() func(context.Context, int) error {
			return func(ctx context.Context, i int) error {
				_, err := matchRaw(ctx, t.rc, &w.single[i%n])
				return err
			}
		}},
		{name: implFullScan, tiers: w.tiers, lines: 1, newOp: func() func(context.Context, int) error {
			return func(ctx context.Context, i int) error {
				q := &w.single[i%n]
				_, ok, err := matchFullScan(ctx, t.rc, q.key, q.score)
				if err == nil && !ok {
					err = errNoHit
				}
				return err
			}
		}},
		{name: implCart, tiers: w.tiers, lines: lines, newOp: func() func(context.Context, int) error {
			return func(ctx context.Context, i int) error {
				return cartHits(matchCart(ctx, t.lib, w.cartQs[i%nc]))
			}
		}},
		{name: implRawCart, tiers: w.tiers, lines: lines, newOp: func() func(context.Context, int) error {
			cmds := make([]*redis.StringSliceCmd, lines)
			return func(ctx context.Context, i int) error {
				return matchRawCart(ctx, t.rc, w.carts[i%nc], cmds)
			}
		}},
	}, t.nearImpls(w)...)
}

// isTierScore tells tier members from the cache's sentinels, which sit at
// -1 (floor) and 2^53 (ceiling); thresholds are > 0 and below 2^53.
func isTierScore(s int64) bool { return s > 0 && s < score.MaxExact }

// isNoTier reports whether err is the library's "no tier reached".
func isNoTier(err error) bool { return errors.Is(err, gradient.ErrNoTier) }
