package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
)

// Gifts fetches the gift lists of every hit in rs whose tier has gifts
// and that has none yet, in one pipelined round trip (none when there is
// nothing to fetch). Lists are read from the hit's own version, so they
// always belong to the tier that was matched. A line whose list is gone
// (its version was replaced or deleted more than Options.Grace ago) or
// corrupt keeps its Tier and gets ErrGiftsGone or ErrCorrupt in Err; a
// missing list of the current version is damage, ErrDamaged. A missing
// list costs one more round trip, to read the current version.
func (c *Cache) Gifts(ctx context.Context, rs []Result) error {
	n, err := c.fetchGifts(ctx, rs, false, false)
	c.obs.OnRoundTrips(OpGifts, n)
	if err != nil {
		return fmt.Errorf("cache: gifts: %w", ctxErr(ctx, err))
	}
	return nil
}

// fetchGifts fetches the gift lists of rs's hits. fresh: the hits were
// read by this call (a Match or MatchCart with Gifts), not handed in by
// the caller (Cache.Gifts). owned: rs's hits are also this call's own
// copies (the Redis path's), which take their lists in place; any
// other hit (the near cache's shared ladder, the caller's) gets a copy
// carrying its list.
func (c *Cache) fetchGifts(ctx context.Context, rs []Result, fresh, owned bool) (int, error) {
	// One HMGET per gifts key (promotion and version) for all the lines
	// it answers: the lines that need a list, by key, each with the
	// position of its tier among its key's fields.
	nwant := 0
	for i := range rs {
		if t := rs[i].Tier; t != nil && t.HasGifts && t.Gifts == nil {
			nwant++
		}
	}
	if nwant == 0 {
		return 0, nil
	}
	want := make([]int, 0, nwant)
	for i := range rs {
		if t := rs[i].Tier; t != nil && t.HasGifts && t.Gifts == nil {
			want = append(want, i)
		}
	}
	slices.SortStableFunc(want, func(a, b int) int {
		if c := cmp.Compare(rs[a].Promotion, rs[b].Promotion); c != 0 {
			return c
		}
		return cmp.Compare(rs[a].Version, rs[b].Version)
	})
	pipe := c.client.Pipeline()
	cmds := make([]*redis.SliceCmd, len(rs)) // by line: its key's HMGET
	field := make([]int, len(rs))            // by line: its tier's position in that HMGET
	// keyEnd is the end of the run of want that shares want[lo]'s key.
	keyEnd := func(lo int) int {
		first, hi := &rs[want[lo]], lo+1
		for hi < len(want) && rs[want[hi]].Promotion == first.Promotion && rs[want[hi]].Version == first.Version {
			hi++
		}
		return hi
	}
	keys := 0
	for lo := 0; lo < len(want); lo = keyEnd(lo) {
		keys++
	}
	// Every HMGET's arguments in one slice (at most a field a line) and
	// the commands in another, sized first: the commands keep subslices
	// of the one and the lines pointers into the other.
	args := make([]any, 0, 2*keys+len(want))
	slab := make([]redis.SliceCmd, 0, keys)
	for lo := 0; lo < len(want); {
		first := &rs[want[lo]]
		hi := keyEnd(lo)
		at := len(args)
		args = append(args, "hmget", c.giftsKey(first.Promotion, first.Version))
		for _, i := range want[lo:hi] {
			id := rs[i].Tier.ID
			k := slices.IndexFunc(args[at+2:], func(a any) bool { return a.(string) == id })
			if k < 0 {
				k, args = len(args)-at-2, append(args, id)
			}
			field[i] = k
		}
		slab = append(slab, *redis.NewSliceCmd(ctx, args[at:len(args):len(args)]...))
		cmd := &slab[len(slab)-1]
		_ = pipe.Process(ctx, cmd)
		for _, i := range want[lo:hi] {
			cmds[i] = cmd
		}
		lo = hi
	}
	if _, err := pipe.Exec(ctx); err != nil {
		for _, i := range want {
			if err := lineErr(cmds[i].Err(), &rs[i]); err != nil {
				return 1, err
			}
		}
	}
	var missing []int
	var gd giftDecoder
	for _, i := range want {
		cmd := cmds[i]
		if cmd.Err() != nil {
			continue
		}
		vals := cmd.Val()
		raw, ok := "", field[i] < len(vals)
		if ok {
			raw, ok = vals[field[i]].(string)
		}
		if !ok {
			missing = append(missing, i)
			continue
		}
		gifts, err := gd.decode(raw, c.maxBytes)
		if err != nil {
			c.obs.OnDecodeError(rs[i].Promotion, recordGifts, err)
			rs[i].Err = fmt.Errorf("promotion %q tier %q: %w", rs[i].Promotion, rs[i].Tier.ID, err)
			continue
		}
		if owned {
			rs[i].Tier.Gifts = gifts
		} else {
			rs[i].Tier = withGifts(rs[i].Tier, gifts)
		}
	}
	if len(missing) == 0 {
		return 1, nil
	}
	slices.Sort(missing) // query order, as before grouping
	return 2, c.giftsMissing(ctx, rs, missing, fresh)
}

