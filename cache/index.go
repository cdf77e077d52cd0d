package cache

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sort"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/slot"
)

// The promotion index: which promotions exist, kept by the writes
// themselves, so List costs the promotions and not the keyspace (keys in
// the table in keys.go; design in docs/design.md, "Promotion index").
//
// One index key per Redis Cluster slot, named with a hash tag that lands
// on that slot (slot.TagOf), so Refresh adds the ID and Delete removes it
// inside the promotion's own MULTI/EXEC: on one server and on a Cluster,
// the index and the promotion change together or not at all. The
// invariant: every promotion whose meta key exists is in its slot's index
// (once the prefix is marked); an index entry whose meta is gone (it
// expired at End + Grace) is skipped by every read and pruned by List.
//
// v0.1.0 writers do not keep the index. Until the prefix is marked, List
// and IDs SCAN as before; Reindex, run once no v0.1.0 writer is left,
// adds every meta key SCAN finds and marks the prefix.

var (
	//go:embed lua/index_add.lua
	luaIndexAdd    string
	scriptIndexAdd = redis.NewScript(luaIndexAdd)
	//go:embed lua/index_prune.lua
	luaIndexPrune    string
	scriptIndexPrune = redis.NewScript(luaIndexPrune)
)

const (
	suffixIndex = "}:ids"
	markValue   = "1"
	indexBatch  = 1000
)

// slotIndexKey is the index key of slot s.
func (c *Cache) slotIndexKey(s int) string { return c.prefix + ":{" + slot.TagOf(s) + suffixIndex }

// indexKey is the index key of the slot of id's keys.
func (c *Cache) indexKey(id string) string { return c.slotIndexKey(slot.Of(c.metaKey(id))) }

// markKey says the index is complete (Reindex set it).
func (c *Cache) markKey() string { return c.prefix + ":index" }

// listIDs is the IDs List and IDs read: from the index once the prefix
// is marked (found is false then: the IDs still need their meta checked),
// by SCAN otherwise (every ID had a meta key when SCAN saw it).
func (c *Cache) listIDs(ctx context.Context) (ids []string, indexed bool, err error) {
	mark, err := c.client.Get(ctx, c.markKey()).Result()
	switch {
	case errors.Is(err, redis.Nil):
		ids, err = c.scanIDs(ctx)
		return ids, false, err
	case err != nil:
		return nil, false, err
	case mark != markValue:
		return nil, false, fmt.Errorf("%w: %s holds %q", ErrCorrupt, c.markKey(), mark)
	}
	ids, err = c.indexIDs(ctx)
	return ids, true, err
}

