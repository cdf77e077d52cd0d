package cache

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
)

// Loader loads one promotion from the source of truth (a database, a rules
// service) when a read finds it missing from Redis. It returns
// ErrUnknownPromotion (or an error wrapping it) when the source has no
// such promotion; any other error is a failed load. It must honour ctx:
// a load that outlives LoadOptions.Timeout is abandoned. Load is called
// concurrently for distinct IDs (a cart's missing promotions load at once).
type Loader interface {
	Load(ctx context.Context, id string) (*gradient.Promotion, error)
}

// LoaderFunc adapts a function to Loader.
type LoaderFunc func(ctx context.Context, id string) (*gradient.Promotion, error)

// Load calls f.
func (f LoaderFunc) Load(ctx context.Context, id string) (*gradient.Promotion, error) {
	return f(ctx, id)
}

// Defaults of LoadOptions.
const (
	defaultLoadTimeout   = 5 * time.Second
	defaultLoadLeaseTTL  = 10 * time.Second
	defaultLoadMissTTL   = 30 * time.Second
	defaultLoadPollEvery = 10 * time.Millisecond
	defaultLoadMaxMisses = 100000
	defaultLoadFailTTL   = time.Second
	// localMissTrust is how long a process without a near cache believes
	// its own remembered miss before it asks Redis's mark again (one
	// round trip, no Load).
	localMissTrust = time.Second
)

// LoadOptions tunes the read-through (Options.Load). Zero fields take the
// defaults their comments name. A duration under 1ms (negative included)
// is ErrInvalid; any longer one is accepted, up to the largest
// time.Duration, and a remembered miss or failure then lasts as long as
// the process.
type LoadOptions struct {
	// Timeout bounds one Loader.Load call. Default 5s. A cart line never
	// waits longer than its own ctx allows, whatever this is.
	Timeout time.Duration
	// LeaseTTL is how long the Redis lease (SET NX PX) lets one process
	// load a promotion while the others wait for its refresh; it must
	// exceed Timeout, so a load in time is never doubled. Default 10s. A
	// process that dies holding it delays the others by at most this.
	LeaseTTL time.Duration
	// MissTTL is how long an ID the loader called unknown is remembered,
	// in Redis and in process, before the source is asked again. A Refresh
	// of the ID deletes the Redis mark in its transaction and this
	// process's mark at once; other processes drop theirs on the tracking
	// invalidation with a near cache, and within 1s without one (until
	// then a read finds the promotion anyway: marks are consulted only
	// when Redis has none). Default 30s.
	MissTTL time.Duration
	// PollEvery is how often a process waiting for another's load checks
	// Redis. Default 10ms.
	PollEvery time.Duration
	// MaxMisses bounds the misses remembered in process, and apart from
	// them the failures. Default 100000.
	MaxMisses int
	// FailTTL is how long a failed load is remembered in process: lines
	// of that ID answer its ErrLoad at once instead of each waiting for
	// a source that is down (a cart's deadline is spent once, not per
	// cart). A Refresh of the ID forgets it. Default 1s.
	FailTTL time.Duration
}

func (o LoadOptions) withDefaults() (LoadOptions, error) {
	for _, f := range []struct {
		d    *time.Duration
		def  time.Duration
		name string
	}{{&o.Timeout, defaultLoadTimeout, "Load.Timeout"}, {&o.LeaseTTL, defaultLoadLeaseTTL, "Load.LeaseTTL"},
		{&o.MissTTL, defaultLoadMissTTL, "Load.MissTTL"}, {&o.PollEvery, defaultLoadPollEvery, "Load.PollEvery"},
		{&o.FailTTL, defaultLoadFailTTL, "Load.FailTTL"}} {
		if err := orDefault(f.name, f.d, f.def, time.Millisecond); err != nil {
			return o, err
		}
	}
	if o.LeaseTTL <= o.Timeout {
		return o, invalid("options", "Load.LeaseTTL %v must exceed Load.Timeout %v", o.LeaseTTL, o.Timeout)
	}
	if err := orDefault("Load.MaxMisses", &o.MaxMisses, defaultLoadMaxMisses, 0); err != nil {
		return o, err
	}
	return o, nil
}

var (
	//go:embed lua/lease_release.lua
	luaLeaseRelease    string
	scriptLeaseRelease = redis.NewScript(luaLeaseRelease)
)

