package cache

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Invalidation is Redis client tracking in broadcast mode, on one
// dedicated connection per node (per master on a Cluster):
//
//	CLIENT ID                                   -> id
//	CLIENT TRACKING ON REDIRECT <id> BCAST PREFIX <prefix>:{p:
//	SUBSCRIBE __redis__:invalidate
//
// The connection redirects its own invalidations to itself, so tracking
// lives and dies with the one socket we read: when it drops, nothing is
// tracked and we know it. BCAST keeps no per-key table on the server; the
// prefix covers every key of every promotion (tiers, meta, gifts, the
// read-through marks). RESP2 is forced on that connection so
// invalidations arrive as ordinary pub/sub messages.
//
// go-redis's own client-side cache (v9.22+, RESP3) was considered for each
// read and not used:
//   - Match and MatchCart: it caches one reply per distinct command, so a
//     ZRANGE BYSCORE is one entry per query value, and a cart over amounts
//     rarely asks the same value twice. A ladder answers every value from
//     one entry per promotion.
//   - Redis Cluster: it is standalone only; this tracker runs per master.
//   - Gift lists: stored per version, which never changes, so they need no
//     invalidation at all and are held on the ladder of their version.
//   - Staleness: here one pub/sub message drops the ladder as soon as it
//     arrives.

const (
	invalidateChannel = "__redis__:invalidate"
	// topologyEvery is how often a Cluster's masters are re-listed.
	topologyEvery = time.Second
	// trackingClientName names the tracking connections in CLIENT LIST.
	trackingClientName = "tierset-near"
)

// tracker keeps one subscriber per node and tells the near cache whether
// all of them are established.
type tracker struct {
	c      *Cache
	nc     *near
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	subs map[string]*subscriber // by node address
}

type subscriber struct {
	addr string
	rdb  *redis.Client
	// id is the tracking connection's CLIENT ID (0 before the first).
	id     atomic.Int64
	cancel context.CancelFunc

	mu sync.Mutex
	ps *redis.PubSub
	up bool // under tracker.mu
	// confirmed is the send time (UnixNano) of the latest PING answered
	// on the established connection; 0 while down. Under tracker.mu.
	confirmed int64
}

// start starts tracking once, on the first near read. Its goroutines live
// until Close, detached from the read's cancellation.
func (nc *near) start(ctx context.Context, c *Cache) {
	nc.trackOnce.Do(func() {
		tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		t := &tracker{c: c, nc: nc, cancel: cancel, subs: map[string]*subscriber{}}
		nc.tracker = t
		t.wg.Add(3)
		go t.watchNodes(tctx)
		go t.revalidate(tctx)
		go t.refresher(tctx)
	})
}

// Close stops the near cache's tracking (a no-op without one): held
// ladders are dropped and every later read goes to Redis. The Redis
// client is the caller's and stays open. Close of a nil *Cache is
// ErrInvalid (Field "cache").
func (c *Cache) Close() error {
	if c == nil {
		return invalid("cache", "Close of a nil *Cache")
	}
	nc := c.near
	if nc == nil {
		return nil
	}
	nc.trackOnce.Do(func() {}) // no tracking starts after Close
	if t := nc.tracker; t != nil {
		t.cancel()
		// Close the connections before waiting: a listen blocked in a
		// receive sees the cancellation only when its connection fails
		// (else at its next PING, up to pingEvery later). No subscriber
		// is added once ctx is cancelled. stop runs outside t.mu: a listen
		// dialling under s.mu calls setSub, which takes t.mu.
		t.mu.Lock()
		subs := make([]*subscriber, 0, len(t.subs))
		for addr, s := range t.subs {
			subs = append(subs, s)
			delete(t.subs, addr)
		}
		t.mu.Unlock()
		for _, s := range subs {
			s.stop()
		}
		t.wg.Wait()
	}
	nc.setUp(false)
	return nil
}

