package cache

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Gifts fetches the gift lists of every hit in rs whose tier has gifts
// and that has none yet, in one pipelined round trip (none when there is
// nothing to fetch). Lists are read from the hit's own version, so they
// always belong to the tier that was matched. A line whose list is gone
// (its version was replaced more than Options.Grace ago) or corrupt keeps
// its Tier and gets ErrGiftsGone or ErrCorrupt in Err.
func (c *Cache) Gifts(ctx context.Context, rs []Result) error {
	n, err := c.fetchGifts(ctx, rs)
	c.obs.OnRoundTrips(OpGifts, n)
	if err != nil {
		return fmt.Errorf("cache: gifts: %w", ctxErr(ctx, err))
	}
	return nil
}

func (c *Cache) fetchGifts(ctx context.Context, rs []Result) (int, error) {
	var pipe redis.Pipeliner
	var cmds []*redis.SliceCmd
	for i := range rs {
		t := rs[i].Tier
		if t == nil || !t.HasGifts || t.Gifts != nil {
			continue
		}
		if pipe == nil {
			pipe = c.client.Pipeline()
			cmds = make([]*redis.SliceCmd, len(rs))
		}
		cmds[i] = pipe.HMGet(ctx, c.giftsKey(rs[i].Promotion, rs[i].Version), t.ID)
	}
	if pipe == nil {
		return 0, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		for i, cmd := range cmds {
			if cmd != nil {
				if err := lineErr(cmd.Err(), &rs[i]); err != nil {
					return 1, err
				}
			}
		}
	}
	for i, cmd := range cmds {
		if cmd == nil || cmd.Err() != nil {
			continue
		}
		vals := cmd.Val()
		raw, ok := "", len(vals) == 1
		if ok {
			raw, ok = vals[0].(string)
		}
		if !ok {
			rs[i].Err = fmt.Errorf("%w: promotion %q version %s tier %q", ErrGiftsGone, rs[i].Promotion, rs[i].Version, rs[i].Tier.ID)
			continue
		}
		gifts, err := decodeGifts([]byte(raw), c.maxBytes)
		if err != nil {
			c.obs.OnDecodeError(rs[i].Promotion, RecordGifts, err)
			rs[i].Err = fmt.Errorf("promotion %q tier %q: %w", rs[i].Promotion, rs[i].Tier.ID, err)
			continue
		}
		rs[i].Tier.Gifts = gifts
	}
	return 1, nil
}
