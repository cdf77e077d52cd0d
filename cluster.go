package tierset

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterStateReloadInterval is the slot-map refresh period ClusterOptions
// sets. go-redis re-reads the slot map after a dead master only this often
// (60 s by default since v9.22); at 1 s, cart matches follow a failover
// within seconds of the promotion instead of failing for a minute.
const ClusterStateReloadInterval = time.Second

// ClusterOptions returns go-redis Cluster options tuned for tierset: ctx
// deadlines that reach the socket (ContextTimeoutEnabled, which
// cache.New and delay.New require), a 1 s slot-map reload so a failover
// is followed in seconds, and retries that fail fast on a dead node
// instead of stalling on it. Callers can adjust the result before
// passing it to redis.NewClusterClient.
//
// Why fail fast: go-redis does not reload the slot map on a connection
// error, only when the map is older than ClusterStateReloadInterval, and
// the reload asks the nodes in random order, the dead master included.
// With the go-redis defaults (5 dial attempts per connection, 100 ms
// apart, times 1+MaxRetries command attempts) one question to the dead
// node takes seconds, so the reload that would find the promoted replica
// stalls behind it. One dial attempt, two command retries and a 250 ms
// backoff cap keep a dead node's cost to a few hundred milliseconds (see
// docs/cluster.md).
func ClusterOptions(addrs ...string) *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:                      addrs,
		ContextTimeoutEnabled:      true,
		ClusterStateReloadInterval: ClusterStateReloadInterval,
		MaxRedirects:               8,
		MaxRetries:                 2,
		MinRetryBackoff:            50 * time.Millisecond,
		MaxRetryBackoff:            250 * time.Millisecond,
		DialerRetries:              1,
		DialTimeout:                time.Second,
		ReadTimeout:                2 * time.Second,
		WriteTimeout:               2 * time.Second,
	}
}

// NewClusterClient is redis.NewClusterClient(ClusterOptions(addrs...)).
func NewClusterClient(addrs ...string) *redis.ClusterClient {
	return redis.NewClusterClient(ClusterOptions(addrs...))
}
