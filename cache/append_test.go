package cache

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// junkResult fills the spare capacity of a reused dst: a Result with every
// field set, so any field an append leaves unwritten shows.
func junkResult() Result {
	return Result{
		Promotion: "junk",
		Tier:      &TierHit{ID: "junk-tier", Score: 99, HasGifts: true, Gifts: []gradient.Gift{{SKU: "junk"}}},
		Next:      &TierHit{ID: "junk-next", Score: 100},
		Shortfall: decimal.NewFromInt(99),
		Version:   "junk-version",
		Err:       errors.New("junk"),
	}
}

// dirty returns a slice of length n whose whole capacity (n+extra) holds
// junk results.
func dirty(n, extra int) []Result {
	buf := make([]Result, n+extra)
	for i := range buf {
		buf[i] = junkResult()
	}
	return buf[:n]
}

// TestAppendMatchCart: AppendMatchCart appends exactly what MatchCart
// answers after dst's own results, which it leaves alone, on the Redis
// path, a near cache and a read-through Loader (alone and with a near
// cache), into nil, into a full dst and into reused capacity whose old
// results must not show through.
func TestAppendMatchCart(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		p := simplePromotion("append", 2, 5, 10)
		if _, err := newCache(t, b, Options{}).Refresh(ctx, p); err != nil {
			t.Fatal(err)
		}
		ld := &countingLoader{promos: map[string]gradient.Promotion{}}
		loaderCache := func(prefix string, near bool) *Cache {
			t.Helper()
			// A prefix of its own: the loaded promotions are missing there
			// until a line loads them, and the tested promotion is warmed.
			o := Options{Prefix: prefix, Loader: ld}
			if near {
				c := newNearCache(t, nearClient(t, b), prefix, o)
				if _, err := c.Refresh(ctx, p); err != nil {
					t.Fatal(err)
				}
				return c
			}
			c, err := New(b.Client, o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Refresh(ctx, p); err != nil {
				t.Fatal(err)
			}
			return c
		}
		caches := []struct {
			name   string
			c      *Cache
			loader bool
		}{
			{"redis", newCache(t, b, Options{}), false},
			{"loader", loaderCache(b.Prefix+":ld", false), true},
		}
		if b.Real() {
			caches = append(caches, []struct {
				name   string
				c      *Cache
				loader bool
			}{
				{"near", newNearCache(t, nearClient(t, b), b.Prefix, Options{}), false},
				{"near-loader", loaderCache(b.Prefix+":nl", true), true},
			}...)
		}
		for _, cc := range caches {
			for _, opt := range []MatchOptions{{}, {Next: true, Gifts: true}} {
				for _, tc := range []struct {
					name string
					dst  func() []Result
				}{
					{"nil", func() []Result { return nil }},
					{"full dst", func() []Result { return []Result{junkResult(), junkResult()} }},
					{"reused capacity", func() []Result { return dirty(1, 40) }},
					{"reused, grown", func() []Result { return dirty(1, 2) }},
				} {
					name := cc.name + "/" + tc.name + "/next+gifts=" + strconv.FormatBool(opt.Next)
					loaded := "loaded-" + strconv.Itoa(int(ld.calls.Load())) // missing until this cart loads it
					if cc.loader {
						lp := simplePromotion(loaded, 3)
						ld.mu.Lock()
						ld.promos[loaded] = lp
						ld.mu.Unlock()
					}
					qs := []Query{
						QuantityQuery("append", 1),  // no tier; Next with opt.Next
						QuantityQuery("append", 5),  // hit with gifts, Next
						QuantityQuery("append", 12), // the top tier
						QuantityQuery("missing", 1),
						QuantityQuery("append", -1), // a bad query
						QuantityQuery(loaded, 4),    // a hit once loaded, else missing
						QuantityQuery("append", 7),
					}
					dst := tc.dst()
					before := append([]Result(nil), dst...)
					got, err := cc.c.AppendMatchCart(ctx, dst, qs, opt)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					want, err := cc.c.MatchCart(ctx, qs, opt)
					if err != nil {
						t.Fatalf("%s: MatchCart: %v", name, err)
					}
					if len(got) != len(before)+len(qs) {
						t.Fatalf("%s: %d results, want %d + %d", name, len(got), len(before), len(qs))
					}
					for i := range before {
						if got[i].Promotion != before[i].Promotion || got[i].Tier != before[i].Tier || got[i].Err != before[i].Err {
							t.Fatalf("%s: dst[%d] changed: %+v, was %+v", name, i, got[i], before[i])
						}
					}
					if msg := sameResults(want, got[len(before):]); msg != "" {
						t.Fatalf("%s: %s", name, msg)
					}
					if r := got[len(before)+5]; cc.loader && (r.Err != nil || r.Tier == nil) {
						t.Fatalf("%s: loaded line: %+v", name, r)
					}
				}
			}
		}
	})
}

