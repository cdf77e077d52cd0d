package gradient_test

import (
	"errors"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/score"
)

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func pct(p string) gradient.Reward {
	return gradient.Reward{Kind: gradient.PercentOff, Percent: dec(p)}
}

func qtyPromo() gradient.Promotion {
	return gradient.Promotion{
		ID: "buy-more", Metric: gradient.Quantity, MinorDigits: 2,
		Tiers: []gradient.Tier{
			{ID: "t10", Threshold: dec("10"), Reward: pct("30")},
			{ID: "t3", Threshold: dec("3"), Reward: pct("10")},
			{ID: "t5", Threshold: dec("5"), Reward: pct("20")},
		},
	}
}

func amountPromo() gradient.Promotion {
	return gradient.Promotion{
		ID: "spend", Metric: gradient.Amount, MinorDigits: 2,
		Tiers: []gradient.Tier{
			{ID: "a", Threshold: dec("99.99"), Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: dec("10")},
				Gifts: []gradient.Gift{{SKU: "mug", Qty: 1, Name: "Mug"}}},
			{ID: "b", Threshold: dec("199.99"), Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: dec("25")}},
		},
	}
}

func TestValidateAcceptsGoodPromotions(t *testing.T) {
	t.Parallel()
	for _, p := range []gradient.Promotion{qtyPromo(), amountPromo()} {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", p.ID, err)
		}
	}
}

