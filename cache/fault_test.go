package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// faultEnv is a private redis-server, a fault proxy in front of it, and
// two caches on one prefix: direct (to set up and check) and cut (through
// the proxy, the one the faults hit). Clients keep go-redis's default
// retries, the setting the fault model is about.
type faultEnv struct {
	srv         *testredis.Server
	proxy       *faultproxy.Proxy
	direct, cut *Cache
	rdb         *redis.Client // direct client, for harm and INFO
}

func newFaultEnv(t *testing.T, args ...string) *faultEnv {
	t.Helper()
	f := testredis.StartFaulty(t, args...)
	rdb := f.Server.Client(&redis.Options{ContextTimeoutEnabled: true})
	prefix := testredis.Prefix(t)
	direct, err := New(rdb, Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	cut, err := New(f.Cut, Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return &faultEnv{srv: f.Server, proxy: f.Proxy, direct: direct, cut: cut, rdb: rdb}
}

// nth matches the n-th request (from now on) that contains s.
func nth(n int, s string) faultproxy.Match {
	m, k := faultproxy.Contains(s), 0
	return func(req []byte) bool {
		if m(req) {
			k++
			return k == n
		}
		return false
	}
}

// faultPromos builds n random promotions f000, f001, ... with gifts on
// some tiers.
func faultPromos(seed int64, n, tiers int) []gradient.Promotion {
	rng := rand.New(rand.NewSource(seed))
	ps := make([]gradient.Promotion, n)
	for i := range ps {
		ps[i] = randPromotion(rng, fmt.Sprintf("f%03d", i), gradient.Metric(1+i%2), 1+rng.Intn(tiers))
	}
	return ps
}

// faultVals are the scores every fault test reads: below, at and around
// thresholds, and far above.
func faultVals(ms map[string]*gradient.Matcher) map[string][]int64 {
	rng := rand.New(rand.NewSource(1))
	out := make(map[string][]int64, len(ms))
	for id, m := range ms {
		out[id] = boundaryValues(m, rng, 3)
	}
	return out
}

// readEvery reads every promotion at its scores with every MatchOptions,
// one cart per promotion and option, and tallies the verdicts; calls that
// fail as a whole are counted in callErrs.
func readEvery(ctx context.Context, c *Cache, ms map[string]*gradient.Matcher, vals map[string][]int64) (tl *tally, callErrs int) {
	tl = newTally()
	for id, m := range ms {
		qs := make([]Query, len(vals[id]))
		for i, v := range vals[id] {
			qs[i] = queryFor(m.Promotion(), v)
		}
		for _, opt := range matchOpts {
			rs, err := c.MatchCart(ctx, qs, opt)
			if err != nil {
				callErrs++
				continue
			}
			for i, r := range rs {
				tl.add(verdict(m, vals[id][i], r, opt))
			}
		}
	}
	return tl, callErrs
}

// storedState says how p is stored: "whole" (its version, nothing
// missing), "absent" (ErrNotFound), or what else Info says.
func storedState(ctx context.Context, c *Cache, p *gradient.Promotion) string {
	want, err := Version(p, Options{})
	if err != nil {
		return err.Error()
	}
	in, err := c.Info(ctx, p.ID)
	switch {
	case errors.Is(err, ErrNotFound):
		return "absent"
	case err != nil:
		return err.Error()
	case in.Version != want:
		return "version " + in.Version
	}
	return "whole"
}

// checkRefreshError checks a failed Refresh of ps (nothing stored before
// it) against Redis: every promotion is in exactly one list, in input
// order, Committed ones are stored whole and NotCommitted ones absent.
func checkRefreshError(t *testing.T, ctx context.Context, c *Cache, ps []gradient.Promotion, rep RefreshReport, err error) *RefreshError {
	t.Helper()
	var re *RefreshError
	if !errors.As(err, &re) {
		t.Fatalf("refresh error %v is not a *RefreshError", err)
	}
	var all []string
	for _, l := range [][]string{re.Committed, re.Unknown, re.NotCommitted} {
		all = append(all, l...)
	}
	ids := make([]string, len(ps))
	for i := range ps {
		ids[i] = ps[i].ID
	}
	if !slices.Equal(all, ids) || len(re.Unknown) > 1 {
		t.Fatalf("lists do not partition the call in order: committed %v unknown %v not committed %v", re.Committed, re.Unknown, re.NotCommitted)
	}
	if len(rep.Promotions) != len(re.Committed) {
		t.Fatalf("report lists %d promotions, error %d committed", len(rep.Promotions), len(re.Committed))
	}
	for i := range ps {
		state := storedState(ctx, c, &ps[i])
		switch {
		case slices.Contains(re.Committed, ps[i].ID) && state != "whole",
			slices.Contains(re.NotCommitted, ps[i].ID) && state != "absent":
			t.Fatalf("%s: reported committed=%v, Redis says %s", ps[i].ID, slices.Contains(re.Committed, ps[i].ID), state)
		}
	}
	return re
}

// TestFaultRefreshCutReply cuts one reply in the middle of a 40-promotion
// first warm: the EXEC of the 18th promotion (it commits, its reply is
// lost), its probe (the reads after WATCH), its WATCH. Whatever go-redis
// makes of it, the call either succeeds with all 40 stored, or returns a
// *RefreshError whose lists match what Redis holds, promotion by
// promotion. A second Refresh then stores everything, and every read
// equals the oracle.
func TestFaultRefreshCutReply(t *testing.T) {
	t.Parallel()
	for _, row := range []struct {
		name  string
		match faultproxy.Match
		// committed is the exact Committed list length when the call fails
		// (-1: not fixed).
		committed int
	}{
		{"exec of the 18th", nth(18, "\r\nexec\r\n"), 18},
		{"probe of the 18th", nth(18, "\r\nzcard\r\n"), -1},
		{"watch of the 18th", nth(18, "\r\nwatch\r\n"), -1},
	} {
		t.Run(row.name, func(t *testing.T) {
			ctx := testCtx(t)
			env := newFaultEnv(t)
			ps := faultPromos(7, 40, 12)
			env.proxy.CutNext(1, row.match)
			rep, err := env.cut.Refresh(ctx, ps...)
			if env.proxy.Cuts() != 1 {
				t.Fatalf("%d replies cut, want 1", env.proxy.Cuts())
			}
			if err == nil {
				for i := range ps {
					if s := storedState(ctx, env.direct, &ps[i]); s != "whole" {
						t.Fatalf("refresh succeeded but %s is %s", ps[i].ID, s)
					}
				}
				t.Logf("cut reply: go-redis recovered, all %d stored", len(ps))
			} else {
				re := checkRefreshError(t, ctx, env.direct, ps, rep, err)
				if row.committed >= 0 && len(re.Committed) != row.committed {
					t.Fatalf("committed %d, want %d: %v", len(re.Committed), row.committed, err)
				}
				t.Logf("cut reply: %v", err)
			}
			rep, err = env.cut.Refresh(ctx, ps...)
			if err != nil || rep.Added+rep.Unchanged != len(ps) {
				t.Fatalf("second refresh: %+v %v", rep, err)
			}
			ms := matchers(t, ps...)
			got, callErrs := readEvery(ctx, env.cut, ms, faultVals(ms))
			if got.n[vWrong] != 0 || got.n[vOK] == 0 || got.n[vDamaged]+got.n[vNotFound]+callErrs != 0 {
				t.Fatalf("after the second refresh: %v, %d call errors", got, callErrs)
			}
		})
	}
}

// TestFaultReadCutReply cuts one reply of each read and of Delete: a cart
// (plain, with gifts, with Next), a line that needs the recheck (a
// promotion that does not exist), Info and Delete. Each call returns the
// oracle's answer (go-redis re-sends the read) or a typed error, never a
// wrong answer; Delete leaves the promotion deleted or whole.
func TestFaultReadCutReply(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	env := newFaultEnv(t)
	ps := faultPromos(9, 10, 20)
	if _, err := env.direct.Refresh(ctx, ps...); err != nil {
		t.Fatal(err)
	}
	ms := matchers(t, ps...)
	vals := faultVals(ms)
	wrong, typed := 0, 0
	for _, row := range []struct {
		name  string
		match string
		opt   MatchOptions
	}{
		{"cart", "zrange", MatchOptions{}},
		{"cart with next", "zrange", MatchOptions{Next: true}},
		{"cart with gifts: tiers", "zrange", MatchOptions{Gifts: true}},
		{"cart with gifts: gifts", "hmget", MatchOptions{Gifts: true}},
	} {
		for id, m := range ms {
			qs := make([]Query, len(vals[id]))
			for i, v := range vals[id] {
				qs[i] = queryFor(m.Promotion(), v)
			}
			before := env.proxy.Cuts()
			env.proxy.CutNext(1, faultproxy.Contains(row.match))
			rs, err := env.cut.MatchCart(ctx, qs, row.opt)
			env.proxy.CutNext(0, nil) // no gift hit: nothing was cut
			if row.match != "hmget" && env.proxy.Cuts() == before {
				t.Errorf("%s: no reply was cut", row.name)
			}
			if err != nil {
				typed++
				continue
			}
			for i, r := range rs {
				if k, d := verdict(m, vals[id][i], r, row.opt); k != vOK {
					wrong++
					t.Errorf("%s: %s %s", row.name, k, d)
				}
			}
		}
	}
	// The recheck of a line that found nothing.
	env.proxy.CutNext(1, faultproxy.Contains("eval"))
	r, err := env.cut.Match(ctx, QuantityQuery("nosuch", 3), MatchOptions{})
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil && r.Tier == nil && !errors.Is(err, ErrDamaged):
		typed++
	default:
		wrong++
		t.Errorf("recheck under a cut: %+v %v", r, err)
	}
	// Info.
	env.proxy.CutNext(1, faultproxy.Contains("hgetall"))
	in, err := env.cut.Info(ctx, ps[0].ID)
	want, _ := Version(&ps[0], Options{})
	switch {
	case err == nil && in.Version == want && in.Damage == "":
	case err != nil && !errors.Is(err, ErrDamaged) && !errors.Is(err, ErrNotFound):
		typed++
	default:
		wrong++
		t.Errorf("Info under a cut: %+v %v", in, err)
	}
	// Delete: its EXEC commits, its reply is lost.
	env.proxy.CutNext(1, faultproxy.Contains("\r\nexec\r\n"))
	_, err = env.cut.Delete(ctx, ps[1].ID, 0)
	if err != nil {
		typed++
	}
	switch s := storedState(ctx, env.direct, &ps[1]); {
	case s == "absent":
	case s == "whole" && err != nil:
	default:
		wrong++
		t.Errorf("Delete under a cut: %s (err %v)", s, err)
	}
	if ok, err := env.cut.Delete(ctx, ps[1].ID, 0); err != nil || storedState(ctx, env.direct, &ps[1]) != "absent" {
		t.Fatalf("second Delete: %v %v", ok, err)
	}
	total := env.proxy.Cuts()
	t.Logf("%d replies cut over %d promotions: %d wrong answers, %d typed call errors", total, len(ps), wrong, typed)
	if wrong != 0 {
		t.Fatalf("%d wrong answers", wrong)
	}
	// Every cart row but the gifts one cuts a reply (checked above); the
	// gifts row only where a line hit a tier, which the random values
	// decide.
	if total < int64(3*len(ps)) {
		t.Fatalf("only %d replies were cut", total)
	}
}
