package cache

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
)

// Info describes a stored promotion, read from its meta hash.
type Info struct {
	ID string
	// Version is the content hash Refresh compares (16 hex digits).
	Version string
	// Previous is the version this one replaced, "" for the first.
	Previous    string
	Metric      gradient.Metric
	MinorDigits int
	Kind        gradient.RuleKind
	// Start and End are the validity window, zero when open, at
	// millisecond resolution.
	Start, End time.Time
	Tiers      int
	// GiftTiers counts the tiers that have gifts.
	GiftTiers int
	// Updated is when the stored version was written, by the writer's
	// Options.Now.
	Updated time.Time
}

// Info returns a stored promotion's metadata, ErrNotFound when absent.
func (c *Cache) Info(ctx context.Context, id string) (Info, error) {
	if err := gradient.ValidateID(id); err != nil {
		return Info{}, fmt.Errorf("%w: %w", ErrBadID, err)
	}
	c.obs.OnRoundTrips(OpInfo, 1)
	m, err := c.client.HGetAll(ctx, c.metaKey(id)).Result()
	if err != nil {
		return Info{}, fmt.Errorf("cache: info %q: %w", id, ctxErr(ctx, err))
	}
	if len(m) == 0 {
		return Info{}, ErrNotFound
	}
	return c.parseInfo(id, m)
}

func (c *Cache) parseInfo(id string, m map[string]string) (Info, error) {
	var bad string
	num := func(field string) int64 {
		v, err := strconv.ParseInt(m[field], 10, 64)
		if err != nil && bad == "" {
			bad = field
		}
		return v
	}
	in := Info{
		ID:          id,
		Version:     m[metaVersion],
		Previous:    m[metaPrev],
		Metric:      gradient.Metric(num(metaMetric)),
		MinorDigits: int(num(metaDigits)),
		Kind:        gradient.RuleKind(num(metaKind)),
		Start:       windowTime(num(metaStart)),
		End:         windowTime(num(metaEnd)),
		Tiers:       int(num(metaTiers)),
		GiftTiers:   int(num(metaGifts)),
		Updated:     time.UnixMilli(num(metaUpdated)),
	}
	if bad == "" && in.Version == "" {
		bad = metaVersion
	}
	if bad != "" {
		err := fmt.Errorf("%w: promotion %q meta field %q", ErrCorrupt, id, bad)
		c.obs.OnDecodeError(id, RecordMeta, err)
		return Info{}, err
	}
	return in, nil
}

// List returns every promotion stored under the prefix, in no particular
// order (for a warm-up's -prune: list, diff against the rules, Delete).
// It SCANs for meta keys, on every master of a Redis Cluster, then reads
// them in pipelines of 1000.
func (c *Cache) List(ctx context.Context) ([]Info, error) {
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, node redis.Cmdable) error {
		iter := node.Scan(ctx, 0, c.metaPattern(), 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := c.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, c.client)
	}
	if err != nil {
		return nil, fmt.Errorf("cache: list: %w", ctxErr(ctx, err))
	}
	out := make([]Info, 0, len(keys))
	seen := make(map[string]bool, len(keys)) // SCAN may return a key twice
	for i := 0; i < len(keys); i += 1000 {
		chunk := keys[i:min(i+1000, len(keys))]
		pipe := c.client.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, len(chunk))
		for k, key := range chunk {
			cmds[k] = pipe.HGetAll(ctx, key)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("cache: list: %w", ctxErr(ctx, err))
		}
		for k, key := range chunk {
			id := c.idFromMetaKey(key)
			if id == "" || seen[id] || len(cmds[k].Val()) == 0 { // expired or deleted since the scan
				continue
			}
			seen[id] = true
			in, err := c.parseInfo(id, cmds[k].Val())
			if err != nil {
				return nil, err
			}
			out = append(out, in)
		}
	}
	return out, nil
}
