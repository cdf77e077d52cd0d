package cache

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/soak"
)

// infoInt reads one integer field of INFO.
func infoInt(t *testing.T, ctx context.Context, rdb *redis.Client, section, field string) int64 {
	t.Helper()
	s, err := rdb.Info(ctx, section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO %s: %q", field, l)
			}
			return n
		}
	}
	t.Fatalf("INFO %s: no field %s", section, field)
	return 0
}

func configSet(t *testing.T, ctx context.Context, rdb *redis.Client, kv ...string) {
	t.Helper()
	for i := 0; i+1 < len(kv); i += 2 {
		if err := rdb.ConfigSet(ctx, kv[i], kv[i+1]).Err(); err != nil {
			t.Fatalf("CONFIG SET %s %s: %v", kv[i], kv[i+1], err)
		}
	}
}

// rewarm refreshes ps and checks that every promotion then reads like the
// oracle, Info finds each whole and a second refresh is all Unchanged.
func rewarm(t *testing.T, ctx context.Context, c *Cache, ps []gradient.Promotion) RefreshReport {
	t.Helper()
	rep, err := c.Refresh(ctx, ps...)
	if err != nil {
		t.Fatalf("re-warm: %v", err)
	}
	ms := matchers(t, ps...)
	got, callErrs := readEvery(ctx, c, ms, faultVals(ms))
	if got.n[vWrong]+got.n[vDamaged]+got.n[vNotFound]+callErrs != 0 {
		t.Fatalf("after re-warm: %v, %d call errors", got, callErrs)
	}
	for i := range ps {
		if s := storedState(ctx, c, &ps[i]); s != "whole" {
			t.Fatalf("after re-warm %s is %s", ps[i].ID, s)
		}
	}
	if again, err := c.Refresh(ctx, ps...); err != nil || again.Unchanged != len(ps) {
		t.Fatalf("refresh after re-warm: %d unchanged of %d, %v", again.Unchanged, len(ps), err)
	}
	return rep
}

// TestFaultEvictionHealed fills a private server, then lowers maxmemory
// under allkeys-lru so that Redis evicts keys of the stored promotions.
// Every read is then the oracle's answer, ErrDamaged or ErrNotFound
// (never a wrong one), damage is seen by reads and Info, and one
// re-warm (Refresh of all, with the memory limit lifted) repairs every
// promotion: all reads equal the oracle.
func TestFaultEvictionHealed(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	env := newFaultEnv(t)
	base := infoInt(t, ctx, env.rdb, "memory", "used_memory")
	ps := faultPromos(21, 200, 30)
	if _, err := env.direct.Refresh(ctx, ps...); err != nil {
		t.Fatal(err)
	}
	used := infoInt(t, ctx, env.rdb, "memory", "used_memory")
	limit := base + (used-base)*6/10
	configSet(t, ctx, env.rdb, "maxmemory-policy", "allkeys-lru", "maxmemory", strconv.FormatInt(limit, 10))
	ms := matchers(t, ps...)
	got, callErrs := readEvery(ctx, env.direct, ms, faultVals(ms))
	evicted := infoInt(t, ctx, env.rdb, "stats", "evicted_keys")
	infoDamaged, infoAbsent := 0, 0
	for i := range ps {
		switch s := storedState(ctx, env.direct, &ps[i]); {
		case s == "absent":
			infoAbsent++
		case s != "whole":
			infoDamaged++
		}
	}
	t.Logf("%d promotions in %d bytes, maxmemory %d: %d keys evicted; reads %v, %d call errors; Info: %d damaged, %d absent",
		len(ps), used-base, limit, evicted, got, callErrs, infoDamaged, infoAbsent)
	if evicted == 0 || got.n[vWrong] != 0 || got.n[vDamaged] == 0 || infoDamaged == 0 {
		t.Fatal("eviction was not detected as damage, or a read was wrong")
	}
	configSet(t, ctx, env.rdb, "maxmemory", "0")
	rep := rewarm(t, ctx, env.direct, ps)
	t.Logf("re-warm: %d added, %d repaired, %d unchanged", rep.Added, rep.Repaired, rep.Unchanged)
	if rep.Repaired == 0 {
		t.Fatal("re-warm repaired nothing")
	}
}

