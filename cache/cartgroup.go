package cache

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/score"
)

// A cart often has several lines on one promotion. Each would cost the
// server a ZRANGE of its own; instead the lines of one promotion whose
// scores lie close together are answered by one read of the members
// from the highest line's score down:
//
//	ZRANGE key high -inf BYSCORE REV LIMIT 0 n
//
// A line's hit is the first member of that reply whose record score is
// at or below the line's: what its own ZRANGE key s -inf BYSCORE REV
// LIMIT 0 1 returns, since the reply is a prefix of the same order and a
// member's record carries the score it is stored at. Tier scores are
// distinct integers, so at most high-low members lie above the lowest
// line's score and n = high-low+1 always reaches its hit. With Next, a
// line's next tier is the member just above its hit in the reply, or,
// for lines with no member between their score and the highest, the
// highest line's own next read, whose version evaluate compares with the
// hit's as for any line. One read is one snapshot, so a line's hit and
// a next tier taken from the same reply are of one version. The lines of
// a group need not all answer from one version, though: a line whose
// next tier came from the highest line's own read, sent before the
// group's, is re-read alone when a refresh committed in between, and
// gets the newer version while its group's other lines keep the reply's
// (TestCartGroupRepublishedMidCart), as the lines of a cart read alone
// always could.
//
// The reply is trusted only as far as it reads as a ladder the cache
// wrote: records that decode, of this promotion, at strictly falling
// scores, the first at or below the highest line's (so it always
// reaches the lowest line's hit). A reply that is not (a member planted
// behind the cache's back), or that runs out (nothing stored), answers
// none of the lines from there down: each is re-read alone with its meta
// key (recheck), as a line with nothing stored is, so it gets its own
// read's answer. WITHSCORES would show the stored
// scores instead of the records', but costs the server 2.6 times as much
// per read (Redis 7.0 formats every score as a double). So a member moved
// to a score its record does not say (a ZADD behind the cache's back) is
// the one tampering neither read sees: the group answers by the records,
// where the line's own read, which finds members by stored score, may
// take another member; evaluate then refuses, as ErrCorrupt, a hit whose
// record is above the line's score or a next tier whose record is not,
// so neither read prices a tier the line did not reach
// (TestFaultMemberMovedScore).

// maxGroupSpan bounds n, the members one group's read may return: lines
// of a promotion further apart than this (amounts in minor units, say)
// are split into several groups, or read alone, so a group never returns
// more members than it saves commands.
const maxGroupSpan = 32

// groupArgc is the argument count of a group's read.
const groupArgc = 9 // ZRANGE key high -inf BYSCORE REV LIMIT 0 n

// cartGroup is the lines order[lo:hi] (ascending score) of one promotion,
// read by cmd.
type cartGroup struct {
	lo, hi int
	limit  int64
	cmd    *redis.StringSliceCmd
}

// cartGroups is the grouping of one call's lines.
type cartGroups struct {
	order  []int // line indexes, by promotion then score
	groups []cartGroup
	// in[i] is 1 + the index of line i's group, 0 for a line read alone.
	in []int32
}

// cartScratch is one call's working memory, pooled between carts
// (Cache.scratch): results never point into it.
type cartScratch struct {
	lines []line
	sort  []uint64 // sortLines
	args  []any
	cmds  []redis.Cmder
	slab  cmdSlab // the commands cmds holds
	gs    cartGroups
	pipe  redis.Pipeliner // on Cache.client, empty between carts
}

// linesFor returns n zeroed lines.
func (sc *cartScratch) linesFor(n int) []line {
	if cap(sc.lines) < n {
		sc.lines = make([]line, n)
	}
	return sc.lines[:n]
}

// reset drops every reference the call left (commands, replies, keys),
// so a pooled scratch holds no cart's data.
func (sc *cartScratch) reset(n int) {
	clear(sc.lines[:n])
	clear(sc.args)
	clear(sc.cmds)
	clear(sc.slab.cmds)
	clear(sc.gs.groups)
	if sc.pipe != nil {
		sc.pipe.Discard() // Exec emptied it; a call that failed before Exec did not
	}
	sc.args, sc.cmds, sc.slab.cmds, sc.gs.groups = sc.args[:0], sc.cmds[:0], sc.slab.cmds[:0], sc.gs.groups[:0]
}

// sortLines sets sc.gs.order to the indexes of the valid lines (rs[i].Err
// nil), by promotion then score. It sorts by the promotion's ownerTag
// first, as plain integers (tag<<32 | index, no comparison function),
// which keeps each promotion's lines together and leaves only the few
// lines of one tag to order by ID and score.
func (sc *cartScratch) sortLines(qs []Query, lines []line, rs []Result) {
	keys := sc.sort[:0]
	for i := range lines {
		if rs[i].Err == nil {
			keys = append(keys, uint64(lines[i].tag)<<32|uint64(i))
		}
	}
	slices.Sort(keys)
	order := sc.gs.order[:0]
	for _, k := range keys {
		order = append(order, int(uint32(k)))
	}
	for lo := 0; lo < len(order); {
		hi := lo + 1
		for hi < len(order) && keys[hi]>>32 == keys[lo]>>32 {
			hi++
		}
		if hi-lo > 1 {
			slices.SortFunc(order[lo:hi], func(a, b int) int {
				if c := strings.Compare(qs[a].Promotion, qs[b].Promotion); c != 0 {
					return c
				}
				return cmp.Compare(lines[a].score, lines[b].score)
			})
		}
		lo = hi
	}
	sc.sort, sc.gs.order = keys, order
}

