package cache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// readAll reads every promotion of ms at every score of vals, in one
// cart per promotion and MatchOptions, and tallies the verdicts. A call
// that fails as a whole (transport) is returned, not tallied.
func readAll(ctx context.Context, c *Cache, ms map[string]*gradient.Matcher, vals []int64) (*tally, error) {
	t := newTally()
	for id, m := range ms {
		p := m.Promotion()
		qs := make([]Query, len(vals))
		for i, v := range vals {
			qs[i] = queryFor(p, v)
			qs[i].Promotion = id
		}
		for _, opt := range matchOpts {
			rs, err := c.MatchCart(ctx, qs, opt)
			if err != nil {
				return t, err
			}
			for i, r := range rs {
				t.add(verdict(m, vals[i], r, opt))
			}
		}
	}
	return t, nil
}

func matchers(t testing.TB, ps ...gradient.Promotion) map[string]*gradient.Matcher {
	t.Helper()
	out := make(map[string]*gradient.Matcher, len(ps))
	for _, p := range ps {
		m, err := gradient.NewMatcher(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p.ID] = m
	}
	return out
}

// TestDamageHealed deletes each key of a promotion in turn (and the
// parts inside them that a hand or a tool can remove). Every read then
// answers like the oracle or says ErrDamaged / ErrNotFound, never a
// wrong tier; reads that need the missing part say ErrDamaged; Info
// reports the damage; one Refresh with the same content rewrites it
// (Repaired, or Added when the meta hash went), after which every read
// equals the oracle, Info is clean and the next Refresh is Unchanged.
func TestDamageHealed(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		checkDamageHealed(t, b, newCache(t, b, Options{}))
	})
}

// TestNearDamageHealed is TestDamageHealed with the near cache on: a
// ladder read for the first time from a damaged promotion says what the
// Redis path says (ErrDamaged where that needs the missing part), never
// ErrNotFound for a promotion whose meta hash is there.
func TestNearDamageHealed(t *testing.T) {
	t.Parallel()
	testredis.EachReal(t, func(t *testing.T, b *testredis.Backend) {
		checkDamageHealed(t, b, newNearCache(t, nearClient(t, b), b.Prefix, Options{}))
	})
}

// damageRow harms one promotion's keys. readDamaged: some read must see
// ErrDamaged. infoErr: what Info says (nil for clean). heal: the outcome
// of the healing Refresh.
type damageRow struct {
	name        string
	harm        func(ctx context.Context, rc redis.UniversalClient, c *Cache, id, version string) error
	readDamaged bool
	infoErr     error
	heal        RefreshOutcome
}

func damageRows() []damageRow {
	const ceiling = "9007199254740992"
	return []damageRow{
		{"tiers key", func(ctx context.Context, rc redis.UniversalClient, c *Cache, id, v string) error {
			return rc.Del(ctx, c.tiersKey(id)).Err()
		}, true, ErrDamaged, Repaired},
		{"meta key", func(ctx context.Context, rc redis.UniversalClient, c *Cache, id, v string) error {
			return rc.Del(ctx, c.metaKey(id)).Err()
		}, false, ErrDamaged, Added},
		{"current gifts key", func(ctx context.Context, rc redis.UniversalClient, c *Cache, id, v string) error {
			return rc.Del(ctx, c.giftsKey(id, v)).Err()
		}, true, ErrDamaged, Repaired},
		{"every key", func(ctx context.Context, rc redis.UniversalClient, c *Cache, id, v string) error {
			return rc.Del(ctx, c.tiersKey(id), c.metaKey(id), c.giftsKey(id, v)).Err()
		}, false, ErrNotFound, Added},
		{"floor sentinel", func(ctx context.Context, rc redis.UniversalClient, c *Cache, id, v string) error {
			return rc.ZRemRangeByScore(ctx, c.tiersKey(id), "-1", "-1").Err()
		}, true, ErrDamaged, Repaired},
		{"ceiling sentinel", func(ctx context.Context, rc redis.UniversalClient, c *Cache, id, v string) error {
			return rc.ZRemRangeByScore(ctx, c.tiersKey(id), ceiling, ceiling).Err()
		}, true, ErrDamaged, Repaired},
		{"one gift list", func(ctx context.Context, rc redis.UniversalClient, c *Cache, id, v string) error {
			return rc.HDel(ctx, c.giftsKey(id, v), "tier1").Err()
		}, true, ErrDamaged, Repaired},
		{"one meta field", func(ctx context.Context, rc redis.UniversalClient, c *Cache, id, v string) error {
			return rc.HDel(ctx, c.metaKey(id), metaUpdated).Err()
		}, false, ErrCorrupt, Repaired},
	}
}