// readThrough is the loader with its flights and remembered misses. The
// flights are singleflight's idea kept in-house rather than
// golang.org/x/sync: a flight must outlive the caller that started it,
// tell each caller whether it loaded or shared the load, and settle the
// misses and failures under the same lock as its own end.
type readThrough struct {
	loader Loader
	opt    LoadOptions

	// trust bounds how long a mark is believed in process. With a near
	// cache, tracking clears a mark when another process warms the ID (and
	// a tracking loss clears them all), so it is MissTTL; without one, a
	// warm elsewhere is seen within localMissTrust.
	trust time.Duration

	mu       sync.Mutex
	flights  map[string]*flight // one load per promotion in this process
	misses   map[string]mark    // id -> the source does not know it, or it ended
	failures map[string]failure // id -> its last load's failure, for FailTTL
}

// failure is a failed load remembered until its expiry (UnixNano).
type failure struct {
	until int64
	err   error
}

// flight is one promotion's load in this process; every caller waits on
// done (or leaves at its own ctx) and reads err.
type flight struct {
	done chan struct{}
	err  error
	how  LoadOutcome // how load ended, for the caller that started it
}

// loadable reports whether a line's error means the promotion is not in
// Redis whole (missing, or damaged by eviction), so the loader should be
// asked; its Refresh rewrites a damaged promotion.
func loadable(err error) bool { return errors.Is(err, ErrNotFound) || errors.Is(err, ErrDamaged) }

// errRemembered is a line's error for an ID the source does not know,
// or (ended) whose End + Grace has passed.
func errRemembered(id string, ended bool) error {
	if ended {
		return fmt.Errorf("%w: promotion %q ended (End + Grace has passed; it is no longer stored)", ErrNotActive, id)
	}
	return fmt.Errorf("%w: %w: %q", ErrNotFound, ErrUnknownPromotion, id)
}

// readThroughLines loads the promotions of the lines that found theirs
// missing, each once (concurrently, bounded by ctx), and answers those
// lines again from Redis. A failed load is that line's error; the other
// lines keep their answers.
func (c *Cache) readThroughLines(ctx context.Context, qs []Query, opt MatchOptions, rs []Result, start time.Time) {
	var ids []string
	var damage []bool // by id: some line found it damaged, not missing
	for i := range rs {
		if !loadable(rs[i].Err) {
			continue
		}
		k := index(ids, qs[i].Promotion)
		if k < 0 {
			k = len(ids)
			ids, damage = append(ids, qs[i].Promotion), append(damage, false)
		}
		damage[k] = damage[k] || errors.Is(rs[i].Err, ErrDamaged)
	}
	if len(ids) == 0 {
		return
	}
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for k, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = c.rt.ensure(ctx, c, id, damage[k])
		}()
	}
	wg.Wait()
	var again, done []int // lines read again; lines answered here (OnLookup below)
	for i := range rs {
		if !loadable(rs[i].Err) {
			continue
		}
		k := index(ids, qs[i].Promotion)
		if errs[k] != nil {
			rs[i] = Result{Promotion: qs[i].Promotion, Err: errs[k]}
			done = append(done, i)
			continue
		}
		again = append(again, i)
	}
	if len(again) > 0 {
		sub := make([]Query, len(again))
		for k, i := range again {
			sub[k] = qs[i]
		}
		subRs := make([]Result, len(again))
		err := c.matchInto(ctx, sub, opt, subRs)
		for k, i := range again {
			if err != nil {
				subRs[k] = Result{Promotion: qs[i].Promotion, Err: err}
			}
			rs[i] = subRs[k]
			// The re-read reported its own answer unless it failed or
			// still found the promotion missing.
			if err != nil || loadable(rs[i].Err) {
				done = append(done, i)
			}
		}
	}
	if !c.nopObs {
		d := time.Since(start)
		for _, i := range done {
			c.obs.OnLookup(rs[i].Promotion, outcomeOf(rs[i].Err), d)
		}
	}
}

// loadStart is when a call that may load began, for its lines' OnLookup
// (zero when nothing observes it).
func (c *Cache) loadStart() time.Time {
	if c.rt == nil || c.nopObs {
		return time.Time{}
	}
	return time.Now()
}

func index(ids []string, id string) int {
	for k, x := range ids {
		if x == id {
			return k
		}
	}
	return -1
}

// ensure makes id present in Redis, or says why not: nil when it is there
// (loaded here or by another process), errRemembered when the source does
// not know it, an ErrLoad otherwise. damaged: a read found it stored but
// not whole, so being there is not enough. The caller waits at most until
// ctx ends; the load itself goes on for the other callers. It reports how
// it ended to Observer.OnLoad.
func (rt *readThrough) ensure(ctx context.Context, c *Cache, id string, damaged bool) error {
	start := time.Now()
	how, err := rt.wait(ctx, c, id, damaged)
	c.obs.OnLoad(id, how, time.Since(start))
	return err
}

