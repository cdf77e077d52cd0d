package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/redisconf"
)

// Cache is the Redis tier cache. It is safe for concurrent use.
type Cache struct {
	client   redis.UniversalClient
	prefix   string
	digits   int
	now      func() time.Time
	wallNow  bool // Options.Now was nil: now is time.Now, so one reading serves both clocks
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
// ErrInvalidOptions.
func New(c redis.UniversalClient, opts Options) (*Cache, error) {
	if c == nil {
		return nil, ErrNilClient
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := redisconf.CheckDeadlines(c); err != nil {
		if !o.AllowNoContextTimeout {
			return nil, fmt.Errorf("%w: %w (or set Options.AllowNoContextTimeout)", ErrInvalidOptions, err)
		}
		o.Observer.OnWarning(fmt.Errorf("cache: %w", err))
	}
	out := &Cache{
		client:   c,
		prefix:   o.Prefix,
		digits:   o.MinorDigits,
		now:      o.Now,
		wallNow:  opts.Now == nil,
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

// Delete removes a promotion: its tiers and meta keys at once, so
// readers get ErrNotFound from then on. The gift lists of its current and
// previous version are kept for Options.Grace (or until they expire
// sooner on their own), as when Refresh replaces a version: a reader that
// fetched a tier just before the delete still gets its gifts, and only
// one that asks more than Grace later gets ErrGiftsGone. It reports
// whether the promotion existed.
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
		var gifts []string
		for _, v := range vals {
			if s, ok := v.(string); ok && s != "" {
				gifts = append(gifts, c.giftsKey(id, s))
			}
		}
		if err := sameSlot(append(keys, gifts...)...); err != nil {
			return err
		}
		var del *redis.IntCmd
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			del = pipe.Del(ctx, keys...)
			for _, k := range gifts {
				// LT: never lengthen a TTL (End + Grace may come sooner).
				pipe.Do(ctx, "pexpire", k, c.grace.Milliseconds(), "lt")
			}
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

// ctxErr joins the context's error when the call was cancelled, so
// errors.Is(err, context.Canceled) holds whatever go-redis returned.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return errors.Join(err, cerr)
	}
	return err
}