func (t *tracker) watchNodes(ctx context.Context) {
	defer t.wg.Done()
	tick := time.NewTicker(topologyEvery)
	defer tick.Stop()
	for {
		t.syncNodes(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// syncNodes starts a subscriber for every node not yet tracked and stops
// those of nodes that left. Any change drops everything held.
func (t *tracker) syncNodes(ctx context.Context) {
	nodes := map[string]*redis.Options{}
	switch cl := t.c.client.(type) {
	case *redis.Client:
		nodes[cl.Options().Addr] = cl.Options()
	case *redis.ClusterClient:
		var mu sync.Mutex
		lctx, cancel := context.WithTimeout(ctx, topologyEvery)
		err := cl.ForEachMaster(lctx, func(_ context.Context, m *redis.Client) error {
			mu.Lock()
			nodes[m.Options().Addr] = m.Options()
			mu.Unlock()
			return nil
		})
		cancel()
		if err != nil {
			return // keep what is tracked; a dead node's subscriber is down already
		}
	}
	var gone []*subscriber
	// stop runs after t.mu is released: a listen dialling under s.mu
	// calls setSub, which takes t.mu.
	defer func() {
		for _, s := range gone {
			s.stop()
		}
	}()
	t.mu.Lock()
	defer t.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	changed := false
	for addr, s := range t.subs {
		if nodes[addr] == nil {
			gone = append(gone, s)
			delete(t.subs, addr)
			changed = true
		}
	}
	for addr, o := range nodes {
		if t.subs[addr] == nil {
			t.subs[addr] = t.subscribe(ctx, o)
			changed = true
		}
	}
	if changed {
		t.recompute(true)
	}
}

// recompute tells the near cache whether every node is tracked; force
// drops everything even when that does not change.
func (t *tracker) recompute(force bool) {
	all := len(t.subs) > 0
	for _, s := range t.subs {
		all = all && s.up
	}
	if force || all != t.nc.up.Load() || !all {
		t.nc.setUp(all)
		if t.c.rt != nil {
			t.c.rt.forgetAll() // a warm elsewhere may have gone unseen
		}
	}
}

func (t *tracker) setSub(s *subscriber, up bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.subs[s.addr] != s {
		return // stopped
	}
	if s.up != up || !up {
		s.up = up
		if !up {
			s.confirmed = 0
		}
		t.recompute(false)
	}
}

// confirm records that s's PING sent at at was answered, and moves the
// near cache's tracking confirmation to the oldest of every node's.
func (t *tracker) confirm(s *subscriber, at int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.subs[s.addr] != s || !s.up {
		return
	}
	s.confirmed = at
	oldest := int64(0)
	for _, o := range t.subs {
		if !o.up || o.confirmed == 0 {
			return // a node not confirmed yet: ladders keep their own
		}
		if oldest == 0 || o.confirmed < oldest {
			oldest = o.confirmed
		}
	}
	if oldest > t.nc.confirmed.Load() {
		t.nc.confirmed.Store(oldest)
	}
}

func (t *tracker) subscribe(ctx context.Context, base *redis.Options) *subscriber {
	// Field by field, not *base: go-redis writes some fields of a live
	// client's Options (MaintNotificationsConfig, under its own lock) as it
	// dials, and a whole-struct copy would race with that.
	opt := redis.Options{
		Network:               base.Network,
		Addr:                  base.Addr,
		Dialer:                base.Dialer,
		Username:              base.Username,
		Password:              base.Password,
		CredentialsProvider:   base.CredentialsProvider,
		DB:                    base.DB,
		DialTimeout:           base.DialTimeout,
		ReadTimeout:           base.ReadTimeout,
		WriteTimeout:          base.WriteTimeout,
		ContextTimeoutEnabled: base.ContextTimeoutEnabled,
		TLSConfig:             base.TLSConfig,
	}
	opt.Protocol = 2
	opt.PoolSize, opt.MinIdleConns, opt.MaxIdleConns = 1, 0, 0
	opt.ClientName = trackingClientName
	// No retries: a failed handshake fails fast and listen backs off.
	opt.MaxRetries = -1
	s := &subscriber{addr: base.Addr}
	prefix := t.c.prefix + tagOpen
	userOnConnect := base.OnConnect
	opt.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
		if userOnConnect != nil {
			if err := userOnConnect(ctx, cn); err != nil {
				return err
			}
		}
		id, err := cn.ClientID(ctx).Result()
		if err != nil {
			return err
		}
		if err := cn.Do(ctx, "client", "tracking", "on", "redirect", id, "bcast", "prefix", prefix).Err(); err != nil {
			return err
		}
		s.id.Store(id)
		return nil
	}
	s.rdb = redis.NewClient(&opt)
	// go-redis reconnects a PubSub inside the read that saw its connection
	// fail, before that read returns the error: mark the node down as the
	// new connection is dialled, so nothing is served from ladders the old
	// one covered while the handshake runs.
	s.rdb.AddHook(dialDownHook{down: func() { t.setSub(s, false) }})
	sctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	t.wg.Add(1)
	go t.listen(sctx, s)
	return s
}

// dialDownHook calls down before every dial of the tracking client.
type dialDownHook struct{ down func() }

func (h dialDownHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.down()
		return next(ctx, network, addr)
	}
}

func (dialDownHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialDownHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// stop closes the subscriber; its listen goroutine ends on the error.
func (s *subscriber) stop() {
	s.cancel()
	s.mu.Lock()
	if s.ps != nil {
		_ = s.ps.Close()
	}
	s.mu.Unlock()
	_ = s.rdb.Close()
}

// pingEvery is how long the tracking connection may stay silent before a
// PING, and how long the PING may go unanswered before the connection is
// taken for dead.
func (nc *near) pingEvery() time.Duration { return min(time.Second, nc.opt.MaxStaleness/2) }

// confirmEvery is how often each tracking connection is pinged to
// confirm every held ladder at once (near.confirmed): MaxStaleness/4.
func (nc *near) confirmEvery() time.Duration { return nc.opt.MaxStaleness / 4 }

// listen reads one node's invalidations. Any failure marks the node down
// (dropping everything held) and builds a new connection; the node is up
// again once the server confirms the SUBSCRIBE, which it does after the
// CLIENT TRACKING of the same connection.
func (t *tracker) listen(ctx context.Context, s *subscriber) {
	defer t.wg.Done()
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		if backoff > 0 {
			timer := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
		}
		s.mu.Lock()
		if ctx.Err() != nil {
			s.mu.Unlock()
			return
		}
		ps := s.rdb.Subscribe(ctx, invalidateChannel)
		s.ps = ps
		s.mu.Unlock()
		if t.receive(ctx, s, ps) {
			backoff = 0 // it was established: reconnect at once
		}
		t.setSub(s, false)
		_ = ps.Close()
		backoff = min(max(2*backoff, 10*time.Millisecond), time.Second)
	}
}

// receive handles messages until the connection fails; it reports
// whether tracking was established on it.
func (t *tracker) receive(ctx context.Context, s *subscriber, ps *redis.PubSub) (established bool) {
	every := t.nc.pingEvery()
	period := t.nc.confirmEvery()
	var sent time.Time  // the unanswered PING's send time; zero when none
	heard := time.Now() // when the connection last delivered anything
	next := heard.Add(period)
	for ctx.Err() == nil {
		now := time.Now()
		if sent.IsZero() && !now.Before(next) {
			if ps.Ping(ctx) != nil {
				return established
			}
			sent, next = now, now.Add(period)
		}
		wait := next.Sub(now)
		if !sent.IsZero() {
			// Dead only when silent for 2×pingEvery with a PING
			// unanswered for pingEvery: a PONG queued behind a storm of
			// invalidations arrives late, but the connection is alive, and
			// a process kept off its cores needs as long as before to
			// count it lost.
			wait = max(every-now.Sub(sent), 2*every-now.Sub(heard))
			if wait <= 0 {
				return established
			}
			wait = min(wait, every)
		}
		msg, err := ps.ReceiveTimeout(ctx, max(wait, time.Millisecond))
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return established // failed
		}
		heard = time.Now()
		switch m := msg.(type) {
		case *redis.Pong:
			// Redis sends a BCAST invalidation before the replies of the
			// event-loop turn that made it, on this one connection, in
			// order: every invalidation of a write committed before the
			// PING was sent has been handled above.
			if !sent.IsZero() && established {
				t.confirm(s, sent.UnixNano())
			}
			sent = time.Time{}
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Channel == invalidateChannel {
				if established {
					// go-redis reconnected and re-subscribed on its own:
					// invalidations sent to the old connection are lost.
					t.setSub(s, false)
				}
				established = true
				t.setSub(s, true)
			}
		case *redis.Message:
			if t.nc.loseInvalidations.Load() {
				continue
			}
			keys := m.PayloadSlice
			if len(keys) == 0 && m.Payload != "" {
				keys = []string{m.Payload}
			}
			if len(keys) == 0 {
				// FLUSHALL/FLUSHDB: an invalidation that names no key covers
				// every key. (go-redis v9.23 fails the receive on its null
				// payload instead, which drops everything too.)
				t.nc.dropAll()
				continue
			}
			// One write's keys (tiers, meta, gifts) arrive in one message:
			// each promotion is invalidated once, so its re-read is not
			// refused by the invalidation of its own next key.
			ids := make([]string, 0, len(keys))
			for _, k := range keys {
				if strings.HasSuffix(k, suffixAbsent) || strings.HasSuffix(k, suffixLease) {
					continue // read-through bookkeeping: no ladder changed (a warm also touches tiers)
				}
				if id := t.c.idFromKey(k); id != "" && !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			}
			t.c.invalidateTracked(ids)
		}
	}
	return established
}

