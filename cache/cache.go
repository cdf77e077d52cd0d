package cache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
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
	tombTTL  time.Duration
	obs      Observer
	// nopObs: obs is NopObserver, so the hot path skips timing and the
	// per-line OnLookup loop.
	nopObs bool
	memo   *memo
	// keys keeps the tiers keys of recently matched promotions built.
	keys *keyTable
	// scratch pools a cart's working memory (*cartScratch) between carts.
	scratch sync.Pool

	// near is the in-process ladder cache (Options.NearCache), nil when off.
	near *near
	// rt is the read-through loader (Options.Loader), nil when off.
	rt *readThrough
}

// New returns a Cache on c. c may be a *redis.Client or a
// *redis.ClusterClient: every transaction and read touches one
// promotion's hash tag. A nil client (or a typed nil such as a nil
// *redis.Client) or bad Options are a *ValidationError (Field "client"
// or "options").
func New(c redis.UniversalClient, opts Options) (*Cache, error) {
	if isNil(c) {
		return nil, invalid("client", "nil redis client (%T)", c)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := redisconf.CheckDeadlines(c); err != nil {
		if !o.AllowNoContextTimeout {
			return nil, invalid("options", "%w (or set Options.AllowNoContextTimeout)", err)
		}
		o.Observer.OnWarning(fmt.Errorf("cache: %w", err))
	}
	out := &Cache{
		client:   c,
		prefix:   o.Prefix,
		digits:   gradient.Digits(o.MinorDigits),
		now:      o.Now,
		wallNow:  opts.Now == nil,
		grace:    o.Grace,
		maxBytes: o.MaxRecordBytes,
		retries:  o.RefreshRetries,
		tombTTL:  o.TombstoneTTL,
		obs:      o.Observer,
		nopObs:   isNop(o.Observer),
		memo:     newMemo(o.DecodeCacheSize),
		keys:     new(keyTable),
	}
	if err := out.withNearAndLoader(o); err != nil {
		return nil, err
	}
	return out, nil
}

// isNil reports whether v is nil or an interface holding a nil pointer,
// func, map, channel or slice: a typed nil would pass a == nil check and
// panic at its first use.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Chan, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

func isNop(o Observer) bool {
	_, ok := o.(NopObserver)
	return ok
}

// Prefix returns the key prefix in use.
func (c *Cache) Prefix() string { return c.prefix }

// ctxErr joins the context's error when the call was cancelled, so
// errors.Is(err, context.Canceled) holds whatever go-redis returned.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return errors.Join(err, cerr)
	}
	return err
}