// TestFaultNoEviction warms a private server with maxmemory a little
// above what is used and noeviction: refreshes start failing with OOM.
// Every failure is a *RefreshError whose lists match Redis; no promotion
// is half-written (each is whole or absent); every read is the oracle's
// answer or ErrNotFound. With the limit lifted, one re-warm stores all.
func TestFaultNoEviction(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	env := newFaultEnv(t)
	used := infoInt(t, ctx, env.rdb, "memory", "used_memory")
	configSet(t, ctx, env.rdb, "maxmemory-policy", "noeviction", "maxmemory", strconv.FormatInt(used+1<<20, 10))
	ps := faultPromos(22, 400, 30)
	failed, oom := 0, 0
	for i := 0; i < len(ps); i += 20 {
		chunk := ps[i : i+20]
		rep, err := env.direct.Refresh(ctx, chunk...)
		if err == nil {
			continue
		}
		failed++
		if strings.Contains(err.Error(), "OOM") {
			oom++
		}
		checkRefreshError(t, ctx, env.direct, chunk, rep, err)
	}
	halves := 0
	for i := range ps {
		if s := storedState(ctx, env.direct, &ps[i]); s != "whole" && s != "absent" {
			halves++
			t.Errorf("%s: %s", ps[i].ID, s)
		}
	}
	ms := matchers(t, ps...)
	got, callErrs := readEvery(ctx, env.direct, ms, faultVals(ms))
	t.Logf("maxmemory %d: %d of %d refresh calls failed (%d with OOM); %d half-written; reads %v, %d call errors",
		used+1<<20, failed, len(ps)/20, oom, halves, got, callErrs)
	if failed == 0 || oom == 0 || halves != 0 || got.n[vWrong]+got.n[vDamaged] != 0 {
		t.Fatal("no OOM, or a promotion half-written, or a wrong or damaged read")
	}
	configSet(t, ctx, env.rdb, "maxmemory", "0")
	rewarm(t, ctx, env.direct, ps)
}

// TestFaultClientKillStorm warms 100 promotions (30 without the soak
// switch: the storm's time grows with the machine's load, the assertions
// do not change) in chunks of 10 while
// another client runs CLIENT KILL TYPE normal every 3 ms and a reader
// reads the promotions already stored. A failed chunk is retried until it
// succeeds. Every promotion a *RefreshError called committed is stored
// whole; every read during the storm is the oracle's answer, ErrNotFound
// or a failed call, never a wrong one; afterwards all equal the oracle.
func TestFaultClientKillStorm(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	env := newFaultEnv(t)
	killer := env.srv.Client(&redis.Options{ContextTimeoutEnabled: true})
	ps := faultPromos(23, soak.Pick(100, 30), 12)
	ms := matchers(t, ps...)
	vals := faultVals(ms)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var kills int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(3 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				n, _ := killer.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Result()
				kills += n
			}
		}
	}()
	readTally := newTally()
	var readCallErrs int
	readers := untilStopped(1, stop, func(int, int) bool {
		got, ce := readEvery(ctx, env.cut, ms, vals)
		readCallErrs += ce
		for k, n := range got.n {
			readTally.n[k] += n
		}
		if readTally.first == "" {
			readTally.first = got.first
		}
		return true
	})

	// committed: every promotion a failed call reported committed, checked
	// below. A round may pass between two kills (a quick machine, or a
	// race-built one whose calls rarely meet a kill): rounds of the same
	// promotions repeat until a refresh met the storm, 50 at most.
	committed := map[string]bool{}
	refreshErrs, attempts := 0, 0
	for round := 0; round == 0 || refreshErrs == 0 && round < 50; round++ {
		done := map[string]bool{}
		for i := 0; i < len(ps); i += 10 {
			chunk := slices.Clone(ps[i : i+10])
			for {
				// Only what is not known committed goes again, so every attempt
				// that commits one promotion before its connection is killed
				// is progress, however slow the machine.
				chunk = slices.DeleteFunc(chunk, func(p gradient.Promotion) bool { return done[p.ID] })
				if len(chunk) == 0 {
					break
				}
				attempts++
				if attempts > 2000 {
					close(stop)
					wg.Wait()
					readers.Wait()
					t.Fatal("2000 refresh attempts did not get through the storm")
				}
				_, err := env.direct.Refresh(ctx, chunk...)
				if err == nil {
					break
				}
				refreshErrs++
				var re *RefreshError
				if !errors.As(err, &re) {
					close(stop)
					wg.Wait()
					readers.Wait()
					t.Fatalf("refresh error %v is not a *RefreshError", err)
				}
				for _, id := range re.Committed {
					committed[id], done[id] = true, true
				}
			}
		}
	}
	close(stop)
	wg.Wait()
	readers.Wait()
	for i := range ps {
		if committed[ps[i].ID] {
			if s := storedState(ctx, env.direct, &ps[i]); s != "whole" {
				t.Fatalf("%s reported committed, Redis says %s", ps[i].ID, s)
			}
		}
	}
	t.Logf("%d clients killed; %d refresh attempts, %d failed, %d promotions reported committed by failed calls; reads during the storm %v, %d failed calls",
		kills, attempts, refreshErrs, len(committed), readTally, readCallErrs)
	if readTally.n[vWrong] != 0 || readTally.n[vDamaged] != 0 {
		t.Fatalf("wrong or damaged reads during the storm: %v", readTally)
	}
	if kills == 0 || refreshErrs == 0 {
		t.Fatal("the storm hit nothing")
	}
	rewarm(t, ctx, env.direct, ps)
}