// invalidateTracked handles a tracking invalidation of ids: their
// remembered misses are forgotten, and held ladders are marked stale and
// re-read in the background (near_refresh.go).
func (c *Cache) invalidateTracked(ids []string) {
	now := time.Now().UnixNano()
	var queue []string
	for _, id := range ids {
		if c.rt != nil {
			c.rt.forget(id)
		}
		if c.near != nil && c.near.softInvalidate(id, now) {
			queue = append(queue, id)
		}
	}
	if c.near != nil {
		c.near.queueReread(queue)
	}
}

// invalidateLocal forgets everything this process holds about id: its
// ladder and its remembered miss.
func (c *Cache) invalidateLocal(id string) {
	if c.near != nil {
		c.near.invalidate(id)
	}
	if c.rt != nil {
		c.rt.forget(id)
	}
}

// idFromKey extracts the promotion ID from any key of a promotion, or ""
// for a key of another shape.
func (c *Cache) idFromKey(key string) string {
	head := c.prefix + tagOpen
	if !strings.HasPrefix(key, head) {
		return ""
	}
	rest := key[len(head):]
	end := strings.IndexByte(rest, '}')
	if end <= 0 {
		return ""
	}
	return rest[:end]
}

// revalidate re-reads, every MaxStaleness/2, the version of every held
// ladder read since the previous pass began, in pipelines of 1000 HGETs,
// so a ladder is served past MaxStaleness only if Redis confirmed it,
// even if an invalidation was lost. A ladder not read for that long is
// not checked: its commands do not grow with ladders held but unused.
// It ages out, and the next cart that needs it re-reads it (a version
// check, and the ladder only if it changed; near_refresh.go).
func (t *tracker) revalidate(ctx context.Context) {
	defer t.wg.Done()
	tick := time.NewTicker(t.nc.opt.MaxStaleness / 2)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if d := time.Duration(t.nc.passLate.Load()); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
		held := t.nc.recentlyUsed()
		for i := 0; i < len(held) && ctx.Err() == nil; i += 1000 {
			t.revalidateChunk(ctx, held[i:min(i+1000, len(held))])
		}
	}
}