// The table of bad promotions: each must fail with its own sentinel, match
// ErrInvalid, and name the promotion, the tier and the field.
func TestValidateRefusesBadPromotions(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		mutate  func(p *gradient.Promotion)
		wantErr error
		wantMsg []string
	}{
		{"duplicate thresholds", func(p *gradient.Promotion) { p.Tiers[1].Threshold = dec("10") },
			gradient.ErrDuplicateThreshold, []string{`tier 1 (id "t3")`, "threshold", "tier 0", `"t10"`}},
		{"duplicate amount thresholds after encoding", func(p *gradient.Promotion) {
			*p = amountPromo()
			p.Tiers[1].Threshold = dec("99.990")
		}, gradient.ErrDuplicateThreshold, []string{`tier 1 (id "b")`}},
		{"zero threshold", func(p *gradient.Promotion) { p.Tiers[0].Threshold = dec("0") },
			gradient.ErrThreshold, []string{"threshold", "> 0"}},
		{"negative threshold", func(p *gradient.Promotion) { p.Tiers[0].Threshold = dec("-3") },
			gradient.ErrThreshold, []string{"threshold"}},
		{"fractional count", func(p *gradient.Promotion) { p.Tiers[0].Threshold = dec("2.5") },
			gradient.ErrThreshold, []string{"not an integer"}},
		{"sub-cent amount", func(p *gradient.Promotion) { *p = amountPromo(); p.Tiers[0].Threshold = dec("99.999") },
			gradient.ErrThreshold, []string{`threshold: 99.999 has 3 fractional digits, currency allows 2`}},
		{"amount at 2^53 minor units +1", func(p *gradient.Promotion) {
			*p = amountPromo()
			p.Tiers[0].Threshold = dec("90071992547409.93")
		}, gradient.ErrThreshold, []string{"2^53"}},
		{"amount of exactly 2^53 minor units", func(p *gradient.Promotion) {
			*p = amountPromo()
			p.Tiers[0].Threshold = dec("90071992547409.92")
		}, gradient.ErrThreshold, []string{"must be below 2^53"}},
		{"count beyond 2^53", func(p *gradient.Promotion) { p.Tiers[0].Threshold = dec("9007199254740993") },
			gradient.ErrThreshold, []string{"threshold"}},
		{"no tiers", func(p *gradient.Promotion) { p.Tiers = nil }, gradient.ErrNoTiers, []string{"tiers"}},
		{"too many tiers", func(p *gradient.Promotion) {
			p.Tiers = make([]gradient.Tier, gradient.MaxTiers+1)
		}, gradient.ErrTooManyTiers, []string{"tiers"}},
		{"duplicate tier id", func(p *gradient.Promotion) { p.Tiers[2].ID = "t10" },
			gradient.ErrDuplicateTierID, []string{`tier 2`, `"t10"`, "tier 0"}},
		{"empty tier id", func(p *gradient.Promotion) { p.Tiers[0].ID = "" }, gradient.ErrBadID, []string{"id", "empty"}},
		{"promotion id with braces", func(p *gradient.Promotion) { p.ID = "a{b}" }, gradient.ErrBadID, []string{"brace"}},
		{"promotion id with space", func(p *gradient.Promotion) { p.ID = "a b" }, gradient.ErrBadID, []string{"whitespace"}},
		{"promotion id with newline", func(p *gradient.Promotion) { p.ID = "a\nb" }, gradient.ErrBadID, []string{"whitespace"}},
		{"promotion id of 200 bytes", func(p *gradient.Promotion) { p.ID = strings.Repeat("x", 200) }, gradient.ErrBadID, []string{"200 bytes"}},
		{"promotion id with control char", func(p *gradient.Promotion) { p.ID = "a\x01" }, gradient.ErrBadID, []string{"control"}},
		{"empty promotion id", func(p *gradient.Promotion) { p.ID = "" }, gradient.ErrBadID, []string{"empty"}},
		{"bad metric", func(p *gradient.Promotion) { p.Metric = 9 }, gradient.ErrBadMetric, []string{"metric"}},
		{"bad rule kind", func(p *gradient.Promotion) { p.Kind = 9 }, gradient.ErrBadMetric, []string{"kind"}},
		{"minor digits out of range", func(p *gradient.Promotion) { *p = amountPromo(); p.MinorDigits = 12 },
			gradient.ErrBadMetric, []string{"minor_digits"}},
		{"window end before start", func(p *gradient.Promotion) { p.Start = day; p.End = day.Add(-time.Hour) },
			gradient.ErrBadWindow, []string{"window"}},
		{"window end equals start", func(p *gradient.Promotion) { p.Start = day; p.End = day },
			gradient.ErrBadWindow, []string{"window"}},
		{"percent over 100", func(p *gradient.Promotion) { p.Tiers[0].Reward = pct("101") }, gradient.ErrBadReward, []string{"reward", "percent"}},
		{"percent zero", func(p *gradient.Promotion) { p.Tiers[0].Reward = pct("0") }, gradient.ErrBadReward, []string{"percent"}},
		{"amount off sub-cent", func(p *gradient.Promotion) {
			p.Tiers[0].Reward = gradient.Reward{Kind: gradient.AmountOff, Amount: dec("1.001")}
		}, gradient.ErrBadReward, []string{"fractional"}},
		{"every-n without step", func(p *gradient.Promotion) {
			p.Tiers[0].Reward = gradient.Reward{Kind: gradient.EveryN, Amount: dec("10")}
		}, gradient.ErrBadReward, []string{"step"}},
		{"negative cap", func(p *gradient.Promotion) { p.Tiers[0].Reward.Cap = dec("-1") }, gradient.ErrBadReward, []string{"cap"}},
		{"unknown reward kind", func(p *gradient.Promotion) { p.Tiers[0].Reward = gradient.Reward{} }, gradient.ErrBadReward, []string{"reward"}},
		{"gift without sku", func(p *gradient.Promotion) { p.Tiers[0].Gifts = []gradient.Gift{{Qty: 1}} },
			gradient.ErrBadGift, []string{"gifts[0]", "sku"}},
		{"gift zero qty", func(p *gradient.Promotion) { p.Tiers[1].Gifts = []gradient.Gift{{SKU: "x"}, {SKU: "y", Qty: 0}} },
			gradient.ErrBadGift, []string{"tier 1", "gifts[0]"}},
		{"gift qty too big", func(p *gradient.Promotion) { p.Tiers[0].Gifts = []gradient.Gift{{SKU: "x", Qty: 1001}} },
			gradient.ErrBadGift, []string{"qty"}},
		{"parity match value missing", func(p *gradient.Promotion) { p.Kind = gradient.ParityPrice },
			gradient.ErrThreshold, []string{"match_value"}},
		{"promotion id not UTF-8", func(p *gradient.Promotion) { p.ID = "p\xff1" }, gradient.ErrBadID, []string{"UTF-8"}},
		{"tier id not UTF-8", func(p *gradient.Promotion) { p.Tiers[1].ID = "t\xc3" }, gradient.ErrBadID, []string{"tier 1", "UTF-8"}},
		{"promotion id with a bidi override", func(p *gradient.Promotion) { p.ID = "p\u202e1" }, gradient.ErrBadID, []string{"format character"}},
		{"gift sku not UTF-8", func(p *gradient.Promotion) { p.Tiers[0].Gifts = []gradient.Gift{{SKU: "s\xfe", Qty: 1}} },
			gradient.ErrBadGift, []string{"sku", "UTF-8"}},
		{"gift name not UTF-8", func(p *gradient.Promotion) { p.Tiers[0].Gifts = []gradient.Gift{{SKU: "s", Qty: 1, Name: "Tote \xff"}} },
			gradient.ErrBadGift, []string{"name", "UTF-8"}},
		{"gift name with ESC", func(p *gradient.Promotion) {
			p.Tiers[0].Gifts = []gradient.Gift{{SKU: "s", Qty: 1, Name: "Tote\x1b[2J"}}
		}, gradient.ErrBadGift, []string{"name", "control"}},
		{"gift name with CR", func(p *gradient.Promotion) {
			p.Tiers[0].Gifts = []gradient.Gift{{SKU: "s", Qty: 1, Name: "Tote\rforged"}}
		},
			gradient.ErrBadGift, []string{"name", "control"}},
		{"threshold of 200,000 digits", func(p *gradient.Promotion) { p.Tiers[0].Threshold = dec(strings.Repeat("9", 200_000)) },
			gradient.ErrThreshold, []string{"threshold", "significant digits"}},
		{"reward amount of 200,000 digits", func(p *gradient.Promotion) {
			p.Tiers[0].Reward = gradient.Reward{Kind: gradient.AmountOff, Amount: dec(strings.Repeat("9", 200_000))}
		}, gradient.ErrBadReward, []string{"reward", "significant digits"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := qtyPromo()
			c.mutate(&p)
			err := p.Validate()
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if !errors.Is(err, gradient.ErrInvalid) {
				t.Errorf("err %v does not match ErrInvalid", err)
			}
			if len(err.Error()) > 400 {
				t.Errorf("message is %d bytes, want a short one", len(err.Error()))
			}
			if c.name == "sub-cent amount" && !errors.Is(err, score.ErrTooPrecise) {
				t.Errorf("the codec's cause is lost: %v", err)
			}
			var ve *gradient.ValidationError
			if !errors.As(err, &ve) || ve.Promotion != p.ID {
				t.Errorf("err %v is not a ValidationError for %q", err, p.ID)
			}
			for _, m := range c.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("message %q lacks %q", err.Error(), m)
				}
			}
			if _, err := gradient.NewMatcher(p); !errors.Is(err, c.wantErr) {
				t.Errorf("NewMatcher accepted a bad promotion: %v", err)
			}
		})
	}
}

