package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// acSlotMover moves one slot between two masters of a cluster, by hand,
// as redis-cli --cluster reshard does: IMPORTING and MIGRATING, MIGRATE
// of its keys, then SETSLOT NODE on every master.
type acSlotMover struct {
	slot    int
	masters map[string]*redis.Client // by node ID
	addr    map[string]string        // node ID -> host:port
}

func newACSlotMover(t *testing.T, ctx context.Context, cc *redis.ClusterClient, slot int) (m *acSlotMover, owner, other string) {
	t.Helper()
	shards, err := cc.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	m = &acSlotMover{slot: slot, masters: map[string]*redis.Client{}, addr: map[string]string{}}
	for _, sh := range shards {
		for _, n := range sh.Nodes {
			if n.Role != "master" {
				continue
			}
			addr := net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
			c := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { _ = c.Close() })
			m.masters[n.ID], m.addr[n.ID] = c, addr
			for _, r := range sh.Slots {
				if r.Start <= int64(slot) && int64(slot) <= r.End {
					owner = n.ID
				}
			}
		}
	}
	for id := range m.masters {
		if id != owner {
			other = id
			break
		}
	}
	if owner == "" || other == "" {
		t.Fatalf("slot %d: owner %q, no other master", slot, owner)
	}
	return m, owner, other
}

// start marks the slot migrating from src to dst and moves keys, a read
// of any of which gets ASK from src from then on.
func (m *acSlotMover) start(ctx context.Context, src, dst string, keys ...string) error {
	if err := m.masters[dst].Do(ctx, "cluster", "setslot", m.slot, "importing", src).Err(); err != nil {
		return err
	}
	if err := m.masters[src].Do(ctx, "cluster", "setslot", m.slot, "migrating", dst).Err(); err != nil {
		return err
	}
	return m.migrate(ctx, src, dst, keys)
}

func (m *acSlotMover) migrate(ctx context.Context, src, dst string, keys []string) error {
	host, port, err := net.SplitHostPort(m.addr[dst])
	if err != nil {
		return err
	}
	args := []any{"migrate", host, port, "", 0, 5000, "keys"}
	for _, k := range keys {
		args = append(args, k)
	}
	return m.masters[src].Do(ctx, args...).Err()
}

// errorstat is how many error replies of kind (ASK, MOVED) node id sent.
func (m *acSlotMover) errorstat(ctx context.Context, id, kind string) int64 {
	info, err := m.masters[id].Info(ctx, "errorstats").Result()
	if err != nil {
		return -1
	}
	v := testredis.InfoFields(info)["errorstat_"+kind]
	n, _ := strconv.ParseInt(strings.TrimPrefix(strings.SplitN(v, ",", 2)[0], "count="), 10, 64)
	return n
}

// move moves every key of the slot from src to dst.
func (m *acSlotMover) move(ctx context.Context, src, dst string) error {
	for {
		keys, err := m.masters[src].ClusterGetKeysInSlot(ctx, m.slot, 100).Result()
		if err != nil || len(keys) == 0 {
			return err
		}
		if err := m.migrate(ctx, src, dst, keys); err != nil {
			return err
		}
	}
}