// indexIDs reads every slot's index in one pipeline (split per master on a
// Cluster): 16384 SMEMBERS, most of them on keys that do not exist.
func (c *Cache) indexIDs(ctx context.Context) ([]string, error) {
	pipe := c.client.Pipeline()
	cmds := make([]*redis.StringSliceCmd, slot.Count)
	for s := range cmds {
		cmds[s] = pipe.SMembers(ctx, c.slotIndexKey(s))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var ids []string
	for _, cmd := range cmds {
		ids = append(ids, cmd.Val()...)
	}
	return ids, nil
}

// pruneIndex drops from the index the IDs a read found without meta,
// each only if its meta is still gone (lua/index_prune.lua).
func (c *Cache) pruneIndex(ctx context.Context, gone []string) error {
	if len(gone) == 0 {
		return nil
	}
	pipe := c.client.Pipeline()
	for _, id := range gone {
		scriptIndexPrune.Eval(ctx, pipe, []string{c.metaKey(id), c.indexKey(id)}, id)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// liveIDs keeps the IDs whose meta key exists (one pipelined EXISTS per
// 1000) and prunes the others from the index.
func (c *Cache) liveIDs(ctx context.Context, ids []string) ([]string, error) {
	live := ids[:0:0]
	var gone []string
	for i := 0; i < len(ids); i += indexBatch {
		part := ids[i:min(i+indexBatch, len(ids))]
		pipe := c.client.Pipeline()
		ex := make([]*redis.IntCmd, len(part))
		for k, id := range part {
			ex[k] = pipe.Exists(ctx, c.metaKey(id))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, err
		}
		for k, id := range part {
			if ex[k].Val() == 1 {
				live = append(live, id)
			} else {
				gone = append(gone, id)
			}
		}
	}
	return live, c.pruneIndex(ctx, gone)
}

// ReindexResult is what Reindex did.
type ReindexResult struct {
	Added  int // meta keys SCAN found that the index lacked (written by v0.1.0, or restored by hand)
	Pruned int // index entries whose meta was gone
}

// Reindex makes the index complete and marks the prefix so List and IDs
// read it instead of SCANning: it SCANs for meta keys (every master of a
// Cluster), adds each promotion still stored to its slot's index
// (lua/index_add.lua), drops entries whose meta is gone
// (lua/index_prune.lua), then sets the mark. Run it once no v0.1.0 writer
// is left, and after keys were restored or deleted by hand
// (docs/operations.md). It is safe beside writers: each step checks the
// meta key in the same script as the index change.
func (c *Cache) Reindex(ctx context.Context) (ReindexResult, error) {
	var res ReindexResult
	scanned, err := c.scanIDs(ctx)
	if err != nil {
		return res, fmt.Errorf("cache: reindex: %w", ctxErr(ctx, err))
	}
	for i := 0; i < len(scanned); i += indexBatch {
		part := scanned[i:min(i+indexBatch, len(scanned))]
		pipe := c.client.Pipeline()
		cmds := make([]*redis.Cmd, len(part))
		for k, id := range part {
			cmds[k] = scriptIndexAdd.Eval(ctx, pipe, []string{c.metaKey(id), c.indexKey(id)}, id)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return res, fmt.Errorf("cache: reindex: %w", ctxErr(ctx, err))
		}
		for _, cmd := range cmds {
			if n, _ := cmd.Int(); n == 1 {
				res.Added++
			}
		}
	}
	indexed, err := c.indexIDs(ctx)
	if err != nil {
		return res, fmt.Errorf("cache: reindex: %w", ctxErr(ctx, err))
	}
	live, err := c.liveIDs(ctx, indexed)
	if err != nil {
		return res, fmt.Errorf("cache: reindex: %w", ctxErr(ctx, err))
	}
	res.Pruned = len(indexed) - len(live)
	if err := c.client.Set(ctx, c.markKey(), markValue, 0).Err(); err != nil {
		return res, fmt.Errorf("cache: reindex: %w", ctxErr(ctx, err))
	}
	c.obs.OnRoundTrips(OpList, 1)
	return res, nil
}

// ScanIDs is IDs by SCAN whatever the index says: the audit's view, which
// finds a meta key the index lacks. Its cost grows with every key in
// Redis.
func (c *Cache) ScanIDs(ctx context.Context) ([]string, error) {
	ids, err := c.scanIDs(ctx)
	c.obs.OnRoundTrips(OpList, 1)
	if err != nil {
		return nil, fmt.Errorf("cache: scan ids: %w", ctxErr(ctx, err))
	}
	sort.Strings(ids)
	return ids, nil
}

// Unindexed returns, sorted, the IDs SCAN finds with a meta key that the
// index lacks: empty on a marked prefix unless a v0.1.0 writer ran or keys
// were restored by hand (Reindex repairs both). Before the prefix is
// marked it returns nil: the index is not read yet.
func (c *Cache) Unindexed(ctx context.Context) ([]string, error) {
	if n, err := c.client.Exists(ctx, c.markKey()).Result(); err != nil || n == 0 {
		if err != nil {
			return nil, fmt.Errorf("cache: unindexed: %w", ctxErr(ctx, err))
		}
		return nil, nil
	}
	scanned, err := c.ScanIDs(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for i := 0; i < len(scanned); i += indexBatch {
		part := scanned[i:min(i+indexBatch, len(scanned))]
		pipe := c.client.Pipeline()
		cmds := make([]*redis.BoolCmd, len(part))
		for k, id := range part {
			cmds[k] = pipe.SIsMember(ctx, c.indexKey(id), id)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("cache: unindexed: %w", ctxErr(ctx, err))
		}
		for k, id := range part {
			if !cmds[k].Val() {
				out = append(out, id)
			}
		}
	}
	return out, nil
}
