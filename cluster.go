package tierset

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterStateReloadInterval is the slot-map refresh period ClusterOptions
// sets. go-redis re-reads the slot map after a dead master only this often
// (60 s by default since v9.22); at 1 s, cart matches follow a failover in
// about 4–5 s instead of failing for a minute.
const ClusterStateReloadInterval = time.Second

// ClusterOptions returns go-redis Cluster options tuned for tierset: a
// 1 s slot-map reload so a failover is followed in seconds, and enough
// redirects and retries to ride out a master's death. Callers can adjust
// the result before passing it to redis.NewClusterClient.
func ClusterOptions(addrs ...string) *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:                      addrs,
		ClusterStateReloadInterval: ClusterStateReloadInterval,
		MaxRedirects:               8,
		MaxRetries:                 5,
		MinRetryBackoff:            50 * time.Millisecond,
		MaxRetryBackoff:            500 * time.Millisecond,
		DialTimeout:                2 * time.Second,
		ReadTimeout:                2 * time.Second,
		WriteTimeout:               2 * time.Second,
	}
}

// NewClusterClient is redis.NewClusterClient(ClusterOptions(addrs...)).
func NewClusterClient(addrs ...string) *redis.ClusterClient {
	return redis.NewClusterClient(ClusterOptions(addrs...))
}
