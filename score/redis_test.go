package score_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/score"
)

// On real Redis: every score the codecs emit comes back from the server
// equal, both as the float64 go-redis parses and as the string Redis
// prints, and the boundary cases behave as the design card records.
func TestScoresSurviveRealRedis(t *testing.T) {
	t.Parallel()
	testredis.EachReal(t, func(t *testing.T, b *testredis.Backend) {
		ctx := context.Background()
		key := b.Prefix + ":{s}:z"
		var tc score.TimeCodec
		maxT, err := tc.Encode(tc.MaxTime().UnixMilli(), tc.MaxSeq())
		if err != nil {
			t.Fatal(err)
		}
		cents, _ := score.ParseAmount("90071992547409.92", 2)
		want := []int64{0, 1, 9999, score.MaxExact - 1, score.MaxExact, maxT, cents}
		for i, s := range want {
			if err := b.Client.ZAdd(ctx, key, redis.Z{Score: float64(s), Member: i}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for i, s := range want {
			// Raw reply: a double under RESP3, a string under RESP2.
			raw, err := b.Client.Do(ctx, "ZSCORE", key, i).Result()
			if err != nil {
				t.Fatal(err)
			}
			got, err := score.Parse(raw)
			if err != nil || got != s {
				t.Errorf("ZSCORE member %d = %v -> %d, %v; want %d", i, raw, got, err, s)
			}
			f, err := b.Client.ZScore(ctx, key, itoa(i)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got, err := score.ParseFloat(f); err != nil || got != s {
				t.Errorf("ZScore float member %d = %v -> %d, %v; want %d", i, f, got, err, s)
			}
		}
		// Real Redis rejects NaN and accepts hex; the codec emits neither,
		// and ParseString refuses hex should it ever read one back.
		if err := b.Client.Do(ctx, "ZADD", key, "nan", "x").Err(); err == nil {
			t.Error("real Redis accepted a NaN score")
		}
		if err := b.Client.Do(ctx, "ZADD", key, "0x10", "hex").Err(); err != nil {
			t.Errorf("real Redis refused 0x10: %v", err)
		}
		if _, err := score.ParseString("0x10"); !errors.Is(err, score.ErrMalformed) {
			t.Errorf("ParseString(0x10) = %v", err)
		}
	})
}

func itoa(i int) string { return string(rune('0' + i)) }
