package cache

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/recheck.lua
var recheckLua string

var recheckScript = redis.NewScript(withoutComments(recheckLua))

// withoutComments drops a script's whole-line comments, so EVAL sends only
// the code.
func withoutComments(src string) string {
	var b strings.Builder
	for _, l := range strings.Split(src, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "--") {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// recheck re-reads the lines marked recheck with lua/recheck.lua, one script
// call per line in one pipeline (on a Cluster split per master, in
// parallel): each line then sees one state of its promotion, atomically
// with its meta key. EVAL, not EVALSHA: a pipeline cannot fall back from
// NOSCRIPT, and this path is rare; the body goes without its comments.
func (c *Cache) recheck(ctx context.Context, lines []line, rs []Result) error {
	pipe := c.client.Pipeline()
	cmds := make([]*redis.Cmd, len(lines))
	for i := range lines {
		ln := &lines[i]
		if !ln.recheck || rs[i].Err != nil {
			continue
		}
		next := "0"
		if ln.wantNext {
			next = "1"
		}
		cmds[i] = recheckScript.Eval(ctx, pipe, []string{ln.key, c.metaKey(rs[i].Promotion)}, ln.score, next)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		for i, cmd := range cmds {
			if cmd != nil {
				if err := lineErr(cmd.Err(), &rs[i]); err != nil {
					return err
				}
			}
		}
	}
	for i, cmd := range cmds {
		if cmd == nil || cmd.Err() != nil {
			continue
		}
		ln := &lines[i]
		vals, err := cmd.Slice()
		if err != nil || len(vals) != 3 {
			rs[i].Err = fmt.Errorf("%w: promotion %q: recheck reply %v", ErrCorrupt, rs[i].Promotion, cmd.Val())
			continue
		}
		ln.reread, ln.hitDec, ln.nextDec = true, nil, nil
		ln.hitRaw, ln.hitOK = vals[0].(string)
		if ln.wantNext {
			ln.nextRaw, ln.nextOK = vals[1].(string)
		}
		ln.metaExists = vals[2] == int64(1)
	}
	return nil
}

// damaged is the error of a promotion whose stored keys are not whole.
func damaged(promotion, what string) error {
	return fmt.Errorf("%w: promotion %q: %s (a Refresh of it rewrites it)", ErrDamaged, promotion, what)
}

// decode returns the decoded member record raw, from the memo when this
// Cache decoded the same bytes before. The record is shared: callers copy
// what they need out of it and never write to it.
func (c *Cache) decode(promotion, raw string) (*decoded, error) {
	if d := c.memo.get(raw); d != nil {
		return d, nil
	}
	m, err := decodeMember(raw, c.maxBytes)
	if err != nil {
		c.obs.OnDecodeError(promotion, recordMember, err)
		return nil, err
	}
	d := &decoded{raw: raw, m: m}
	if m.kind == kindTier {
		d.threshold = m.scoreValue(m.score)
	}
	c.memo.put(d)
	return d, nil
}

// misplaced is the error of a member that belongs to another promotion.
func (c *Cache) misplaced(promotion string) error {
	err := fmt.Errorf("%w: promotion %q: member of another promotion under its tiers key", ErrCorrupt, promotion)
	c.obs.OnDecodeError(promotion, recordMember, err)
	return err
}

// evaluate turns a line's replies into its Result. The hit lives in the
// line; next tiers are appended to the shared backing slice, so a cart
// allocates its TierHits once.
func (c *Cache) evaluate(q *Query, ln *line, r *Result, nowMs int64, hits []TierHit) []TierHit {
	if r.Err != nil {
		return hits
	}
	if !ln.hitOK {
		switch {
		case !ln.reread:
			ln.recheck = true // not found, damaged, or created between two reads
		case ln.nextOK:
			r.Err = damaged(q.Promotion, "floor sentinel missing from its tiers key")
		case ln.metaExists:
			r.Err = damaged(q.Promotion, "tiers key missing, meta present")
		default:
			r.Err = ErrNotFound
		}
		return hits
	}
	tag := ln.tag
	hd, err := ln.hitDec, error(nil)
	if hd == nil {
		hd, err = c.decode(q.Promotion, ln.hitRaw)
	}
	if err == nil && hd.m.hasOwner && hd.m.owner != tag {
		err = c.misplaced(q.Promotion)
	}
	if err != nil {
		r.Err = err
		return hits
	}
	h := &hd.m
	var nd *decoded
	if ln.wantNext {
		if !ln.nextOK {
			if ln.reread {
				r.Err = damaged(q.Promotion, "ceiling sentinel missing from its tiers key")
			} else {
				ln.recheck = true // deleted between the two reads, or damaged
			}
			return hits
		}
		if nd = ln.nextDec; nd == nil {
			nd, err = c.decode(q.Promotion, ln.nextRaw)
		}
		if err == nil && nd.m.hasOwner && nd.m.owner != tag {
			err = c.misplaced(q.Promotion)
		}
		if err != nil {
			r.Err = err
			return hits
		}
		if nd.m.version != h.version {
			if ln.reread {
				r.Err = fmt.Errorf("%w: promotion %q: members of versions %s and %s in one tiers key", ErrCorrupt, q.Promotion, h.version, nd.m.version)
			} else {
				ln.recheck = true // a refresh committed between the two reads
			}
			return hits
		}
	}
	r.Version = h.version
	if err := c.admit(q, h, nowMs); err != nil {
		r.Err = err
		return hits
	}
	switch h.kind {
	case kindTier:
		if h.score > ln.score {
			// A ZRANGE finds members by their stored score, but the record
			// names the tier: one stored below its own threshold (moved
			// behind the cache's back) would price a tier the line did not
			// reach.
			r.Err = fmt.Errorf("%w: promotion %q: tier %q of score %d stored at or below the query's %d", ErrCorrupt, q.Promotion, h.tierID, h.score, ln.score)
			return hits
		}
		hits = append(hits, TierHit{ID: h.tierID, Score: h.score, Threshold: hd.threshold, Reward: h.reward, HasGifts: h.hasGifts})
		r.Tier = &hits[len(hits)-1]
	case kindFloor:
		r.Err = ErrNoTier
	default:
		r.Err = fmt.Errorf("%w: promotion %q: ceiling sentinel below the query", ErrCorrupt, q.Promotion)
		return hits
	}
	if nd != nil {
		n := &nd.m
		switch n.kind {
		case kindTier:
			if n.score <= ln.score {
				// Stored above the query, its record at or below it: the
				// next tier would come with a shortfall of zero or less.
				r.Tier, r.Err = nil, fmt.Errorf("%w: promotion %q: next tier %q of score %d stored above the query's %d", ErrCorrupt, q.Promotion, n.tierID, n.score, ln.score)
				return hits
			}
			threshold := nd.threshold
			if n.metric != h.metric || n.digits != h.digits {
				threshold = h.scoreValue(n.score) // the hit's unit, as the query's
			}
			hits = append(hits, TierHit{ID: n.tierID, Score: n.score, Threshold: threshold, Reward: n.reward, HasGifts: n.hasGifts})
			r.Next = &hits[len(hits)-1]
			r.Shortfall = h.scoreValue(n.score - ln.score)
		case kindCeiling:
		default:
			r.Tier, r.Err = nil, fmt.Errorf("%w: promotion %q: floor sentinel above the query", ErrCorrupt, q.Promotion)
		}
	}
	return hits
}