func (rt *readThrough) wait(ctx context.Context, c *Cache, id string, damaged bool) (LoadOutcome, error) {
	if known, ended := rt.remembered(id); known {
		return LoadRemembered, errRemembered(id, ended)
	}
	if err := rt.failed(id); err != nil {
		return LoadFailed, err
	}
	rt.mu.Lock()
	f := rt.flights[id]
	joined := f != nil
	if f == nil {
		f = &flight{done: make(chan struct{})}
		rt.flights[id] = f
		// Detached from this caller: another caller may still want the
		// result after this one gave up. Bounded by the lease's life.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rt.opt.LeaseTTL)
		go func() {
			defer cancel()
			f.how, f.err = rt.load(fctx, c, id, damaged)
			rt.mu.Lock()
			delete(rt.flights, id)
			if f.how == LoadFailed {
				rt.fail(id, f.err)
			}
			rt.mu.Unlock()
			close(f.done)
		}()
	}
	rt.mu.Unlock()
	select {
	case <-f.done:
		if !joined {
			return f.how, f.err
		}
		// Another caller's load answered this one.
		switch f.how {
		case LoadLoaded, LoadShared:
			return LoadShared, f.err
		case LoadUnknown, LoadRemembered, LoadEnded:
			return LoadRemembered, f.err
		case LoadStale:
			return LoadShared, f.err
		}
		return f.how, f.err
	case <-ctx.Done():
		return LoadFailed, fmt.Errorf("%w: promotion %q: %w", ErrLoad, id, ctx.Err())
	}
}

// load takes the Redis lease and calls the loader, or waits for the
// process that holds the lease, until the promotion is stored (whole, when
// damaged), known unknown, or ctx ends.
func (rt *readThrough) load(ctx context.Context, c *Cache, id string, damaged bool) (LoadOutcome, error) {
	token := newToken()
	tiers, absent, lease := c.tiersKey(id), c.absentKey(id), c.leaseKey(id)
	if err := sameSlot(tiers, absent, lease); err != nil {
		return LoadFailed, fmt.Errorf("%w: %w", ErrLoad, err)
	}
	for {
		// MULTI/EXEC (one slot, checked above): the existence check and
		// the lease must see one state, or a Refresh landing between
		// them (it writes the tiers and ends the lease) would let this
		// read take a free lease for a promotion just stored, and load
		// the source again for nothing.
		pipe := c.client.TxPipeline()
		exists := pipe.Exists(ctx, tiers)
		mark := pipe.PTTL(ctx, absent)
		kind := pipe.MGet(ctx, absent)
		took := pipe.SetNX(ctx, lease, token, rt.opt.LeaseTTL)
		if _, err := pipe.Exec(ctx); err != nil {
			return LoadFailed, fmt.Errorf("%w: promotion %q: %w", ErrLoad, id, ctxErr(ctx, err))
		}
		if damaged && exists.Val() > 0 {
			// A tiers key without a sentinel, or without its gift lists,
			// exists and is still damaged: Info tells, off the hot path.
			if _, err := c.Info(ctx, id); errors.Is(err, ErrDamaged) {
				exists.SetVal(0)
			} else if err != nil && !errors.Is(err, ErrNotFound) {
				if took.Val() {
					rt.release(ctx, c, lease, token)
				}
				return LoadFailed, fmt.Errorf("%w: promotion %q: %w", ErrLoad, id, err)
			}
		}
		switch {
		case exists.Val() > 0 || mark.Val() > 0 || mark.Val() == -1:
			// Stored, or known unknown, by someone else meanwhile.
			if took.Val() {
				rt.release(ctx, c, lease, token)
			}
			if exists.Val() > 0 {
				return LoadShared, nil
			}
			ttl := mark.Val()
			if ttl <= 0 {
				ttl = rt.opt.MissTTL
			}
			ended := false
			if v := kind.Val(); len(v) == 1 {
				ended = v[0] == markEnded
			}
			rt.remember(id, ttl, ended)
			return LoadRemembered, errRemembered(id, ended)
		case took.Val():
			how, err := rt.loadHeld(ctx, c, id, &fill{lease: lease, token: token})
			rt.release(ctx, c, lease, token)
			return how, err
		}
		// Another process holds the lease: wait for its refresh.
		timer := time.NewTimer(rt.opt.PollEvery)
		select {
		case <-ctx.Done():
			timer.Stop()
			return LoadFailed, fmt.Errorf("%w: promotion %q: waiting for another process's load: %w", ErrLoad, id, ctx.Err())
		case <-timer.C:
		}
	}
}

