package cache

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/slot"
)

// Cache is the Redis tier cache. It is safe for concurrent use.
type Cache struct {
	client   redis.UniversalClient
	prefix   string
	digits   int
	now      func() time.Time
	grace    time.Duration
	maxBytes int
	retries  int
	obs      Observer
	// nopObs: obs is NopObserver, so the hot path skips timing and the
	// per-line OnLookup loop.
	nopObs bool
	memo   *memo
	// lines pools matchInto's per-line scratch (*[]line) between carts.
	lines sync.Pool

	// near is the in-process ladder cache (Options.NearCache), nil when off.
	near *near
	// rt is the read-through loader (Options.Loader), nil when off.
	rt *readThrough
}

// New returns a Cache on c. c may be a *redis.Client or a
// *redis.ClusterClient: every transaction and read touches one
// promotion's hash tag. A nil client is ErrNilClient; bad Options are
// ErrBadOptions.
func New(c redis.UniversalClient, opts Options) (*Cache, error) {
	if c == nil {
		return nil, ErrNilClient
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	out := &Cache{
		client:   c,
		prefix:   o.Prefix,
		digits:   o.MinorDigits,
		now:      o.Now,
		grace:    o.Grace,
		maxBytes: o.MaxRecordBytes,
		retries:  o.RefreshRetries,
		obs:      o.Observer,
		nopObs:   isNop(o.Observer),
		memo:     newMemo(o.DecodeCacheSize),
	}
	if err := out.withNearAndLoader(o); err != nil {
		return nil, err
	}
	return out, nil
}

func isNop(o Observer) bool {
	_, ok := o.(NopObserver)
	return ok
}

// Prefix returns the key prefix in use.
func (c *Cache) Prefix() string { return c.prefix }

// RefreshReport says what Refresh did, per promotion in input order.
type RefreshReport struct {
	Promotions []RefreshResult
	Added      int
	Updated    int
	Unchanged  int
}

// RefreshResult is one promotion's refresh outcome.
type RefreshResult struct {
	ID      string
	Outcome RefreshOutcome
	// Version is the stored content hash after the refresh.
	Version string
	// Previous is the version that was replaced ("" when Added, equal to
	// Version when Unchanged).
	Previous string
}

// Refresh validates every promotion first and writes nothing if any is
// invalid (the error is a *gradient.ValidationError naming the promotion,
// tier and field; it matches gradient.ErrInvalid). Then it writes each
// promotion in its own MULTI/EXEC transaction: a concurrent reader sees the
// old version whole or the new one whole, never a mix, and never a tier
// without its gifts (gift lists are stored per version). A promotion whose
// content hash equals the stored version is Unchanged and nothing is
// written for it.
//
// Keys expire at End + Grace (no expiry for an open End); the replaced
// version's gifts expire Grace from now. Writes are atomic per promotion,
// not per call: if a write fails, the promotions before it are stored, the
// report lists them and the error names the one that failed.
func (c *Cache) Refresh(ctx context.Context, promos ...gradient.Promotion) (RefreshReport, error) {
	if len(promos) > MaxRefreshBatch {
		return RefreshReport{}, fmt.Errorf("%w: %d promotions (max %d)", ErrBatchTooLarge, len(promos), MaxRefreshBatch)
	}
	all := make([]*encoded, len(promos))
	seen := make(map[string]int, len(promos))
	for i := range promos {
		p := &promos[i]
		if j, dup := seen[p.ID]; dup {
			return RefreshReport{}, fmt.Errorf("%w: %q at positions %d and %d", ErrDuplicatePromotion, p.ID, j, i)
		}
		seen[p.ID] = i
		e, err := encodePromotion(p, c.maxBytes)
		if err != nil {
			return RefreshReport{}, err
		}
		all[i] = e
	}
	var rep RefreshReport
	for _, e := range all {
		res, rts, err := c.refreshOne(ctx, e)
		c.invalidateLocal(e.id) // at once, even on error: the write may have committed
		c.obs.OnRoundTrips(OpRefresh, rts)
		if err != nil {
			c.obs.OnRefresh(e.id, RefreshFailed)
			return rep, fmt.Errorf("cache: refresh promotion %q: %w", e.id, ctxErr(ctx, err))
		}
		c.obs.OnRefresh(e.id, res.Outcome)
		rep.Promotions = append(rep.Promotions, res)
		switch res.Outcome {
		case Added:
			rep.Added++
		case Updated:
			rep.Updated++
		case Unchanged:
			rep.Unchanged++
		}
	}
	return rep, nil
}

// refreshOne writes one promotion: WATCH meta, read the stored version,
// then MULTI { replace tiers, gifts:<new>, meta; set expiries; let the old
// gifts expire after Grace } EXEC, retried when the WATCH fires.
func (c *Cache) refreshOne(ctx context.Context, e *encoded) (RefreshResult, int, error) {
	tiers, meta, gifts := c.tiersKey(e.id), c.metaKey(e.id), c.giftsKey(e.id, e.version)
	res := RefreshResult{ID: e.id, Version: e.version}
	if err := sameSlot(tiers, meta, gifts); err != nil {
		return res, 0, err
	}
	rts := 0
	txf := func(tx *redis.Tx) error {
		rts += 2 // WATCH, HGET (EXEC counted below)
		old, err := tx.HGet(ctx, meta, metaVersion).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		res.Previous = old
		if old == e.version {
			res.Outcome = Unchanged
			rts++ // UNWATCH: no EXEC released the watch
			return nil
		}
		res.Outcome = Added
		if old != "" {
			res.Outcome = Updated
			if err := sameSlot(meta, c.giftsKey(e.id, old)); err != nil {
				return err
			}
		}
		rts++
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Del(ctx, tiers, gifts, meta, c.absentKey(e.id)) // a warm clears a remembered miss
			for i := 0; i < len(e.members); i += zaddChunk {
				end := min(i+zaddChunk, len(e.members))
				zs := make([]redis.Z, 0, end-i)
				for k := i; k < end; k++ {
					zs = append(zs, redis.Z{Score: float64(e.scores[k]), Member: e.members[k]})
				}
				pipe.ZAdd(ctx, tiers, zs...)
			}
			for i := 0; i < len(e.gifts); i += 2 * zaddChunk {
				end := min(i+2*zaddChunk, len(e.gifts))
				vals := make([]any, 0, end-i)
				for _, v := range e.gifts[i:end] {
					vals = append(vals, v)
				}
				pipe.HSet(ctx, gifts, vals...)
			}
			pipe.HSet(ctx, meta, e.metaFields(old, c.now())...)
			keys := []string{tiers, meta}
			if len(e.gifts) > 0 {
				keys = append(keys, gifts)
			}
			if end := e.promo.End; !end.IsZero() {
				at := end.Add(c.grace)
				for _, k := range keys {
					pipe.PExpireAt(ctx, k, at)
				}
			}
			// DEL above already cleared any TTL an earlier version left
			// on these keys, so an open End means no expiry.
			if old != "" {
				pipe.PExpire(ctx, c.giftsKey(e.id, old), c.grace)
			}
			return nil
		})
		return err
	}
	for attempt := 0; attempt < c.retries; attempt++ {
		err := c.client.Watch(ctx, txf, meta)
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		if err != nil {
			return res, rts, err
		}
		return res, rts, nil
	}
	return res, rts, fmt.Errorf("%w: %d attempts", ErrConflict, c.retries)
}

