package delay

import (
	"context"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/keyscan"
)

// Discover lists the names of the queues stored under prefix (""
// = DefaultPrefix), sorted: every queue that ever had a task enqueued. It
// SCANs the keyspace (on every master of a Cluster), so it costs time in
// proportion to all keys in Redis: call it at start-up, not per request.
func Discover(ctx context.Context, c redis.UniversalClient, prefix string) ([]string, error) {
	if nilClient(c) {
		return nil, invalid("client", "nil client")
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	head, tail := prefix+":{q:", "}:ctr"
	keys, err := keyscan.Keys(ctx, c, head+"*"+tail)
	if err != nil {
		return nil, wrapErr(ctx, "discover", err)
	}
	names := make([]string, 0, len(keys))
	for _, key := range keys {
		if name := strings.TrimSuffix(strings.TrimPrefix(key, head), tail); validateName(name) == nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}