// groupLines groups the lines of sc.gs.order (sortLines) that share a
// promotion and lie within maxGroupSpan of each other. It returns nil
// when no two lines do.
func groupLines(qs []Query, lines []line, sc *cartScratch) *cartGroups {
	gs := &sc.gs
	order := gs.order
	gs.groups = gs.groups[:0]
	for lo := 0; lo < len(order); {
		first := order[lo]
		hi := lo + 1
		for hi < len(order) && qs[order[hi]].Promotion == qs[first].Promotion &&
			lines[order[hi]].score-lines[first].score < maxGroupSpan {
			hi++
		}
		if hi-lo > 1 {
			if len(gs.groups) == 0 {
				if cap(gs.in) < len(lines) {
					gs.in = make([]int32, len(lines))
				}
				gs.in = gs.in[:len(lines)]
				clear(gs.in)
			}
			gs.groups = append(gs.groups, cartGroup{lo: lo, hi: hi, limit: lines[order[hi-1]].score - lines[first].score + 1})
			for _, i := range order[lo:hi] {
				gs.in[i] = int32(len(gs.groups))
			}
		}
		lo = hi
	}
	if len(gs.groups) == 0 {
		return nil
	}
	return gs
}

// grouped reports whether line i is read by its group.
func (gs *cartGroups) grouped(i int) bool { return gs.in[i] != 0 }

// ownsNext reports whether line i sends its own next-tier read: a line
// read alone, or the highest line of a group, whose next tier is also
// that of the group's lines with no member between them and it.
func (gs *cartGroups) ownsNext(i int) bool {
	g := gs.in[i]
	return g == 0 || gs.order[gs.groups[g-1].hi-1] == i
}

// send appends every group's read to cmds, its arguments to args, the
// command itself taken from cs.
func (gs *cartGroups) send(ctx context.Context, cs *cmdSlab, cmds []redis.Cmder, args []any, lines []line) ([]redis.Cmder, []any) {
	for k := range gs.groups {
		g := &gs.groups[k]
		top := &lines[gs.order[g.hi-1]]
		at := len(args)
		args = append(args, "zrange", top.keyArg, top.score, score.NegInf, "byscore", "rev", "limit", int64(0), g.limit) // Rev: the high bound first
		g.cmd = cs.cmd(ctx, args[at:len(args):len(args)])
		cmds = append(cmds, g.cmd)
	}
	return cmds, args
}

// errs files each group's Redis error reply under its lines and returns
// a transport error.
func (gs *cartGroups) errs(lines []line, rs []Result) error {
	for k := range gs.groups {
		g := &gs.groups[k]
		for _, i := range gs.order[g.lo:g.hi] {
			if err := lineErr(g.cmd.Err(), &rs[i]); err != nil {
				return err
			}
			// The group's next tier is its highest line's read.
			if top := &lines[gs.order[g.hi-1]]; top.next != nil {
				if err := lineErr(top.next.Err(), &rs[i]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// answer sets each grouped line's hitRaw (and nextRaw) from its group's
// reply, as its own reads would have; a line it cannot answer is left
// without a hit, for evaluate to have it re-read alone.
func (gs *cartGroups) answer(c *Cache, qs []Query, lines []line, rs []Result) {
groups:
	for k := range gs.groups {
		g := &gs.groups[k]
		if g.cmd.Err() != nil {
			continue // filed under the lines by errs
		}
		raws := g.cmd.Val()
		top := &lines[gs.order[g.hi-1]]
		id := qs[gs.order[g.hi-1]].Promotion
		tag := top.tag
		// raws[:j] are the members above the current line's score; dj is
		// raws[j] once decoded, dAbove raws[j-1]; above is the record
		// score of raws[j-1], or the highest line's score + 1 before the
		// first. The decoded records go to evaluate with the raw replies,
		// so it does not look them up again.
		j, above := 0, top.score+1
		var dj, dAbove *decoded
		for x := g.hi - 1; x >= g.lo; x-- {
			i := gs.order[x]
			ln := &lines[i]
			for j < len(raws) {
				if dj == nil {
					d, err := c.decode(id, raws[j])
					if err != nil || d.m.hasOwner && d.m.owner != tag || d.m.score >= above {
						continue groups // not a ladder the cache wrote: these lines are re-read alone
					}
					dj = d
				}
				if dj.m.score <= ln.score {
					break
				}
				above, j, dAbove, dj = dj.m.score, j+1, dj, nil
			}
			if j == len(raws) {
				continue groups // nothing stored at or below these lines: re-read alone
			}
			if rs[i].Err != nil {
				continue
			}
			ln.hitRaw, ln.hitOK, ln.hitDec = raws[j], true, dj
			if !ln.wantNext || ln == top {
				continue // the top line's next is its own read
			}
			if j > 0 {
				ln.nextRaw, ln.nextOK, ln.nextDec = raws[j-1], true, dAbove
			} else {
				ln.nextRaw, ln.nextOK = top.nextRaw, top.nextOK
			}
		}
	}
}
