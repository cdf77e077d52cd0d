package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// argsRecorder records the arguments of every command a client sends,
// rendered the way they go on the wire (an int64 and its decimal string
// are the same bulk string).
type argsRecorder struct {
	mu   sync.Mutex
	cmds [][]string
}

func (a *argsRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (a *argsRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a.add(cmd)
		return next(ctx, cmd)
	}
}

func (a *argsRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			a.add(cmd)
		}
		return next(ctx, cmds)
	}
}

func (a *argsRecorder) add(cmd redis.Cmder) {
	if cmd.Name() != "zrange" { // not the connection handshake
		return
	}
	var out []string
	for _, arg := range cmd.Args() {
		out = append(out, fmt.Sprint(arg))
	}
	a.mu.Lock()
	a.cmds = append(a.cmds, out)
	a.mu.Unlock()
}

func (a *argsRecorder) take() [][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.cmds
	a.cmds = nil
	return out
}

// TestHotPathSendsTheZRangeArgsCommands: the commands Match and MatchCart
// build themselves are, argument for argument, what redis.ZRangeArgs sends
// for hitArgs and nextArgs.
func TestHotPathSendsTheZRangeArgsCommands(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		ps := []gradient.Promotion{simplePromotion("args-a", 5, 300, 7000), simplePromotion("args-b", 2, 9)}
		if _, err := c.Refresh(ctx, ps...); err != nil {
			t.Fatal(err)
		}
		rec := &argsRecorder{}
		b.Client.AddHook(rec)
		qs := []Query{QuantityQuery("args-a", 301), QuantityQuery("args-b", 1), QuantityQuery("args-a", 123456789)}
		want := func(next bool) [][]string {
			rec.take()
			for i := range qs {
				key := c.tiersKey(qs[i].Promotion)
				s := qs[i].Value.IntPart()
				_ = b.Client.ZRangeArgs(ctx, c.hitArgs(key, s)).Err()
				if next {
					_ = b.Client.ZRangeArgs(ctx, c.nextArgs(key, s)).Err()
				}
			}
			return rec.take()
		}
		for _, next := range []bool{false, true} {
			exp := want(next)
			if _, err := c.MatchCart(ctx, qs, MatchOptions{Next: next}); err != nil {
				t.Fatal(err)
			}
			if got := rec.take(); fmt.Sprint(got) != fmt.Sprint(exp) {
				t.Fatalf("next=%v: MatchCart sent %v, ZRangeArgs sends %v", next, got, exp)
			}
			exp = want(next)[:1+btoi(next)]
			if _, err := c.Match(ctx, qs[0], MatchOptions{Next: next}); err != nil {
				t.Fatal(err)
			}
			if got := rec.take(); fmt.Sprint(got) != fmt.Sprint(exp) {
				t.Fatalf("next=%v: Match sent %v, ZRangeArgs sends %v", next, got, exp)
			}
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestMemoNeverServesCorruptRecords: a corrupt member is refused on every
// read (failures are not memoized), and a memoized record is the same on
// every read whatever the caller did to an earlier Result.
func TestMemoNeverServesCorruptRecords(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		obs := &countingObserver{}
		c := newCache(t, b, Options{Observer: obs})
		if _, err := c.Refresh(ctx, simplePromotion("memo", 3, 10)); err != nil {
			t.Fatal(err)
		}
		// A valid record with one trailing byte: the memo must not let the
		// valid prefix vouch for it.
		valid := mustMember(t, c, "x")
		if err := b.Client.ZAdd(ctx, c.tiersKey("memo-bad"), redis.Z{Score: 1, Member: valid + "\x00"}).Err(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			if _, err := c.Match(ctx, QuantityQuery("memo-bad", 5), MatchOptions{}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("read %d: %v, want ErrCorrupt", i, err)
			}
		}
		if n := obs.decodeErrors.Load(); n != 3 {
			t.Fatalf("observer saw %d decode errors in 3 corrupt reads", n)
		}
		first, err := c.Match(ctx, QuantityQuery("memo", 4), MatchOptions{Next: true})
		if err != nil {
			t.Fatal(err)
		}
		id, pct, th := first.Tier.ID, first.Tier.Reward.Percent, first.Tier.Threshold
		first.Tier.ID, first.Tier.Reward.Percent, first.Tier.Threshold = "scribbled", decimal.NewFromInt(99), decimal.NewFromInt(-1)
		first.Next.ID = "scribbled"
		for i := 0; i < 3; i++ {
			r, err := c.Match(ctx, QuantityQuery("memo", 4), MatchOptions{Next: true})
			if err != nil {
				t.Fatal(err)
			}
			if r.Tier.ID != id || !r.Tier.Reward.Percent.Equal(pct) || !r.Tier.Threshold.Equal(th) || r.Next.ID != "tier1" {
				t.Fatalf("read %d after the caller wrote to a Result: %+v next %+v", i, r.Tier, r.Next)
			}
		}
		if c.memo.len() == 0 {
			t.Fatal("nothing was memoized")
		}
	})
}

