package rules_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/rules"
	"github.com/tierset/tierset/score"
)

// TestParseBadFiles: every bad file is refused with its exact message, a
// typed *rules.Error naming promotion/tier/field, the right sentinel, and
// no promotions.
func TestParseBadFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file   string
		msg    string
		is     []error
		promo  string
		tier   int
		field  string
		line   int
		column int
	}{
		{"sub_cent.json", `sub_cent.json: promotion "10086" tier 2 (id "t3"): threshold "99.999" has 3 fractional digits, currency allows 2`,
			[]error{gradient.ErrThreshold, score.ErrTooPrecise}, "10086", 2, "threshold", 0, 0},
		{"unknown_field.json", `unknown_field.json: promotion "10086": unknown field "colour"`,
			[]error{rules.ErrUnknownField}, "10086", -1, "colour", 0, 0},
		{"unknown_tier_field.json", `unknown_tier_field.json: promotion "10086" tier 0 (id "t1"): unknown field "treshold"`,
			[]error{rules.ErrUnknownField}, "10086", 0, "treshold", 0, 0},
		{"unknown_reward_field.json", `unknown_reward_field.json: promotion "10086" tier 0 (id "t1"): unknown field "reward.percentage"`,
			[]error{rules.ErrUnknownField}, "10086", 0, "reward.percentage", 0, 0},
		{"unused_reward_field.json", `unused_reward_field.json: promotion "10086" tier 0 (id "t1"): reward.percent is not used by reward kind "amount_off"`,
			[]error{rules.ErrUnknownField}, "10086", 0, "reward.percent", 0, 0},
		{"duplicate_threshold.json", `duplicate_threshold.json: promotion "10086" tier 1 (id "t2"): threshold: 50 equals the threshold of tier 0 (id "t1")`,
			[]error{gradient.ErrDuplicateThreshold, gradient.ErrInvalid}, "10086", 1, "threshold", 0, 0},
		{"duplicate_tier_id.json", `duplicate_tier_id.json: promotion "10086" tier 1 (id "t1"): id: "t1" is also the id of tier 0`,
			[]error{gradient.ErrDuplicateTierID}, "10086", 1, "id", 0, 0},
		{"bad_date.json", `bad_date.json: promotion "10086": start "2026-12-01" is not an RFC 3339 time (e.g. 2026-12-01T00:00:00+08:00)`,
			[]error{rules.ErrTime}, "10086", -1, "start", 0, 0},
		{"end_before_start.json", `end_before_start.json: promotion "10086": end 2026-11-01T00:00:00Z is not after start 2026-12-01T00:00:00Z`,
			[]error{gradient.ErrBadWindow}, "10086", -1, "end", 0, 0},
		{"empty_tiers.json", `empty_tiers.json: promotion "10086": tiers: at least one tier is required`,
			[]error{gradient.ErrNoTiers, rules.ErrMissing}, "10086", -1, "tiers", 0, 0},
		{"float_like.json", `float_like.json: promotion "10086" tier 0 (id "t1"): threshold "1e400" is not a plain decimal of at most 40 characters (write digits, e.g. "99.99"; exponents are refused)`,
			[]error{rules.ErrNumber}, "10086", 0, "threshold", 0, 0},
		{"bool_amount.json", `bool_amount.json: promotion "10086" tier 0 (id "t1"): threshold true must be a decimal string or number`,
			[]error{rules.ErrNumber}, "10086", 0, "threshold", 0, 0},
		{"negative.json", `negative.json: promotion "10086" tier 0 (id "t1"): threshold "-5" must be > 0`,
			[]error{gradient.ErrThreshold}, "10086", 0, "threshold", 0, 0},
		{"negative_reward.json", `negative_reward.json: promotion "10086" tier 0 (id "t1"): reward.amount "-1" must not be negative`,
			[]error{gradient.ErrBadReward}, "10086", 0, "reward.amount", 0, 0},
		{"percent_over_100.json", `percent_over_100.json: promotion "10086" tier 0 (id "t1"): reward: percent 150 must be in (0, 100]`,
			[]error{gradient.ErrBadReward}, "10086", 0, "reward", 0, 0},
		{"fractional_count.json", `fractional_count.json: promotion "10086" tier 0 (id "t1"): threshold "2.5" must be a whole item count for a quantity promotion`,
			[]error{gradient.ErrThreshold}, "10086", 0, "threshold", 0, 0},
		{"bad_reward_kind.json", `bad_reward_kind.json: promotion "10086" tier 0 (id "t1"): reward.kind "buy_one_get_one" is not one of "percent_off", "amount_off", "fixed_price", "every_n"`,
			[]error{rules.ErrEnum, gradient.ErrBadReward}, "10086", 0, "reward.kind", 0, 0},
		{"bad_metric.json", `bad_metric.json: promotion "10086": metric "weight" is neither "quantity" nor "amount"`,
			[]error{rules.ErrEnum, gradient.ErrBadMetric}, "10086", -1, "metric", 0, 0},
		{"bad_rule_kind.json", `bad_rule_kind.json: promotion "10086": kind "tiered" is not one of "threshold", "parity_price", "parity_discount"`,
			[]error{rules.ErrEnum}, "10086", -1, "kind", 0, 0},
		{"duplicate_promotion.json", `duplicate_promotion.json: promotion "10086": id "10086" is also the id of promotions[0] (ids must be unique in a file)`,
			[]error{rules.ErrDuplicatePromotion}, "10086", -1, "id", 0, 0},
		{"zero_minor_digits.json", `zero_minor_digits.json: promotion "10086": minor_digits 0 is ambiguous: write -1 for a currency without minor units (JPY), or leave it out for 2`,
			[]error{rules.ErrType, score.ErrMinorDigits}, "10086", -1, "minor_digits", 0, 0},
		{"minor_digits_below_none.json", `minor_digits_below_none.json: promotion "10086": minor_digits -2 is outside 1..9 (-1 for none, absent for 2)`,
			[]error{rules.ErrType, score.ErrMinorDigits}, "10086", -1, "minor_digits", 0, 0},
		{"wrong_type.json", `wrong_type.json: promotion "10086": minor_digits: expected an integer, got string`,
			[]error{rules.ErrType}, "10086", -1, "minor_digits", 0, 0},
		{"bad_gift.json", `bad_gift.json: promotion "10086" tier 0 (id "t1"): gifts[1]: qty 0 must be in 1..1000`,
			[]error{gradient.ErrBadGift}, "10086", 0, "gifts[1]", 0, 0},
		{"bad_id.json", `bad_id.json: promotion "100 86": id: "100 86" contains whitespace`,
			[]error{gradient.ErrBadID}, "100 86", -1, "id", 0, 0},
		{"bad_version.json", `bad_version.json: version 2 is not supported (this reader knows version 1)`,
			[]error{rules.ErrVersion}, "", -1, "version", 0, 0},
		{"no_promotions.json", `no_promotions.json: promotions: the file has no promotions`,
			[]error{rules.ErrEmpty}, "", -1, "promotions", 0, 0},
		{"syntax_error.json", `syntax_error.json:7:5: JSON syntax error: invalid character '}' looking for beginning of object key string`,
			[]error{rules.ErrSyntax}, "", -1, "", 7, 5},
		{"trailing_garbage.json", `trailing_garbage.json:2:1: JSON syntax error: invalid character '{' after top-level value`,
			[]error{rules.ErrSyntax}, "", -1, "", 2, 1},
		{"truncated.json", `truncated.json:5:1: JSON syntax error: unexpected end of JSON input`,
			[]error{rules.ErrSyntax}, "", -1, "", 5, 1},
		// Duplicate keys at every level: encoding/json keeps the last one,
		// so a second "promotions" list would replace the first (and a
		// -prune delete what it left out).
		{"dup_key_top.json", `dup_key_top.json:19:2: duplicate key "promotions" at promotions (first given at line 3, column 2): a file must say each thing once`,
			[]error{rules.ErrDuplicateKey}, "", -1, "promotions", 19, 2},
		{"dup_key_promotion.json", `dup_key_promotion.json:7:6: duplicate key "metric" at promotions[0].metric (first given at line 6, column 6): a file must say each thing once`,
			[]error{rules.ErrDuplicateKey}, "", -1, "promotions[0].metric", 7, 6},
		{"dup_key_tier.json", `dup_key_tier.json:12:10: duplicate key "threshold" at promotions[0].tiers[0].threshold (first given at line 11, column 10): a file must say each thing once`,
			[]error{rules.ErrDuplicateKey}, "", -1, "promotions[0].tiers[0].threshold", 12, 10},
		{"dup_key_reward.json", `dup_key_reward.json:12:62: duplicate key "amount" at promotions[0].tiers[0].reward.amount (first given at line 12, column 43): a file must say each thing once`,
			[]error{rules.ErrDuplicateKey}, "", -1, "promotions[0].tiers[0].reward.amount", 12, 62},
		{"dup_key_gift.json", `dup_key_gift.json:13:65: duplicate key "qty" at promotions[0].tiers[0].gifts[0].qty (first given at line 13, column 35): a file must say each thing once`,
			[]error{rules.ErrDuplicateKey}, "", -1, "promotions[0].tiers[0].gifts[0].qty", 13, 65},
		// encoding/json matches keys case-insensitively: "ID" is "id".
		{"dup_key_case.json", `dup_key_case.json:6:6: duplicate key "ID" at promotions[0].ID (first given at line 5, column 6): a file must say each thing once`,
			[]error{rules.ErrDuplicateKey}, "", -1, "promotions[0].ID", 6, 6},
		// Invalid UTF-8 anywhere (encoding/json would read U+FFFD).
		{"utf8_gift_name.json", `utf8_gift_name.json:13:59: byte 0xff in a string at promotions[0].tiers[0].gifts[0].name is not UTF-8 (save the file as UTF-8)`,
			[]error{rules.ErrEncoding}, "", -1, "promotions[0].tiers[0].gifts[0].name", 13, 59},
		{"utf8_id.json", `utf8_id.json:5:16: byte 0xc3 in a string at promotions[0].id is not UTF-8 (save the file as UTF-8)`,
			[]error{rules.ErrEncoding}, "", -1, "promotions[0].id", 5, 16},
		{"utf8_key.json", `utf8_key.json:7:13: byte 0xe2 in a string at promotions[0] is not UTF-8 (save the file as UTF-8)`,
			[]error{rules.ErrEncoding}, "", -1, "promotions[0]", 7, 13},
		{"utf8_surrogate.json", `utf8_surrogate.json:13:59: the escaped code point U+D800 at promotions[0].tiers[0].gifts[0].name is a lone UTF-16 surrogate, not a character`,
			[]error{rules.ErrEncoding}, "", -1, "promotions[0].tiers[0].gifts[0].name", 13, 59},
		// Over-long values are refused with a short quote.
		{"long_number.json", `long_number.json:11:23: a string of 200001 bytes is longer than the 4096 a rules file allows: "1000000000000000000000000000000000000000…`,
			[]error{score.ErrTooLong}, "", -1, "", 11, 23},
		{"long_bare_number.json", `long_bare_number.json:11:23: a number of 200001 bytes is longer than the 40 a rules file allows: 10000000000000000000000000000000000000000…`,
			[]error{score.ErrTooLong}, "", -1, "", 11, 23},
		{"long_metric.json", `long_metric.json:6:16: a string of 200000 bytes is longer than the 4096 a rules file allows: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…`,
			[]error{score.ErrTooLong}, "", -1, "", 6, 16},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "bad", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(tests) {
		t.Errorf("testdata/bad holds %d files, the table covers %d: keep them in step", len(files), len(tests))
	}
	for _, tc := range tests {
		t.Run(strings.TrimSuffix(tc.file, ".json"), func(t *testing.T) {
			t.Parallel()
			path := filepath.Join("testdata", "bad", tc.file)
			promos, err := rules.ParseFile(path, rules.Options{})
			if promos != nil {
				t.Errorf("got %d promotions, want none", len(promos))
			}
			if err == nil {
				t.Fatal("no error")
			}
			if want := filepath.Join("testdata", "bad", tc.msg); err.Error() != want {
				t.Errorf("message\n got: %s\nwant: %s", err.Error(), want)
			}
			var re *rules.Error
			if !errors.As(err, &re) {
				t.Fatalf("error %T is not a *rules.Error", err)
			}
			if !errors.Is(err, rules.ErrInvalid) {
				t.Error("does not match rules.ErrInvalid")
			}
			for _, s := range tc.is {
				if !errors.Is(err, s) {
					t.Errorf("does not match %v", s)
				}
			}
			if re.File != path || re.Promotion != tc.promo || re.TierIndex != tc.tier || re.Field != tc.field || re.Line != tc.line || re.Column != tc.column {
				t.Errorf("error fields = file %q promo %q tier %d field %q at %d:%d, want %q %q %d %q at %d:%d",
					re.File, re.Promotion, re.TierIndex, re.Field, re.Line, re.Column,
					path, tc.promo, tc.tier, tc.field, tc.line, tc.column)
			}
		})
	}
}