func checkDamageHealed(t *testing.T, b *testredis.Backend, c *Cache) {
	t.Helper()
	ctx := testCtx(t)
	rows := damageRows()
	vals := []int64{0, 1, 2, 3, 4, 5, 6, 9, 10, 11, 50}
	for i, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			p := simplePromotion("dmg"+strconv.Itoa(i), 3, 5, 10)
			ms := matchers(t, p)
			rep, err := c.Refresh(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if err := row.harm(ctx, b.Client, c, p.ID, rep.Promotions[0].Version); err != nil {
				t.Fatal(err)
			}
			got, err := readAll(ctx, c, ms, vals)
			if err != nil {
				t.Fatal(err)
			}
			if got.n[vWrong] != 0 || (row.readDamaged && got.n[vDamaged] == 0) || (!row.readDamaged && got.n[vDamaged] != 0) {
				t.Fatalf("damaged reads: %v (want some damaged: %v)", got, row.readDamaged)
			}
			in, err := c.Info(ctx, p.ID)
			if !errors.Is(err, row.infoErr) || (errors.Is(err, ErrDamaged) && in.Damage == "") {
				t.Fatalf("Info: %+v %v, want %v", in, err, row.infoErr)
			}
			t.Logf("reads %v; info: %v", got, err)
			rep, err = c.Refresh(ctx, p)
			if err != nil || rep.Promotions[0].Outcome != row.heal || (row.heal == Repaired && (rep.Repaired != 1 || rep.Promotions[0].Damage == "")) {
				t.Fatalf("healing refresh: %+v %v, want %v", rep, err, row.heal)
			}
			got, err = readAll(ctx, c, ms, vals)
			if err != nil || got.n[vOK] != len(vals)*len(matchOpts) {
				t.Fatalf("after heal: %v %v", got, err)
			}
			if in, err := c.Info(ctx, p.ID); err != nil || in.Damage != "" {
				t.Fatalf("Info after heal: %+v %v", in, err)
			}
			if rep, err := c.Refresh(ctx, p); err != nil || rep.Unchanged != 1 {
				t.Fatalf("refresh after heal: %+v %v", rep, err)
			}
		})
	}
}

// TestMemberOfAnotherPromotion plants a genuine member of promotion A in
// promotion B's tiers key, where a query of B reaches it: the read is
// ErrCorrupt (never A's tier served as B's), counted by the Observer.
func TestMemberOfAnotherPromotion(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		obs := &countingObserver{}
		c := newCache(t, b, Options{Observer: obs})
		a, bb := simplePromotion("own-a", 15), simplePromotion("own-b", 3, 5)
		if _, err := c.Refresh(ctx, a, bb); err != nil {
			t.Fatal(err)
		}
		zs, err := b.Client.ZRangeByScoreWithScores(ctx, c.tiersKey(a.ID), &redis.ZRangeBy{Min: "15", Max: "15"}).Result()
		if err != nil || len(zs) != 1 {
			t.Fatalf("A's member: %v %v", zs, err)
		}
		if err := b.Client.ZAdd(ctx, c.tiersKey(bb.ID), zs[0]).Err(); err != nil {
			t.Fatal(err)
		}
		for _, opt := range matchOpts {
			for _, v := range []int64{15, 20} {
				r, err := c.Match(ctx, QuantityQuery(bb.ID, v), opt)
				if !errors.Is(err, ErrCorrupt) || r.Tier != nil {
					t.Fatalf("Match(B, %d, %+v) = %+v, %v; want ErrCorrupt", v, opt, r, err)
				}
			}
			// Below it, the hit is B's own; with Next, the next tier read
			// is the planted member.
			r, err := c.Match(ctx, QuantityQuery(bb.ID, 6), opt)
			if opt.Next && !errors.Is(err, ErrCorrupt) || !opt.Next && (err != nil || r.Tier.ID != "tier1") {
				t.Fatalf("Match(B, 6, %+v) below the planted member: %+v %v", opt, r, err)
			}
		}
		if obs.decodeErrors.Load() == 0 {
			t.Fatal("no decode error reported to the Observer")
		}
		// The planted member makes the tiers key one too long: a refresh
		// rewrites it.
		if rep, err := c.Refresh(ctx, bb); err != nil || rep.Repaired != 1 {
			t.Fatalf("refresh of B: %+v %v", rep, err)
		}
		if r, err := c.Match(ctx, QuantityQuery(bb.ID, 20), MatchOptions{}); err != nil || r.Tier.ID != "tier1" {
			t.Fatalf("Match(B, 20) after refresh: %+v %v", r, err)
		}
	})
}