// TestMemoOnAndOffAgree: random promotions and queries give identical
// Results with the memo, without it, and with a memo so small it is
// emptied all the time.
func TestMemoOnAndOffAgree(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		caches := []*Cache{newCache(t, b, Options{}), newCache(t, b, Options{DecodeCacheSize: -1}), newCache(t, b, Options{DecodeCacheSize: 3})}
		if caches[1].memo != nil {
			t.Fatal("DecodeCacheSize -1 kept a memo")
		}
		rng := rand.New(rand.NewSource(7))
		var ps []gradient.Promotion
		for i := 0; i < 4; i++ {
			ps = append(ps, randPromotion(rng, "agree"+strconv.Itoa(i), gradient.Metric(1+i%2), 1+rng.Intn(40)))
		}
		if _, err := caches[0].Refresh(ctx, ps...); err != nil {
			t.Fatal(err)
		}
		for round := 0; round < 30; round++ {
			var qs []Query
			for k := 0; k < 1+rng.Intn(8); k++ {
				p := &ps[rng.Intn(len(ps))]
				qs = append(qs, queryFor(p, rng.Int63n(int64(len(p.Tiers))*50+20)))
			}
			opt := MatchOptions{Next: rng.Intn(2) == 0, Gifts: rng.Intn(2) == 0}
			var out []string
			for _, c := range caches {
				rs, err := c.MatchCart(ctx, qs, opt)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, fmt.Sprintf("%+v", deref(rs)))
			}
			if out[0] != out[1] || out[1] != out[2] {
				t.Fatalf("round %d: memo on/off/tiny disagree:\n%s\n%s\n%s", round, out[0], out[1], out[2])
			}
		}
		if n := caches[2].memo.len(); n > 3 {
			t.Fatalf("memo of size 3 holds %d entries", n)
		}
	})
}

// deref renders Results with their Tier and Next contents, not pointers.
func deref(rs []Result) []string {
	var out []string
	for _, r := range rs {
		s := fmt.Sprintf("%s %s %v %s", r.Promotion, r.Version, r.Err, r.Shortfall)
		for _, h := range []*TierHit{r.Tier, r.Next} {
			if h != nil {
				s += fmt.Sprintf(" [%s %d %s %+v %v %v]", h.ID, h.Score, h.Threshold, h.Reward, h.HasGifts, h.Gifts)
			}
		}
		out = append(out, s)
	}
	return out
}

// TestMemoComparesBytes: an entry is only served for its own bytes, even
// when another record lands on its hash slot.
func TestMemoComparesBytes(t *testing.T) {
	t.Parallel()
	mo := newMemo(64)
	d := &decoded{raw: "record-a"}
	mo.put(d)
	sh, h := mo.shard("record-b")
	sh.m[h] = d // force a collision: record-b's slot holds record-a
	if got := mo.get("record-b"); got != nil {
		t.Fatalf("record-b served %q", got.raw)
	}
	if got := mo.get("record-a"); got != d {
		t.Fatal("record-a not served")
	}
}

func TestMemoIsBounded(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1, 5, 16, 100, 1000} {
		mo := newMemo(size)
		for i := 0; i < 20*size+100; i++ {
			mo.put(&decoded{raw: "member-" + strconv.Itoa(i)})
			if n := mo.len(); n > size {
				t.Fatalf("size %d: %d entries after %d puts", size, n, i+1)
			}
		}
		mo.put(&decoded{raw: strings.Repeat("x", memoMaxMember+1)})
		if mo.get(strings.Repeat("x", memoMaxMember+1)) != nil {
			t.Fatalf("size %d: kept a record over %d bytes", size, memoMaxMember)
		}
	}
	if newMemo(0) != nil || newMemo(-1) != nil {
		t.Fatal("a memo of size ≤ 0")
	}
}

// TestValidateIDFastPathAgrees: the ASCII fast path accepts exactly what
// gradient.ValidateID accepts.
func TestValidateIDFastPathAgrees(t *testing.T) {
	t.Parallel()
	ids := []string{"", "a", "promo-1", "a b", "a\tb", "a\nb", "{x}", "x}", "\x7f", "\x00", "é", "a\u00a0b", "a\u0085b",
		"\xff", strings.Repeat("a", gradient.MaxIDLen), strings.Repeat("a", gradient.MaxIDLen+1), "促销-1", "~!@#$%^&*()"}
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 20000; i++ {
		b := make([]byte, rng.Intn(8))
		for k := range b {
			b[k] = byte(rng.Intn(256))
			if rng.Intn(3) > 0 {
				b[k] = byte(0x20 + rng.Intn(0x60))
			}
		}
		ids = append(ids, string(b))
	}
	for _, id := range ids {
		if got, want := validateID(id), gradient.ValidateID(id); (got == nil) != (want == nil) {
			t.Fatalf("%q: fast path %v, ValidateID %v", id, got, want)
		}
	}
}

// BenchmarkMemoFootprint measures the heap one memo entry holds for a
// typical member record (the basis of the Options.DecodeCacheSize doc).
func BenchmarkMemoFootprint(b *testing.B) {
	p := randPromotion(rand.New(rand.NewSource(1)), "footprint-promotion-0001", gradient.Amount, 3000)
	e, err := encodePromotion(&p, defaultMaxRecordBytes)
	if err != nil {
		b.Fatal(err)
	}
	const entries = 1 << 14
	var total, recBytes float64
	for b.Loop() {
		raws := make([]string, 0, entries)
		for i := 0; len(raws) < entries; i++ {
			raw := e.members[i%len(e.members)]
			raws = append(raws, raw[:len(raw)-1]+string(rune('a'+i/len(e.members)%26))) // distinct bytes, as distinct versions
		}
		c := &Cache{maxBytes: defaultMaxRecordBytes, obs: NopObserver{}}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		c.memo = newMemo(entries)
		for _, raw := range raws {
			// Decode the unmodified record (the variant is only a key).
			m, err := decodeMember(e.members[0], defaultMaxRecordBytes)
			if err != nil {
				b.Fatal(err)
			}
			c.memo.put(&decoded{raw: strings.Clone(raw), m: m, threshold: m.scoreValue(m.score)})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		total = float64(after.HeapAlloc) - float64(before.HeapAlloc)
		recBytes = float64(len(e.members[0]))
		runtime.KeepAlive(c)
		runtime.KeepAlive(raws)
	}
	b.ReportMetric(total/entries, "B/entry")
	b.ReportMetric(recBytes, "B/record")
}