// TestQueryScoreRefusesHugeValueFast: the cart's value is the caller's;
// a 200,000-digit decimal is refused by size, not scaled or printed (that
// took 29-56 ms).
func TestQueryScoreRefusesHugeValueFast(t *testing.T) {
	huge := dec(strings.Repeat("9", 200_000))
	for _, v := range []decimal.Decimal{huge, huge.Neg()} {
		start := time.Now()
		_, err := gradient.QueryScore(gradient.Amount, 2, v)
		if took := time.Since(start); took > 50*time.Millisecond {
			t.Errorf("took %v", took)
		}
		if !errors.Is(err, gradient.ErrBadValue) || !errors.Is(err, score.ErrTooLong) {
			t.Errorf("err = %v, want ErrBadValue and score.ErrTooLong", err)
		}
		if len(err.Error()) > 200 {
			t.Errorf("message is %d bytes", len(err.Error()))
		}
	}
}

func TestMatcherBoundaries(t *testing.T) {
	t.Parallel()
	m, err := gradient.NewMatcher(qtyPromo())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		value     int64
		wantTier  string
		wantNext  string
		shortfall string
		wantErr   error
	}{
		{0, "", "t3", "3", gradient.ErrNoTier},
		{2, "", "t3", "1", gradient.ErrNoTier},
		{3, "t3", "t5", "2", nil},
		{4, "t3", "t5", "1", nil},
		{5, "t5", "t10", "5", nil},
		{9, "t5", "t10", "1", nil},
		{10, "t10", "", "0", nil},
		{1 << 40, "t10", "", "0", nil},
	}
	for _, c := range cases {
		h, err := m.MatchScore(c.value)
		if !errors.Is(err, c.wantErr) {
			t.Errorf("value %d: err %v, want %v", c.value, err, c.wantErr)
		}
		if got := tierID(h.Tier); got != c.wantTier {
			t.Errorf("value %d: tier %q, want %q", c.value, got, c.wantTier)
		}
		if got := tierID(h.Next); got != c.wantNext {
			t.Errorf("value %d: next %q, want %q", c.value, got, c.wantNext)
		}
		if !h.Shortfall.Equal(dec(c.shortfall)) {
			t.Errorf("value %d: shortfall %s, want %s", c.value, h.Shortfall, c.shortfall)
		}
	}
	if _, err := m.MatchScore(-1); !errors.Is(err, gradient.ErrBadValue) {
		t.Errorf("negative score: %v", err)
	}
	if _, err := m.Match(dec("-0.5")); !errors.Is(err, gradient.ErrBadValue) {
		t.Errorf("negative value: %v", err)
	}
}

