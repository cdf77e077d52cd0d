package main

// Measurement helpers of the -delay mode. Every identifier here starts with
// "delay" because package main is shared with the tier benchmarks.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// delaySamples keeps every lateness sample of a phase, so percentiles are
// exact (the library's Histogram is bucketed at ~3%).
type delaySamples struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *delaySamples) add(d time.Duration) {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
}

type delayPercentiles struct {
	n                  int
	min, p50, p99, max time.Duration
}

func (s *delaySamples) percentiles() delayPercentiles {
	s.mu.Lock()
	d := slices.Clone(s.d)
	s.mu.Unlock()
	slices.Sort(d)
	if len(d) == 0 {
		return delayPercentiles{}
	}
	return delayPercentiles{n: len(d), min: d[0], p50: delayQuantile(d, 0.50), p99: delayQuantile(d, 0.99), max: d[len(d)-1]}
}

// delayQuantile is the nearest-rank quantile of sorted samples.
func delayQuantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// delayEachNode runs fn on every master of a cluster, or on c itself.
func delayEachNode(ctx context.Context, c redis.UniversalClient, fn func(ctx context.Context, node redis.UniversalClient) error) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			mu.Lock() // fn accumulates into the caller's variables
			defer mu.Unlock()
			return fn(ctx, node)
		})
	}
	return fn(ctx, c)
}

// delayUsedMemory sums INFO memory used_memory over the server's masters
// (ok=false where the server does not report it, as miniredis).
func delayUsedMemory(ctx context.Context, c redis.UniversalClient) (int64, bool, error) {
	var total int64
	found := true
	err := delayEachNode(ctx, c, func(ctx context.Context, node redis.UniversalClient) error {
		info, err := node.Info(ctx, "memory").Result()
		if err != nil {
			if strings.Contains(err.Error(), "not supported") { // miniredis
				found = false
				return nil
			}
			return fmt.Errorf("INFO memory: %w", err)
		}
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return fmt.Errorf("INFO memory: used_memory %q: %w", v, err)
				}
				total += n
				return nil
			}
		}
		found = false
		return nil
	})
	return total, found && err == nil, err
}

// delayScan lists the keys matching pattern with SCAN (never KEYS), on
// every master of a cluster.
func delayScan(ctx context.Context, c redis.UniversalClient, pattern string) ([]string, error) {
	var out []string
	err := delayEachNode(ctx, c, func(ctx context.Context, node redis.UniversalClient) error {
		var cursor uint64
		for {
			keys, next, err := node.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return fmt.Errorf("SCAN %s: %w", pattern, err)
			}
			out = append(out, keys...)
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	})
	return out, err
}

// delayKeysMemory sums MEMORY USAGE (every element sampled) over the keys
// matching pattern: a cross-check of the used_memory delta that the other
// clients of a shared server cannot disturb. ok=false where MEMORY USAGE is
// not supported (miniredis).
func delayKeysMemory(ctx context.Context, c redis.UniversalClient, pattern string) (int64, bool, error) {
	keys, err := delayScan(ctx, c, pattern)
	if err != nil {
		return 0, false, err
	}
	var total int64
	for _, k := range keys {
		n, err := c.MemoryUsage(ctx, k, 0).Result()
		if errors.Is(err, redis.Nil) {
			continue // gone meanwhile
		}
		if err != nil {
			return 0, false, nil // not supported here
		}
		total += n
	}
	return total, true, nil
}

func delayRandomID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// delayBusinessKey is a 25-byte business key: "order:<6 hex>:<12 digits>".
func delayBusinessKey(run string, n int) string {
	return fmt.Sprintf("order:%s:%012d", run, n)
}

// delayClockOffset estimates Redis TIME minus the local clock, in µs
// resolution: of 50 TIME calls it keeps the one with the shortest round trip
// and assumes the server read its clock halfway through it. The error is at
// most half that round trip (tens of µs on loopback).
func delayClockOffset(ctx context.Context, c redis.UniversalClient) (offset, rtt time.Duration, err error) {
	rtt = time.Hour
	for range 50 {
		sent := time.Now()
		st, err := c.Time(ctx).Result()
		if err != nil {
			return 0, 0, fmt.Errorf("TIME: %w", err)
		}
		got := time.Now()
		if d := got.Sub(sent); d < rtt {
			rtt = d
			offset = st.Sub(sent.Add(d / 2))
		}
	}
	return offset, rtt, nil
}