// loadHeld runs the loader under the lease and writes what it returns
// through Refresh as a fill (it applies only while the lease is still
// this load's, so a Refresh or Delete that came meanwhile wins), or
// remembers that the source does not know id, or that it ended.
func (rt *readThrough) loadHeld(ctx context.Context, c *Cache, id string, fl *fill) (LoadOutcome, error) {
	p, err := rt.call(ctx, id)
	switch {
	case errors.Is(err, ErrUnknownPromotion):
		return rt.markMiss(ctx, c, id, false)
	case err != nil:
		return LoadFailed, fmt.Errorf("%w: promotion %q: %w", ErrLoad, id, err)
	case p == nil:
		return LoadFailed, fmt.Errorf("%w: promotion %q: loader returned no promotion and no error", ErrLoad, id)
	case p.ID != id:
		return LoadFailed, fmt.Errorf("%w: promotion %q: loader returned promotion %q", ErrLoad, id, p.ID)
	case !p.End.IsZero() && !c.now().Before(p.End.Add(c.grace)):
		// Its keys would expire as they are written: every line would
		// load it again. Remembered like an unknown ID, answered
		// ErrNotActive.
		return rt.markMiss(ctx, c, id, true)
	}
	rep, err := c.refreshObserved(ctx, []gradient.Promotion{*p}, fl)
	if err != nil {
		return LoadFailed, fmt.Errorf("%w: promotion %q: %w", ErrLoad, id, err)
	}
	if rep.Stale > 0 {
		// Another writer came after the load began: the lines are
		// answered from what Redis holds.
		return LoadStale, nil
	}
	return LoadLoaded, nil
}

// markMiss remembers, in Redis and in process for MissTTL, that the
// source does not know id, or (ended) that it ended.
func (rt *readThrough) markMiss(ctx context.Context, c *Cache, id string, ended bool) (LoadOutcome, error) {
	v, how := markUnknown, LoadUnknown
	if ended {
		v, how = markEnded, LoadEnded
	}
	if err := c.client.Set(ctx, c.absentKey(id), v, rt.opt.MissTTL).Err(); err != nil {
		return LoadFailed, fmt.Errorf("%w: promotion %q: remember miss: %w", ErrLoad, id, ctxErr(ctx, err))
	}
	rt.remember(id, rt.opt.MissTTL, ended)
	return how, errRemembered(id, ended)
}

// call runs the loader in its own goroutine, so a loader that ignores
// ctx still cannot hold the flight past Timeout, and turns a panic into
// an error.
func (rt *readThrough) call(ctx context.Context, id string) (*gradient.Promotion, error) {
	lctx, cancel := context.WithTimeout(ctx, rt.opt.Timeout)
	defer cancel()
	type reply struct {
		p   *gradient.Promotion
		err error
	}
	ch := make(chan reply, 1)
	go func() {
		var r reply
		defer func() {
			if v := recover(); v != nil {
				r = reply{err: fmt.Errorf("loader panicked: %v", v)}
			}
			ch <- r
		}()
		r.p, r.err = rt.loader.Load(lctx, id)
	}()
	select {
	case r := <-ch:
		return r.p, r.err
	case <-lctx.Done():
		return nil, fmt.Errorf("loader: %w", lctx.Err())
	}
}

func (rt *readThrough) release(ctx context.Context, c *Cache, lease, token string) {
	// A lease that cannot be given back expires after LeaseTTL.
	_ = scriptLeaseRelease.Run(ctx, c.client, []string{lease}, token).Err()
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// withNearAndLoader sets up the optional parts New was asked for.
func (c *Cache) withNearAndLoader(o Options) error {
	if o.NearCache != nil {
		switch cl := c.client.(type) {
		case *redis.Client:
		case *redis.ClusterClient:
			// Tracking covers the masters: a ladder read from a lagging
			// replica after an invalidation would be installed as current.
			if o := cl.Options(); o.ReadOnly || o.RouteByLatency || o.RouteRandomly {
				return invalid("options", "NearCache needs a ClusterClient that reads from masters (not ReadOnly, RouteByLatency or RouteRandomly)")
			}
		default:
			return invalid("options", "NearCache needs a *redis.Client or *redis.ClusterClient, not %T", c.client)
		}
		no, err := o.NearCache.withDefaults()
		if err != nil {
			return err
		}
		c.near = newNear(no, c.obs)
	}
	if o.Loader != nil {
		lo, err := o.Load.withDefaults()
		if err != nil {
			return err
		}
		if o.TombstoneTTL <= lo.LeaseTTL {
			return invalid("options", "TombstoneTTL %v must exceed Load.LeaseTTL %v (a tombstone must outlive every load in flight)",
				o.TombstoneTTL, lo.LeaseTTL)
		}
		c.rt = &readThrough{loader: o.Loader, opt: lo, trust: lo.MissTTL, flights: map[string]*flight{}, misses: map[string]mark{},
			failures: map[string]failure{}}
		if c.near == nil {
			c.rt.trust = min(lo.MissTTL, localMissTrust)
		}
	}
	return nil
}