// finish moves the rest of the slot's keys and gives it to dst on every
// master.
func (m *acSlotMover) finish(ctx context.Context, src, dst string) error {
	if err := m.move(ctx, src, dst); err != nil {
		return err
	}
	for _, id := range []string{dst, src} {
		if err := m.masters[id].Do(ctx, "cluster", "setslot", m.slot, "node", dst).Err(); err != nil {
			return err
		}
	}
	for id, c := range m.masters {
		if id != src && id != dst {
			if err := c.Do(ctx, "cluster", "setslot", m.slot, "node", dst).Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestFaultAdvCartAllocClusterMigrate prices carts across slots while
// the slot of one of their promotions moves to another master and back:
// half its keys moved (ASK for the rest of the move), then all (MOVED
// for a client whose slot map is stale). Every cart, from several
// goroutines, with and without gifts, must be answered right (and a
// line on nothing stored, read again by the recheck script on its key): go-redis
// retries the redirected commands of a cart's pipeline, the very
// command values the cart's scratch holds.
func TestFaultAdvCartAllocClusterMigrate(t *testing.T) {
	t.Parallel()
	if len(testredis.ClusterAddrs()) == 0 {
		t.Skipf("%s not set", testredis.EnvCluster)
	}
	ctx := testCtx(t)
	b := testredis.Cluster(t)
	cc := b.Client.(*redis.ClusterClient)
	c := newCache(t, b, Options{})
	rng := rand.New(rand.NewSource(5))
	ps := make([]gradient.Promotion, 10)
	for i := range ps {
		ps[i] = randPromotion(rng, "acm-"+strconv.Itoa(i)+"-"+b.Prefix[len(b.Prefix)-6:], gradient.Metric(1+i%2), 1+rng.Intn(30))
	}
	if _, err := c.Refresh(ctx, ps...); err != nil {
		t.Fatal(err)
	}
	ms := matchers(t, ps...)
	w := &afWorld{}
	for id, vs := range faultVals(ms) {
		for _, s := range vs {
			w.lines = append(w.lines, afLine{ms[id], s})
		}
	}
	slot, err := cc.ClusterKeySlot(ctx, c.tiersKey(ps[0].ID)).Result()
	if err != nil {
		t.Fatal(err)
	}
	m, owner, other := newACSlotMover(t, ctx, cc, int(slot))
	t.Cleanup(func() {
		// Back where it was, whatever step failed.
		cctx := context.Background()
		_ = m.masters[other].Do(cctx, "cluster", "setslot", m.slot, "migrating", owner).Err()
		_ = m.masters[owner].Do(cctx, "cluster", "setslot", m.slot, "importing", other).Err()
		if err := m.finish(cctx, other, owner); err != nil {
			t.Errorf("slot %d not moved back: %v", m.slot, err)
		}
	})
	prices := func(c *Cache, step string) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan string, 4)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewSource(int64(g) + int64(len(step))))
				for k := range 4 {
					opt := matchOpts[(g+k)%len(matchOpts)]
					qs, ls := w.cart(rng, 1+rng.Intn(150))
					qs = append(qs, queryFor(&ps[0], ls[0].s)) // a line on the moving slot
					ls = append(ls, afLine{ms[ps[0].ID], ls[0].s})
					// And a line on nothing stored: its recheck runs a script.
					qs = append(qs, QuantityQuery("acm-absent-"+strconv.Itoa(g), 5))
					rs, err := c.MatchCart(ctx, qs, opt)
					if err != nil {
						errs <- fmt.Sprintf("%s: %v", step, err)
						return
					}
					if last := rs[len(rs)-1]; !errors.Is(last.Err, ErrNotFound) {
						errs <- fmt.Sprintf("%s: absent line %+v", step, last)
						return
					}
					if d := afCheck(ls, rs[:len(ls)], opt); d != "" {
						errs <- fmt.Sprintf("%s %+v: %s", step, opt, d)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
	tiers := c.tiersKey(ps[0].ID)
	for _, step := range []struct {
		name     string
		do       func() error
		from     string // the node whose redirects the step must see, with kind
		redirect string
	}{
		{"before", func() error { return nil }, "", ""},
		{"tiers key moved (ASK)", func() error { return m.start(ctx, owner, other, tiers) }, owner, "ASK"},
		{"all moved, slot given (MOVED)", func() error { return m.finish(ctx, owner, other) }, owner, "MOVED"},
		{"tiers key moved back (ASK)", func() error { return m.start(ctx, other, owner, tiers) }, other, "ASK"},
		{"all moved back (MOVED)", func() error { return m.finish(ctx, other, owner) }, other, "MOVED"},
	} {
		// Each step prices on a client of its own whose slot map is read
		// before the step moves anything, so it is stale when the step
		// ends. The shared client's map may have been reloaded meanwhile:
		// go-redis reloads it in the background after a redirect (a
		// single command's ASK too), a reload that can end after the
		// move, and every 10 s. Its first command is a PING, which no node
		// redirects: any command reads the map, and that one starts no
		// reload.
		sc := tierset.NewClusterClient(testredis.ClusterAddrs()...)
		t.Cleanup(func() { _ = sc.Close() })
		if err := sc.Ping(ctx).Err(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		var before int64
		if step.from != "" {
			before = m.errorstat(ctx, step.from, step.redirect)
		}
		prices(newCacheOn(t, sc, b.Prefix), step.name)
		if step.from != "" {
			if after := m.errorstat(ctx, step.from, step.redirect); after <= before {
				t.Errorf("%s: no %s redirect seen (%d, then %d): nothing was tested", step.name, step.redirect, before, after)
			}
		}
	}
}