func TestMatcherAmountFloorsQueries(t *testing.T) {
	t.Parallel()
	m, err := gradient.NewMatcher(amountPromo())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ value, tier, shortfall string }{
		{"99.98", "", "0.01"},
		{"99.989", "", "0.01"},
		{"99.99", "a", "100"},
		{"99.999", "a", "100"},
		{"199.98", "a", "0.01"},
		{"199.99", "b", "0"},
		{"1000000", "b", "0"},
	}
	for _, c := range cases {
		h, _ := m.Match(dec(c.value))
		if got := tierID(h.Tier); got != c.tier {
			t.Errorf("value %s: tier %q, want %q", c.value, got, c.tier)
		}
		if !h.Shortfall.Equal(dec(c.shortfall)) {
			t.Errorf("value %s: shortfall %s, want %s", c.value, h.Shortfall, c.shortfall)
		}
	}
}

// The matcher is the oracle of every other test, so it is itself checked
// against the plainest possible implementation: a linear scan.
func TestMatcherAgreesWithLinearScan(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 50; round++ {
		n := 1 + rng.IntN(300)
		p := gradient.Promotion{ID: "p" + strconv.Itoa(round), Metric: gradient.Amount, MinorDigits: 2}
		seen := map[int64]bool{}
		for len(p.Tiers) < n {
			cents := 1 + rng.Int64N(1_000_000)
			if seen[cents] {
				continue
			}
			seen[cents] = true
			p.Tiers = append(p.Tiers, gradient.Tier{ID: "t" + strconv.Itoa(len(p.Tiers)),
				Threshold: score.MinorToAmount(cents, 2), Reward: pct("5")})
		}
		m, err := gradient.NewMatcher(p)
		if err != nil {
			t.Fatal(err)
		}
		if !sort.SliceIsSorted(m.Scores(), func(i, j int) bool { return m.Scores()[i] < m.Scores()[j] }) {
			t.Fatal("scores not sorted")
		}
		for q := 0; q < 200; q++ {
			v := rng.Int64N(1_100_000)
			best, bestScore := "", int64(-1)
			for i := range p.Tiers {
				s, _ := p.ScoreOf(&p.Tiers[i])
				if s <= v && s > bestScore {
					best, bestScore = p.Tiers[i].ID, s
				}
			}
			h, _ := m.MatchScore(v)
			if got := tierID(h.Tier); got != best {
				t.Fatalf("round %d value %d: matcher %q, scan %q", round, v, got, best)
			}
		}
	}
}

func TestMatcherCopiesTheTiers(t *testing.T) {
	t.Parallel()
	p := qtyPromo()
	m, _ := gradient.NewMatcher(p)
	p.Tiers[0].ID = "changed"
	h, _ := m.MatchScore(10)
	if h.Tier.ID != "t10" {
		t.Fatalf("matcher shares the caller's tiers: got %q", h.Tier.ID)
	}
}

func TestParityKindsMatchOnMatchValue(t *testing.T) {
	t.Parallel()
	p := gradient.Promotion{ID: "parity", Metric: gradient.Amount, MinorDigits: 2, Kind: gradient.ParityPrice,
		Tiers: []gradient.Tier{
			{ID: "odd", Threshold: dec("1"), MatchValue: dec("50.00"), Reward: gradient.Reward{Kind: gradient.FixedPrice, Amount: dec("45")}},
			{ID: "even", Threshold: dec("1"), MatchValue: dec("80.00"), Reward: gradient.Reward{Kind: gradient.FixedPrice, Amount: dec("70")}},
		}}
	m, err := gradient.NewMatcher(p)
	if err != nil {
		t.Fatalf("parity tiers share a Threshold but not a MatchValue, so they are valid: %v", err)
	}
	h, _ := m.Match(dec("60"))
	if tierID(h.Tier) != "odd" {
		t.Fatalf("60 hit %q, want odd", tierID(h.Tier))
	}
	if s, _ := p.ScoreOf(&p.Tiers[1]); s != 8000 {
		t.Fatalf("parity score = %d, want 8000", s)
	}
}