// TestValidationErrorReachable: a check done by gradient comes back as the
// *gradient.ValidationError itself, reachable with errors.As.
func TestValidationErrorReachable(t *testing.T) {
	t.Parallel()
	_, err := rules.ParseFile(filepath.Join("testdata", "bad", "duplicate_threshold.json"), rules.Options{})
	var ve *gradient.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("%v: no *gradient.ValidationError inside", err)
	}
	if ve.Promotion != "10086" || ve.TierIndex != 1 || ve.Field != "threshold" {
		t.Errorf("ValidationError = %+v", ve)
	}
}

func TestParseOversize(t *testing.T) {
	sample, err := os.ReadFile(filepath.Join("..", "examples", "rules.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		run  func() ([]gradient.Promotion, error)
		msg  string
	}{
		{"reader over a small cap", func() ([]gradient.Promotion, error) {
			return rules.Parse(bytes.NewReader(sample), "rules.json", rules.Options{MaxBytes: 100})
		}, "rules.json: input is larger than the 100-byte limit (more than that was read)"},
		{"file over a small cap is refused from its size", func() ([]gradient.Promotion, error) {
			return rules.ParseFile(filepath.Join("..", "examples", "rules.json"), rules.Options{MaxBytes: 100})
		}, filepath.Join("..", "examples", "rules.json") + ": input is larger than the 100-byte limit (" + itoa(len(sample)) + " bytes)"},
		{"endless reader over the default cap", func() ([]gradient.Promotion, error) {
			return rules.Parse(&endless{}, "pipe", rules.Options{})
		}, "pipe: input is larger than the 33554432-byte limit (more than that was read)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			promos, err := tc.run()
			if promos != nil || err == nil {
				t.Fatalf("got %d promotions, err %v", len(promos), err)
			}
			if err.Error() != tc.msg {
				t.Errorf("message\n got: %s\nwant: %s", err, tc.msg)
			}
			if !errors.Is(err, rules.ErrTooLarge) {
				t.Errorf("%v does not match ErrTooLarge", err)
			}
		})
	}
	// At exactly the cap the same input parses.
	if _, err := rules.Parse(bytes.NewReader(sample), "rules.json", rules.Options{MaxBytes: int64(len(sample))}); err != nil {
		t.Errorf("at the cap: %v", err)
	}
}