// TestMemberOwnerBytes: the owner tag adds exactly 5 bytes to every
// member (a msgpack uint32 at the end; the array header stays one byte),
// and a member in the layout before it decodes to the same record,
// marked as having no owner.
func TestMemberOwnerBytes(t *testing.T) {
	t.Parallel()
	p := simplePromotion("bytes-promo", 3, 5, 10)
	e, err := encodePromotion(&p, defaultMaxRecordBytes)
	if err != nil {
		t.Fatal(err)
	}
	tag := ownerTag(p.ID)
	for _, raw := range e.members {
		n := len(raw)
		tail := raw[n-5:]
		if raw[0] != 0x90|memberFields || tail[0] != 0xce ||
			uint32(tail[1])<<24|uint32(tail[2])<<16|uint32(tail[3])<<8|uint32(tail[4]) != tag {
			t.Fatalf("member % x does not end in the owner tag %08x", raw, tag)
		}
		m, err := decodeMember(raw, defaultMaxRecordBytes)
		if err != nil || !m.hasOwner || m.owner != tag {
			t.Fatalf("member: %+v %v", m, err)
		}
		legacy, err := decodeMember(string([]byte{0x90 | legacyFields})+raw[1:n-5], defaultMaxRecordBytes)
		if m.hasOwner, m.owner = false, 0; err != nil || !reflect.DeepEqual(legacy, m) {
			t.Fatalf("legacy member: %+v %v, want %+v", legacy, err, m)
		}
	}
}

// TestLegacyFormatRewritten: a promotion stored before members carried
// their owner (14-field members, a version hashed under the old format
// tag) is still served by upgraded readers, and the next Refresh with the
// same rules sees a different version and rewrites it in the new layout
// (Updated, not Unchanged); reads equal the oracle before and after.
func TestLegacyFormatRewritten(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		p := simplePromotion("legacy", 3, 5, 10)
		if _, err := c.Refresh(ctx, p); err != nil {
			t.Fatal(err)
		}
		zs, err := b.Client.ZRangeWithScores(ctx, c.tiersKey(p.ID), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		pipe := b.Client.TxPipeline()
		pipe.Del(ctx, c.tiersKey(p.ID))
		for _, z := range zs {
			raw := z.Member.(string)
			pipe.ZAdd(ctx, c.tiersKey(p.ID), redis.Z{Score: z.Score, Member: string([]byte{0x90 | legacyFields}) + raw[1:len(raw)-5]})
		}
		pipe.HSet(ctx, c.metaKey(p.ID), metaVersion, "00000000000000v1")
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		vals := []int64{0, 3, 4, 5, 9, 10, 11}
		if got, err := readAll(ctx, c, matchers(t, p), vals); err != nil || got.n[vOK] != len(vals)*len(matchOpts) {
			t.Fatalf("legacy members: %v %v", got, err)
		}
		rep, err := c.Refresh(ctx, p)
		if err != nil || rep.Updated != 1 || rep.Promotions[0].Previous != "00000000000000v1" {
			t.Fatalf("upgrade refresh: %+v %v", rep, err)
		}
		got, err := readAll(ctx, c, matchers(t, p), vals)
		if err != nil || got.n[vOK] != len(vals)*len(matchOpts) {
			t.Fatalf("after upgrade: %v %v", got, err)
		}
		raws, err := b.Client.ZRange(ctx, c.tiersKey(p.ID), 0, -1).Result()
		for _, raw := range raws {
			if m, derr := decodeMember(raw, defaultMaxRecordBytes); derr != nil || !m.hasOwner {
				t.Fatalf("after upgrade a member has no owner: %+v %v %v", m, derr, err)
			}
		}
	})
}

// TestReadThroughRepairsDamage: with a Loader, every kind of damage a
// read can see is repaired by one Load (through Refresh), with and
// without the near cache, and every read answers like the oracle.
func TestReadThroughRepairsDamage(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		writer := newCache(t, b, Options{})
		vals := []int64{0, 1, 2, 3, 4, 5, 6, 9, 10, 11, 50}
		for _, near := range []bool{false, true} {
			for i, row := range damageRows() {
				if !row.readDamaged {
					continue
				}
				t.Run(fmt.Sprintf("near=%v/%s", near, row.name), func(t *testing.T) {
					p := simplePromotion(fmt.Sprintf("ld%v%d", near, i), 3, 5, 10)
					ld := &countingLoader{promos: map[string]gradient.Promotion{p.ID: p}}
					var c *Cache
					if near {
						c = newNearCache(t, nearClient(t, b), b.Prefix, Options{Loader: ld})
					} else {
						c = newCache(t, b, Options{Loader: ld})
					}
					rep, err := writer.Refresh(ctx, p)
					if err != nil {
						t.Fatal(err)
					}
					if err := row.harm(ctx, b.Client, writer, p.ID, rep.Promotions[0].Version); err != nil {
						t.Fatal(err)
					}
					got, err := readAll(ctx, c, matchers(t, p), vals)
					if err != nil || got.n[vOK] != len(vals)*len(matchOpts) {
						t.Fatalf("reads %v %v, want all ok", got, err)
					}
					if n := ld.calls.Load(); n != 1 {
						t.Fatalf("%d loads, want 1", n)
					}
					if in, err := writer.Info(ctx, p.ID); err != nil || in.Damage != "" {
						t.Fatalf("Info after the load: %+v %v", in, err)
					}
				})
			}
		}
	})
}