func (t *tracker) revalidateChunk(ctx context.Context, ls []*ladder) {
	rctx, cancel := context.WithTimeout(ctx, t.nc.opt.MaxStaleness/2)
	defer cancel()
	at := time.Now().UnixNano() // before the reads: the confirmation is as old as that
	pipe := t.c.client.Pipeline()
	cmds := make([]*redis.StringCmd, len(ls))
	for k, l := range ls {
		cmds[k] = pipe.HGet(rctx, t.c.metaKey(l.id), metaVersion)
	}
	_, _ = pipe.Exec(rctx)
	for k, l := range ls {
		v, err := cmds[k].Result()
		switch {
		case err == nil && v == l.version:
			t.nc.revalidated(l, at)
		case err == nil, errors.Is(err, redis.Nil):
			// Replaced or gone (or this reply is older than the ladder
			// installed since): handled as an invalidation, so a pass
			// racing a write does not drop a ladder carts are using.
			if t.nc.softInvalidate(l.id, time.Now().UnixNano()) {
				t.nc.queueReread([]string{l.id})
			}
		}
		// A transport error confirms nothing: the ladder ages out.
	}
}

// trackingIDs returns the CLIENT IDs of the tracking connections (tests).
func (c *Cache) trackingIDs() []int64 {
	if c.near == nil || c.near.tracker == nil {
		return nil
	}
	t := c.near.tracker
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []int64
	for _, s := range t.subs {
		out = append(out, s.id.Load())
	}
	return out
}
