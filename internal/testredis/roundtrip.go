package testredis

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/measure"
)

// RoundTrips counts network round trips through a go-redis hook; see
// measure.RoundTrips (the benchmarks count with the same hook).
type RoundTrips = measure.RoundTrips

// CountRoundTrips installs a counting hook on c; see measure.CountRoundTrips.
func CountRoundTrips(ctx context.Context, c redis.UniversalClient) (*RoundTrips, error) {
	return measure.CountRoundTrips(ctx, c)
}