// giftsMissing files the lines whose gift list was not found: ErrDamaged
// when the hit's version is still the stored one, by the meta hash or by
// the lowest member of the tiers key (either can be evicted alone), so
// its gift list was evicted or deleted behind the cache's back;
// ErrGiftsGone when another version is stored (the hit's was replaced,
// and its grace ran out) or the promotion was deleted (its tombstone is
// there). When nothing of the promotion is left, a fresh hit (read by
// this call) is damage too: a version read moments ago keeps its lists
// for Grace after a replace or a delete, so only eviction (or a DEL
// behind the cache's back) takes them that soon; a hit the caller kept
// may be older than Grace, so it is ErrGiftsGone. One more round trip,
// taken only on this path.
func (c *Cache) giftsMissing(ctx context.Context, rs []Result, missing []int, fresh bool) error {
	pipe := c.client.Pipeline()
	metas := make([]*redis.StringCmd, len(missing))
	lows := make([]*redis.StringSliceCmd, len(missing))
	tombs := make([]*redis.IntCmd, len(missing))
	for k, i := range missing {
		metas[k] = pipe.HGet(ctx, c.metaKey(rs[i].Promotion), metaVersion)
		lows[k] = pipe.ZRange(ctx, c.tiersKey(rs[i].Promotion), 0, 0)
		tombs[k] = pipe.Exists(ctx, c.tombKey(rs[i].Promotion))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		for k, i := range missing {
			for _, e := range []error{metas[k].Err(), lows[k].Err(), tombs[k].Err()} {
				if errors.Is(e, redis.Nil) {
					continue
				}
				if err := lineErr(e, &rs[i]); err != nil {
					return err
				}
			}
		}
	}
	for k, i := range missing {
		r := &rs[i]
		if r.Err != nil {
			continue
		}
		held := metas[k].Val()
		if low := lows[k].Val(); held != r.Version && len(low) == 1 {
			d, err := c.decode(r.Promotion, low[0])
			if err == nil && (!d.m.hasOwner || d.m.owner == ownerTag(r.Promotion)) && (held == "" || d.m.version == r.Version) {
				held = d.m.version
			}
		}
		gone := held != "" && held != r.Version || tombs[k].Val() > 0 || held == "" && !fresh
		if gone {
			r.Err = fmt.Errorf("%w: promotion %q version %s tier %q", ErrGiftsGone, r.Promotion, r.Version, r.Tier.ID)
		} else {
			r.Err = damaged(r.Promotion, fmt.Sprintf("gift list of tier %q of version %s missing", r.Tier.ID, r.Version))
		}
	}
	return nil
}

// withGifts is a copy of t carrying gifts: a TierHit from the near cache
// is shared by every reader of its ladder, so it is never written.
func withGifts(t *TierHit, gifts []gradient.Gift) *TierHit {
	cp := *t
	cp.Gifts = gifts
	return &cp
}
