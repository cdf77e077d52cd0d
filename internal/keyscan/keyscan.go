// Package keyscan is the one SCAN over every master of the repository:
// the cache's List, the test suites' cleanup and the benchmarks' key
// counts all walk keys through Each.
package keyscan

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Count is the SCAN COUNT hint of every call.
const Count = 1000

// Each calls fn for every key matching pattern, with the node that holds
// it: on every master of a Redis Cluster (concurrently, one goroutine per
// master, so fn must be safe for that), on the one server otherwise. SCAN
// may return a key twice; callers that count dedupe. It never uses KEYS.
func Each(ctx context.Context, c redis.UniversalClient, pattern string, fn func(ctx context.Context, node redis.Cmdable, key string) error) error {
	return EachType(ctx, c, pattern, "", Count, fn)
}

// EachType is Each for the keys of one Redis type (SCAN ... TYPE typ, so
// the server filters and no TYPE call per key is needed; "" is any type),
// count keys a call. The TYPE filter costs the server more per key than a
// plain SCAN (docs/benchmarks.md, "Audit"), so a caller that must not hold
// the server passes a smaller count.
func EachType(ctx context.Context, c redis.UniversalClient, pattern, typ string, count int64, fn func(ctx context.Context, node redis.Cmdable, key string) error) error {
	scan := func(ctx context.Context, node redis.Cmdable) error {
		var iter *redis.ScanIterator
		if typ == "" {
			iter = node.Scan(ctx, 0, pattern, count).Iterator()
		} else {
			iter = node.ScanType(ctx, 0, pattern, count, typ).Iterator()
		}
		for iter.Next(ctx) {
			if err := fn(ctx, node, iter.Val()); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	}
	return scan(ctx, c)
}

// Keys returns the keys matching pattern, each once (SCAN may return a
// key twice), in no set order: Each with the locking and the dedupe every
// listing needs.
func Keys(ctx context.Context, c redis.UniversalClient, pattern string) ([]string, error) {
	var mu sync.Mutex
	seen := map[string]bool{}
	var out []string
	err := Each(ctx, c, pattern, func(_ context.Context, _ redis.Cmdable, key string) error {
		mu.Lock()
		defer mu.Unlock()
		if !seen[key] {
			seen[key] = true
			out = append(out, key)
		}
		return nil
	})
	return out, err
}