// TestAppendMatchCartErrors: a call that fails whole (a bad batch, a
// context error) returns dst as it was, length and contents, with the
// error; MatchCart returns nil with it, and an empty cart an empty slice.
func TestAppendMatchCartErrors(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := testredis.Mini(t)
	good := newCache(t, b, Options{})
	if _, err := good.Refresh(ctx, simplePromotion("append", 2)); err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		qs   []Query
		want func(error) bool
	}{
		{"too many lines", ctx, make([]Query, MaxCartLines+1), func(err error) bool { return errors.Is(err, &ValidationError{Field: "batch"}) }},
		{"canceled", canceled, []Query{QuantityQuery("append", 3), QuantityQuery("append", 1)}, func(err error) bool { return errors.Is(err, context.Canceled) }},
	} {
		for _, extra := range []int{0, 5, MaxCartLines + 1} {
			dst := dirty(2, extra)
			before := append([]Result(nil), dst...)
			got, err := good.AppendMatchCart(tc.ctx, dst, tc.qs, MatchOptions{})
			if !tc.want(err) {
				t.Fatalf("%s, %d spare: err %v", tc.name, extra, err)
			}
			if len(got) != len(before) || cap(got) != cap(dst) || &got[0] != &dst[0] {
				t.Fatalf("%s, %d spare: got len %d cap %d, want dst (len %d cap %d)", tc.name, extra, len(got), cap(got), len(dst), cap(dst))
			}
			for i := range before {
				if got[i].Promotion != before[i].Promotion || got[i].Tier != before[i].Tier || got[i].Err != before[i].Err {
					t.Fatalf("%s, %d spare: dst[%d] changed: %+v", tc.name, extra, i, got[i])
				}
			}
		}
		if rs, err := good.MatchCart(tc.ctx, tc.qs, MatchOptions{}); rs != nil || !tc.want(err) {
			t.Fatalf("%s: MatchCart: %d results, err %v; want nil and the error", tc.name, len(rs), err)
		}
	}
	if rs, err := good.MatchCart(ctx, nil, MatchOptions{}); err != nil || rs == nil || len(rs) != 0 {
		t.Fatalf("empty cart: %v, %v; want an empty, non-nil slice", rs, err)
	}
}

// TestAppendMatchCartAllocs: a 150-line cart answered from held ladders
// into a reused dst allocates nothing. Not parallel: AllocsPerRun counts
// every allocation of the process, so no other test may run beside it.
func TestAppendMatchCartAllocs(t *testing.T) {
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		const promos, lines = 20, 150
		var ps []gradient.Promotion
		for i := range promos {
			ps = append(ps, simplePromotion("a"+strconv.Itoa(i), 2, 5, 10, 20))
		}
		if _, err := newCache(t, b, Options{}).Refresh(ctx, ps...); err != nil {
			t.Fatal(err)
		}
		// An hour's MaxStaleness: no ladder re-read, and no background
		// confirmation, falls inside the measured calls.
		c := newNearCache(t, nearClient(t, b), b.Prefix, Options{NearCache: &NearCacheOptions{MaxStaleness: time.Hour}})
		qs := make([]Query, lines)
		for i := range qs {
			qs[i] = QuantityQuery(ps[i%promos].ID, int64(1+i%25))
		}
		buf, err := c.AppendMatchCart(ctx, nil, qs, MatchOptions{Next: true})
		if err != nil {
			t.Fatal(err)
		}
		if st := c.NearStats(); st.Promotions != promos {
			t.Fatalf("%d ladders held after one cart, want %d", st.Promotions, promos)
		}
		// Without Next: its Shortfall is a decimal.Decimal, which allocates
		// its big.Int per line.
		var callErr error
		n := testing.AllocsPerRun(100, func() {
			buf, callErr = c.AppendMatchCart(ctx, buf[:0], qs, MatchOptions{})
		})
		if callErr != nil {
			t.Fatal(callErr)
		}
		if n != 0 {
			t.Errorf("%.1f allocations per cart into a reused dst, want 0", n)
		}
		if len(buf) != lines {
			t.Fatalf("%d results, want %d", len(buf), lines)
		}
		for i, r := range buf {
			if r.Err != nil && r.Err != ErrNoTier {
				t.Fatalf("line %d: %v", i, r.Err)
			}
		}
		if hits := c.NearStats().Hits; hits < 100*lines {
			t.Fatalf("%d lines answered from held ladders, want ≥ %d", hits, 100*lines)
		}
	})
}