func TestActiveWindow(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	p := qtyPromo()
	p.Start, p.End = start, start.Add(24*time.Hour)
	cases := []struct {
		at   time.Time
		want bool
	}{
		{start.Add(-time.Nanosecond), false},
		{start, true},
		{start.Add(23 * time.Hour), true},
		{start.Add(24 * time.Hour), false},
	}
	for _, c := range cases {
		if got := p.Active(c.at); got != c.want {
			t.Errorf("Active(%v) = %v", c.at, got)
		}
	}
	open := qtyPromo()
	if !open.Active(time.Time{}) || !open.Active(start) {
		t.Error("a promotion without a window is always active")
	}
}

func TestDiscount(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		r           gradient.Reward
		base, value string
		digits      int
		mode        gradient.Rounding
		want        string
	}{
		{"percent", pct("10"), "99.99", "99.99", 2, gradient.RoundHalfUp, "10"},
		{"percent down", pct("10"), "99.99", "99.99", 2, gradient.RoundDown, "9.99"},
		{"percent half even", pct("50"), "0.05", "0.05", 2, gradient.RoundHalfEven, "0.02"},
		{"percent half up", pct("50"), "0.05", "0.05", 2, gradient.RoundHalfUp, "0.03"},
		{"percent up", pct("33"), "1", "1", 2, gradient.RoundUp, "0.33"},
		{"percent capped", gradient.Reward{Kind: gradient.PercentOff, Percent: dec("30"), Cap: dec("20")}, "100", "100", 2, gradient.RoundHalfUp, "20"},
		{"amount off", gradient.Reward{Kind: gradient.AmountOff, Amount: dec("10")}, "99.99", "99.99", 2, gradient.RoundHalfUp, "10"},
		{"amount off beyond base", gradient.Reward{Kind: gradient.AmountOff, Amount: dec("10")}, "4.5", "1", 2, gradient.RoundHalfUp, "4.5"},
		{"fixed price", gradient.Reward{Kind: gradient.FixedPrice, Amount: dec("45")}, "60", "60", 2, gradient.RoundHalfUp, "15"},
		{"fixed price above base", gradient.Reward{Kind: gradient.FixedPrice, Amount: dec("45")}, "40", "40", 2, gradient.RoundHalfUp, "0"},
		{"every 100 gets 10", gradient.Reward{Kind: gradient.EveryN, Step: dec("100"), Amount: dec("10")}, "350", "350", 2, gradient.RoundHalfUp, "30"},
		{"every 100 exactly", gradient.Reward{Kind: gradient.EveryN, Step: dec("100"), Amount: dec("10")}, "300", "300", 2, gradient.RoundHalfUp, "30"},
		{"every 100 capped", gradient.Reward{Kind: gradient.EveryN, Step: dec("100"), Amount: dec("10"), Cap: dec("50")}, "990", "990", 2, gradient.RoundHalfUp, "50"},
		{"every 2 items", gradient.Reward{Kind: gradient.EveryN, Step: dec("2"), Amount: dec("5")}, "70", "7", 2, gradient.RoundHalfUp, "15"},
		{"yen", pct("15"), "1005", "1005", gradient.NoMinorDigits, gradient.RoundHalfUp, "151"},
		{"zero digits means two", pct("10"), "99.99", "99.99", 0, gradient.RoundDown, "9.99"},
		{"dinar", pct("10"), "1.2345", "1.2345", 3, gradient.RoundDown, "0.123"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := c.r.Discount(dec(c.base), dec(c.value), c.digits, c.mode)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(dec(c.want)) {
				t.Errorf("discount = %s, want %s", got, c.want)
			}
		})
	}
	bad := []struct {
		name string
		r    gradient.Reward
		mode gradient.Rounding
		base string
		want error
	}{
		{"no rounding mode", pct("10"), 0, "1", gradient.ErrBadReward},
		{"unknown kind", gradient.Reward{}, gradient.RoundDown, "1", gradient.ErrBadReward},
		{"negative base", pct("10"), gradient.RoundDown, "-1", gradient.ErrBadValue},
		{"zero step", gradient.Reward{Kind: gradient.EveryN, Amount: dec("1")}, gradient.RoundDown, "1", gradient.ErrBadReward},
	}
	for _, c := range bad {
		if _, err := c.r.Discount(dec(c.base), dec("1"), 2, c.mode); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
}

func tierID(t *gradient.Tier) string {
	if t == nil {
		return ""
	}
	return t.ID
}