// endless yields '[' forever and counts what was read, to prove Parse
// stops at the cap instead of reading (or parsing) everything.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '['
	}
	e.n += int64(len(p))
	if e.n > 1<<30 {
		return 0, io.ErrUnexpectedEOF
	}
	return len(p), nil
}

func itoa(n int) string { return decimal.NewFromInt(int64(n)).String() }

// TestParseSeveralErrors: problems in different promotions are all reported.
func TestParseSeveralErrors(t *testing.T) {
	t.Parallel()
	in := `{"version":1,"promotions":[
 {"id":"a","metric":"amount","minor_digits":2,"tiers":[{"id":"t","threshold":"1.001","reward":{"kind":"amount_off","amount":"1"}}]},
 {"id":"b","metric":"litres","minor_digits":2,"tiers":[{"id":"t","threshold":"1","reward":{"kind":"amount_off","amount":"1"}}]},
 {"id":"c","metric":"amount","minor_digits":2,"tiers":[{"id":"t","threshold":"1","reward":{"kind":"amount_off","amount":"1"}}]}]}`
	_, err := rules.Parse(strings.NewReader(in), "multi.json", rules.Options{})
	want := `multi.json: promotion "a" tier 0 (id "t"): threshold "1.001" has 3 fractional digits, currency allows 2` + "\n" +
		`multi.json: promotion "b": metric "litres" is neither "quantity" nor "amount"`
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
	_, err = rules.Parse(strings.NewReader(in), "multi.json", rules.Options{MaxErrors: 1})
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("MaxErrors 1: %v", err)
	}
}

