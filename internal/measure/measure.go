// Package measure holds the measurement helpers every benchmark of the
// repository shares (the main bench, its tier and delay packages, and the
// nested bench/peers module): server memory, keys and their memory,
// quantiles and lateness samples, the clock offset to Redis TIME, round
// trips and bytes read through a go-redis client, and the table of floors
// every run prints.
package measure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/keyscan"
)

// eachMaster runs fn on every master of a cluster (one at a time: fn may
// accumulate into the caller's variables), or on c itself.
func eachMaster(ctx context.Context, c redis.UniversalClient, fn func(ctx context.Context, node redis.Cmdable) error) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return fn(ctx, node)
		})
	}
	return fn(ctx, c)
}

// UsedMemory sums INFO memory used_memory over the masters. ok is false
// where the server does not report it (miniredis).
func UsedMemory(ctx context.Context, c redis.UniversalClient) (total int64, ok bool, err error) {
	ok, err = eachMasterInfo(ctx, c, "memory", func(info string) (bool, error) {
		for line := range strings.SplitSeq(info, "\n") {
			if v, found := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); found {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return false, fmt.Errorf("used_memory %q: %w", v, err)
				}
				total += n
				return true, nil
			}
		}
		return false, nil // miniredis answers INFO memory without used_memory
	})
	return total, ok, err
}

// eachMasterInfo calls fn with INFO section of each master; fn says
// whether it found its fields there. ok is false where a server does not
// answer the section (miniredis) or lacks a field.
func eachMasterInfo(ctx context.Context, c redis.UniversalClient, section string, fn func(info string) (found bool, err error)) (ok bool, err error) {
	ok = true
	err = eachMaster(ctx, c, func(ctx context.Context, node redis.Cmdable) error {
		info, err := node.Info(ctx, section).Result()
		if err != nil && strings.Contains(err.Error(), "not supported") { // miniredis
			ok = false
			return nil
		}
		if err != nil {
			return fmt.Errorf("INFO %s: %w", section, err)
		}
		found, err := fn(info)
		if err != nil {
			return fmt.Errorf("INFO %s: %w", section, err)
		}
		ok = ok && found
		return nil
	})
	return ok && err == nil, err
}

// Keys lists the keys matching pattern, on every master, without
// duplicates.
func Keys(ctx context.Context, c redis.UniversalClient, pattern string) ([]string, error) {
	return keyscan.Keys(ctx, c, pattern)
}

// DeleteKeys deletes every key matching pattern (SCAN and one DEL per key
// on the node that holds it: a cluster node's keys live in many slots;
// never FLUSH*). It returns how many it deleted.
func DeleteKeys(ctx context.Context, c redis.UniversalClient, pattern string) (int, error) {
	var mu sync.Mutex
	n := 0
	err := keyscan.Each(ctx, c, pattern, func(ctx context.Context, node redis.Cmdable, key string) error {
		d, err := node.Del(ctx, key).Result()
		if err != nil {
			return fmt.Errorf("DEL %s: %w", key, err)
		}
		mu.Lock()
		n += int(d)
		mu.Unlock()
		return nil
	})
	return n, err
}

// KeysMemory sums MEMORY USAGE (every element sampled) over the keys
// matching pattern: a cross-check of a used_memory delta that the other
// clients of a shared server cannot disturb. ok is false where MEMORY
// USAGE is not supported (miniredis).
func KeysMemory(ctx context.Context, c redis.UniversalClient, pattern string) (total int64, keys int, ok bool, err error) {
	ks, err := Keys(ctx, c, pattern)
	if err != nil {
		return 0, 0, false, err
	}
	for chunk := range slices.Chunk(ks, 500) {
		pipe := c.Pipeline()
		cmds := make([]*redis.IntCmd, len(chunk))
		for i, k := range chunk {
			cmds[i] = pipe.MemoryUsage(ctx, k, 0)
		}
		_, _ = pipe.Exec(ctx)
		for _, cmd := range cmds {
			switch err := cmd.Err(); {
			case err == nil:
				total += cmd.Val()
			case errors.Is(err, redis.Nil): // deleted meanwhile
			case strings.Contains(strings.ToLower(err.Error()), "unknown command"),
				strings.Contains(err.Error(), "syntax error"): // miniredis takes no SAMPLES
				return 0, 0, false, nil
			default:
				return 0, 0, false, fmt.Errorf("MEMORY USAGE: %w", err)
			}
		}
	}
	return total, len(ks), true, nil
}

// ClockOffset estimates Redis TIME minus the local clock with µs
// resolution: of 50 TIME calls it keeps the one with the shortest round
// trip and assumes the server read its clock halfway through it, so the
// error is at most rtt/2.
func ClockOffset(ctx context.Context, c redis.Cmdable) (offset, rtt time.Duration, err error) {
	rtt = time.Hour
	for range 50 {
		sent := time.Now()
		st, err := c.Time(ctx).Result()
		if err != nil {
			return 0, 0, fmt.Errorf("TIME: %w", err)
		}
		if d := time.Since(sent); d < rtt {
			rtt = d
			offset = st.Sub(sent.Add(d / 2))
		}
	}
	return offset, rtt, nil
}

// ServerCPU sums INFO cpu used_cpu_user + used_cpu_sys (seconds of CPU
// the server process has used since it started) over the masters. ok is
// false where the server does not report them (miniredis). The difference
// of two readings is the server's CPU over the phase between them, other
// clients' work included on a shared server.
func ServerCPU(ctx context.Context, c redis.UniversalClient) (seconds float64, ok bool, err error) {
	ok, err = eachMasterInfo(ctx, c, "cpu", func(info string) (bool, error) {
		found := 0
		for line := range strings.SplitSeq(info, "\n") {
			line = strings.TrimSpace(line)
			for _, field := range []string{"used_cpu_user:", "used_cpu_sys:"} {
				if v, hit := strings.CutPrefix(line, field); hit {
					x, err := strconv.ParseFloat(v, 64)
					if err != nil {
						return false, fmt.Errorf("%s %q: %w", field, v, err)
					}
					seconds += x
					found++
				}
			}
		}
		return found == 2, nil
	})
	return seconds, ok, err
}
