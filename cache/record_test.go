package cache

import (
	"bytes"
	"errors"
	"math/rand"
	"runtime"
	"testing"

	"github.com/shopspring/decimal"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/tierset/tierset/gradient"
)

// hostile are inputs that make an unguarded msgpack v5.4.1 decode try to
// allocate gigabytes: a str32/bin32/array32/map32/ext32 header claiming
// 2 GiB (or 2^31 elements) followed by nothing.
var hostile = []string{
	"\xdb\x7f\xff\xff\xff", // str32, 2 GiB
	"\xc6\x7f\xff\xff\xff", // bin32, 2 GiB
	"\xdd\x7f\xff\xff\xff", // array32, 2^31 elements
	"\xdf\x7f\xff\xff\xff", // map32, 2^31 pairs
	"\xc9\x7f\xff\xff\xff", // ext32, 2 GiB
	"\x91\xdd\xff\xff\xff\xff",
	"\xde\xff\xff",
}

func TestMemberRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(7))
	for _, metric := range []gradient.Metric{gradient.Quantity, gradient.Amount} {
		p := randPromotion(rng, "rt", metric, 200)
		e, err := encodePromotion(&p, defaultMaxRecordBytes)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]*gradient.Tier{}
		for i := range p.Tiers {
			byID[p.Tiers[i].ID] = &p.Tiers[i]
		}
		for k, raw := range e.members {
			m, err := decodeMember(raw, defaultMaxRecordBytes)
			if err != nil {
				t.Fatalf("member %d: %v", k, err)
			}
			if m.version != e.version || m.metric != metric || m.score != e.scores[k] {
				t.Fatalf("member %d: %+v", k, m)
			}
			// The record is standard msgpack: the library reads it too.
			var generic []any
			if err := msgpack.Unmarshal([]byte(raw), &generic); err != nil || len(generic) != memberFields {
				t.Fatalf("msgpack.Unmarshal: %v %v", generic, err)
			}
			if m.kind != kindTier {
				continue
			}
			tier := byID[m.tierID]
			r := tier.Reward
			if m.reward.Kind != r.Kind || !m.reward.Percent.Equal(r.Percent) || !m.reward.Amount.Equal(r.Amount) ||
				!m.reward.Step.Equal(r.Step) || !m.reward.Cap.Equal(r.Cap) || m.hasGifts != (len(tier.Gifts) > 0) {
				t.Fatalf("tier %s: reward %+v, want %+v", m.tierID, m.reward, r)
			}
		}
		for i := 0; i < len(e.gifts); i += 2 {
			gifts, err := decodeGifts(e.gifts[i+1], defaultMaxRecordBytes)
			if err != nil {
				t.Fatal(err)
			}
			want := byID[e.gifts[i]].Gifts
			if len(gifts) != len(want) {
				t.Fatalf("gifts %v, want %v", gifts, want)
			}
			for g := range want {
				if gifts[g] != want[g] {
					t.Fatalf("gift %d: %+v, want %+v", g, gifts[g], want[g])
				}
			}
		}
	}
}

// TestVersionIsContentHash: the version depends on content only, not on
// tier order or decimal spelling, and changes with any field that matters.
func TestVersionIsContentHash(t *testing.T) {
	t.Parallel()
	version := func(p gradient.Promotion) string {
		t.Helper()
		e, err := encodePromotion(&p, defaultMaxRecordBytes)
		if err != nil {
			t.Fatal(err)
		}
		return e.version
	}
	base := simplePromotion("h", 1, 2, 3)
	v := version(base)
	reordered := mutate(base, func(p *gradient.Promotion) { p.Tiers[0], p.Tiers[2] = p.Tiers[2], p.Tiers[0] })
	respelled := mutate(base, func(p *gradient.Promotion) {
		p.Tiers[0].Reward.Percent = decimal.RequireFromString(p.Tiers[0].Reward.Percent.StringFixed(2))
	})
	if version(reordered) != v || version(respelled) != v {
		t.Fatal("version depends on order or spelling")
	}
	for name, p := range map[string]gradient.Promotion{
		"threshold": mutate(base, func(p *gradient.Promotion) { p.Tiers[0].Threshold = decimal.NewFromInt(9) }),
		"reward": mutate(base, func(p *gradient.Promotion) {
			p.Tiers[0].Reward.Percent = p.Tiers[0].Reward.Percent.Add(decimal.NewFromInt(1))
		}),
		"gift name": mutate(base, func(p *gradient.Promotion) {
			p.Tiers[0].Gifts = []gradient.Gift{{SKU: "gift-0", Qty: 1, Name: "other"}}
		}),
		"tier id": mutate(base, func(p *gradient.Promotion) { p.Tiers[0].ID = "renamed" }),
		"end":     mutate(base, func(p *gradient.Promotion) { p.End = p.End.AddDate(2030, 0, 0) }),
		"digits":  mutate(base, func(p *gradient.Promotion) { p.MinorDigits = 3 }),
	} {
		if version(p) == v {
			t.Fatalf("changing %s kept the version", name)
		}
	}
}

// TestHostileBytes: each hostile input gives ErrCorrupt from both decoders
// and allocates a bounded amount (the unguarded library would try GiBs).
func TestHostileBytes(t *testing.T) {
	for _, in := range hostile {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, errM := decodeMember(in, defaultMaxRecordBytes)
		_, errG := decodeGifts(in, defaultMaxRecordBytes)
		runtime.ReadMemStats(&after)
		if !errors.Is(errM, ErrCorrupt) || !errors.Is(errG, ErrCorrupt) {
			t.Fatalf("%q: member %v, gifts %v", in, errM, errG)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
			t.Fatalf("%q: allocated %d bytes", in, grew)
		}
	}
}

func memberSeeds(f *testing.F) {
	p := simplePromotion("fz", 1, 5)
	p.Tiers[0].Reward = gradient.Reward{Kind: gradient.EveryN, Amount: decimal.RequireFromString("9.99"), Step: decimal.NewFromInt(100), Cap: decimal.NewFromInt(50)}
	e, err := encodePromotion(&p, defaultMaxRecordBytes)
	if err != nil {
		f.Fatal(err)
	}
	for _, m := range e.members {
		f.Add([]byte(m))
	}
	for i := 0; i < len(e.gifts); i += 2 {
		f.Add([]byte(e.gifts[i+1]))
	}
	for _, h := range hostile {
		f.Add([]byte(h))
	}
	f.Add([]byte{})
	f.Add([]byte{0x9e, 0x01})
}

func FuzzDecodeMember(f *testing.F) {
	memberSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMember(string(b), 4096)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if m.kind < kindTier || m.kind > kindCeiling || m.version == "" {
			t.Fatalf("accepted impossible member %+v", m)
		}
		// What decodes re-encodes to a record that decodes the same.
		var buf bytes.Buffer
		if err := encodeMember(&buf, &m); err != nil {
			t.Fatal(err)
		}
		m2, err := decodeMember(buf.String(), 4096)
		if err != nil || m2.tierID != m.tierID || m2.score != m.score || !m2.reward.Amount.Equal(m.reward.Amount) {
			t.Fatalf("re-encode: %+v vs %+v (%v)", m2, m, err)
		}
	})
}

func FuzzDecodeGifts(f *testing.F) {
	memberSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		gifts, err := decodeGifts(string(b), 4096)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(gifts) > gradient.MaxGiftsPerTier {
			t.Fatalf("%d gifts", len(gifts))
		}
		for _, g := range gifts {
			if g.Qty <= 0 || g.Qty > gradient.MaxGiftQty {
				t.Fatalf("gift %+v", g)
			}
		}
	})
}