// TestParseExact: numbers given as JSON numbers or strings are read from
// their text: values float64 cannot hold come through digit for digit.
func TestParseExact(t *testing.T) {
	t.Parallel()
	in := `{"version":1,"promotions":[{"id":"p","metric":"amount","minor_digits":2,"tiers":[
 {"id":"a","threshold":9007199254740.99,"reward":{"kind":"amount_off","amount":0.1}},
 {"id":"b","threshold":"0.30","reward":{"kind":"percent_off","percent":12.3456}},
 {"id":"c","threshold":"199.990","reward":{"kind":"every_n","step":100,"amount":"10","cap":50}}]}]}`
	promos, err := rules.Parse(strings.NewReader(in), "exact.json", rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tiers := promos[0].Tiers
	checks := []struct {
		name      string
		got, want decimal.Decimal
	}{
		{"a threshold", tiers[0].Threshold, decimal.RequireFromString("9007199254740.99")},
		{"a amount", tiers[0].Reward.Amount, decimal.RequireFromString("0.1")},
		{"b threshold", tiers[1].Threshold, decimal.RequireFromString("0.3")},
		{"b percent", tiers[1].Reward.Percent, decimal.RequireFromString("12.3456")},
		{"c threshold", tiers[2].Threshold, decimal.RequireFromString("199.99")},
		{"c step", tiers[2].Reward.Step, decimal.NewFromInt(100)},
		{"c cap", tiers[2].Reward.Cap, decimal.NewFromInt(50)},
	}
	for _, c := range checks {
		if !c.got.Equal(c.want) {
			t.Errorf("%s = %s, want %s", c.name, c.got, c.want)
		}
	}
	if s, err := promos[0].ScoreOf(&tiers[0]); err != nil || s != 900719925474099 {
		t.Errorf("score of a = %d, %v; want 900719925474099", s, err)
	}
}

// TestParseSample: the shipped sample parses into what it says.
func TestParseSample(t *testing.T) {
	t.Parallel()
	promos, err := rules.ParseFile(filepath.Join("..", "examples", "rules.json"), rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]gradient.Promotion{}
	for _, p := range promos {
		byID[p.ID] = p
	}
	want := []struct {
		id     string
		metric gradient.Metric
		kind   gradient.RuleKind
		digits int
		tiers  int
	}{
		{"qty-3-5-10", gradient.Quantity, gradient.Threshold, 2, 3},
		{"10086", gradient.Amount, gradient.Threshold, 2, 2},
		{"every-100-10", gradient.Amount, gradient.Threshold, 2, 1},
		{"bundle-2-for-30", gradient.Quantity, gradient.Threshold, 2, 2},
		{"parity-odd-even", gradient.Quantity, gradient.ParityDiscount, 2, 2},
		{"jp-5000", gradient.Amount, gradient.Threshold, gradient.NoMinorDigits, 2},
	}
	if len(promos) != len(want) {
		t.Errorf("%d promotions, want %d", len(promos), len(want))
	}
	for _, w := range want {
		p, ok := byID[w.id]
		if !ok {
			t.Errorf("promotion %q missing", w.id)
			continue
		}
		if p.Metric != w.metric || p.Kind != w.kind || p.MinorDigits != w.digits || len(p.Tiers) != w.tiers {
			t.Errorf("%s: metric %v kind %v digits %d tiers %d", w.id, p.Metric, p.Kind, p.MinorDigits, len(p.Tiers))
		}
	}
	// Spot-check the matcher on the sample: 7 items hit "buy 5", 3 short of "buy 10".
	m, err := gradient.NewMatcher(byID["qty-3-5-10"])
	if err != nil {
		t.Fatal(err)
	}
	h, err := m.Match(decimal.NewFromInt(7))
	if err != nil || h.Tier.ID != "buy5" || h.Next.ID != "buy10" || !h.Shortfall.Equal(decimal.NewFromInt(3)) {
		t.Errorf("match 7: %+v, %v", h, err)
	}
	g := byID["10086"].Tiers[1].Gifts
	if len(g) != 2 || g[1].SKU != "MUG-02" || g[1].Qty != 2 || g[1].Name != "陶瓷马克杯" {
		t.Errorf("10086 t2 gifts = %+v", g)
	}
	if end := byID["jp-5000"].End; end.UTC().Format("2006-01-02T15:04:05Z") != "2029-12-31T14:59:59Z" {
		t.Errorf("jp-5000 end = %v", end)
	}
}

// BenchmarkParseRefusesLongNumber: a file whose threshold is a 200 kB
// number. The number itself is refused by its length before any decimal
// parsing; the time is the JSON passes over the 200 kB file.
func BenchmarkParseRefusesLongNumber(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "bad", "long_number.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := rules.Parse(bytes.NewReader(data), "long_number.json", rules.Options{}); !errors.Is(err, score.ErrTooLong) {
			b.Fatal(err)
		}
	}
}

