package periodic

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/internal/keyscan"
)

// Discover lists the names of the queues under prefix ("" =
// delay.DefaultPrefix) that hold periodic jobs, sorted. delay.Discover
// finds a queue by its first task; a job is declared before that, and an
// hourly job's queue may hold none, so tools list jobs from these names.
// It SCANs the keyspace (every master of a Cluster): call it from tools,
// not per request.
func Discover(ctx context.Context, c redis.UniversalClient, prefix string) ([]string, error) {
	// A probe queue gives the hash tag delay stores a queue under, so the
	// pattern follows delay's key layout rather than a copy of it. It
	// sends nothing, so a client without ContextTimeoutEnabled is fine
	// here and not worth a warning.
	const probe = "probe"
	q, err := delay.New(c, probe, delay.Options{Prefix: prefix, AllowNoContextTimeout: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	ks, err := keysOf(q)
	if err != nil {
		return nil, err
	}
	head, tail := strings.TrimSuffix(ks.tag, probe+"}"), "}"+strings.TrimPrefix(ks.index(), ks.tag)
	if head == ks.tag {
		return nil, fmt.Errorf("periodic: discover: queue tag %q does not end in the queue's name", ks.tag)
	}
	// A job's hash adds ":<job>" to the index key, so it does not match.
	keys, err := keyscan.Keys(ctx, c, head+"*"+tail)
	if err != nil {
		return nil, fmt.Errorf("periodic: discover: %w", err)
	}
	names := make([]string, 0, len(keys))
	for _, key := range keys {
		if name := strings.TrimSuffix(strings.TrimPrefix(key, head), tail); keyname.Check(name) == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}
