package storm

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/bench/internal/tiers"
	"github.com/tierset/tierset/cache"
)

// rawFloor prices a cart with plain go-redis as a floor beside the cache:
// one pipelined ZRANGE <tiers key> <count> -inf BYSCORE REV LIMIT 0 1 per
// distinct promotion of the cart, at the largest count its lines ask (the
// same commands, and as many, as the cache sends for a cart without
// gifts), and nothing decoded. What a cart's lines ask is worked out
// before the clock starts (prepare), so a timed cart is go-redis alone:
// building the commands, the round trip and reading the replies.
type rawFloor struct {
	client *redis.Client
	prefix string // the cache's Options.Prefix (tiers.Key)
	// asks holds each prepared cart's reads, by its first line's address.
	asks map[*cache.Query][]rawRead
}

type rawRead struct {
	key, max string
}

// prepare works out the reads of every cart of carts.
func (f *rawFloor) prepare(carts [][][]cache.Query) {
	f.asks = map[*cache.Query][]rawRead{}
	for _, cc := range carts {
		for _, qs := range cc {
			most := map[string]int64{}
			var order []string
			for _, q := range qs {
				n := q.Value.IntPart() // QuantityQuery lines: whole counts
				if _, seen := most[q.Promotion]; !seen {
					order = append(order, q.Promotion)
				}
				most[q.Promotion] = max(most[q.Promotion], n)
			}
			reads := make([]rawRead, len(order))
			for i, id := range order {
				reads[i] = rawRead{key: tiers.Key(f.prefix, id), max: strconv.FormatInt(most[id], 10)}
			}
			f.asks[&qs[0]] = reads
		}
	}
}

// price sends the cart's reads in one pipeline. It returns buf as it came:
// the floor decodes no answer.
func (f *rawFloor) price(ctx context.Context, buf []cache.Result, qs []cache.Query, _ cache.MatchOptions) ([]cache.Result, error) {
	reads, ok := f.asks[&qs[0]]
	if !ok {
		return buf, fmt.Errorf("rawFloor: a cart not prepared")
	}
	pipe := f.client.Pipeline()
	for _, r := range reads {
		pipe.ZRangeArgs(ctx, redis.ZRangeArgs{Key: r.key, Start: r.max, Stop: "-inf", ByScore: true, Rev: true, Count: 1})
	}
	_, err := pipe.Exec(ctx)
	return buf, err
}

// check reads the top tier of promotion id as the floor's reads do: a
// floor reading keys the cache did not write would answer faster than
// any real read.
func (f *rawFloor) check(ctx context.Context, id string) error {
	key := tiers.Key(f.prefix, id)
	got, err := f.client.ZRangeArgs(ctx, redis.ZRangeArgs{Key: key, Start: "+inf", Stop: "-inf", ByScore: true, Rev: true, Count: 1}).Result()
	if err != nil {
		return fmt.Errorf("go-redis floor: %w", err)
	}
	if len(got) != 1 {
		return fmt.Errorf("go-redis floor: %s holds no tier: not the cache's tiers key", key)
	}
	return nil
}