// TestParseRevision: a promotion's revision is read as given, 0 when
// absent (unordered), and a negative or fractional one is refused with
// the promotion and field named.
func TestParseRevision(t *testing.T) {
	t.Parallel()
	doc := func(rev string) string {
		field := ""
		if rev != "" {
			field = `"revision": ` + rev + `,`
		}
		return `{"version": 1, "promotions": [{"id": "p", "metric": "quantity", "minor_digits": 2, ` + field +
			`"tiers": [{"id": "t", "threshold": 3, "reward": {"kind": "percent_off", "percent": "10"}}]}]}`
	}
	tests := []struct {
		rev   string
		want  int64
		field string // the refused field, "" when accepted
	}{
		{"", 0, ""},
		{"0", 0, ""},
		{"42", 42, ""},
		{"9007199254740993", 9007199254740993, ""},
		{"-1", 0, "revision"},
		{"1.5", 0, "revision"},
	}
	for _, tt := range tests {
		t.Run("rev="+tt.rev, func(t *testing.T) {
			t.Parallel()
			ps, err := rules.Parse(strings.NewReader(doc(tt.rev)), "r.json", rules.Options{})
			if tt.field == "" {
				if err != nil || len(ps) != 1 || ps[0].Revision != tt.want {
					t.Fatalf("Parse: %+v %v, want revision %d", ps, err, tt.want)
				}
				return
			}
			var re *rules.Error
			if err == nil || len(ps) != 0 || !errors.As(err, &re) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Parse = %+v %v, want a *rules.Error naming %q", ps, err, tt.field)
			}
		})
	}
}

// TestParseMinorDigits: minor_digits reads as gradient.Promotion's
// MinorDigits does: absent is the default (two digits), -1 none, 1..9
// that many; the amounts are checked against the digits it stands for.
func TestParseMinorDigits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, field, threshold string
		want                   int
		wantErr                error
	}{
		{"absent is two", ``, `"99.99"`, 0, nil},
		{"absent refuses three", ``, `"99.999"`, 0, gradient.ErrThreshold},
		{"none", `"minor_digits":-1,`, `5000`, gradient.NoMinorDigits, nil},
		{"none refuses a fraction", `"minor_digits":-1,`, `"5000.5"`, 0, gradient.ErrThreshold},
		{"three", `"minor_digits":3,`, `"1.234"`, 3, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := `{"version":1,"promotions":[{"id":"p","metric":"amount",` + tc.field + `"tiers":[
 {"id":"a","threshold":` + tc.threshold + `,"reward":{"kind":"amount_off","amount":1}}]}]}`
			promos, err := rules.Parse(strings.NewReader(in), "digits.json", rules.Options{})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := promos[0].MinorDigits; got != tc.want {
				t.Fatalf("MinorDigits %d, want %d", got, tc.want)
			}
		})
	}
}