// sameSlot is the client-side Redis Cluster guard run before every
// transaction: all its keys must hash to one slot.
func sameSlot(keys ...string) error {
	if err := slot.Same(keys...); err != nil {
		return fmt.Errorf("%w: %w", ErrCrossSlot, err)
	}
	return nil
}

// Delete removes a promotion: its tiers, meta, and the gift lists of the
// current and the previous version (older replaced versions expire on
// their own within Grace). It reports whether the promotion existed.
func (c *Cache) Delete(ctx context.Context, id string) (bool, error) {
	if err := gradient.ValidateID(id); err != nil {
		return false, fmt.Errorf("%w: %w", ErrBadID, err)
	}
	tiers, meta := c.tiersKey(id), c.metaKey(id)
	existed := false
	rts := 0
	txf := func(tx *redis.Tx) error {
		rts += 3
		vals, err := tx.HMGet(ctx, meta, metaVersion, metaPrev).Result()
		if err != nil {
			return err
		}
		keys := []string{tiers, meta}
		for _, v := range vals {
			if s, ok := v.(string); ok && s != "" {
				keys = append(keys, c.giftsKey(id, s))
			}
		}
		if err := sameSlot(keys...); err != nil {
			return err
		}
		var del *redis.IntCmd
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			del = pipe.Del(ctx, keys...)
			return nil
		})
		if err == nil {
			existed = del.Val() > 0
		}
		return err
	}
	defer func() { c.obs.OnRoundTrips(OpDelete, rts) }()
	defer c.invalidateLocal(id)
	for attempt := 0; attempt < c.retries; attempt++ {
		err := c.client.Watch(ctx, txf, meta)
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("cache: delete promotion %q: %w", id, ctxErr(ctx, err))
		}
		return existed, nil
	}
	return false, fmt.Errorf("%w: delete %q after %d attempts", ErrConflict, id, c.retries)
}

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

// ctxErr joins the context's error when the call was cancelled, so
// errors.Is(err, context.Canceled) holds whatever go-redis returned.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return errors.Join(err, cerr)
	}
	return err
}
