package score_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/score"
)

func TestCheckTheTwoTo53Rule(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      int64
		wantErr error
	}{
		{0, nil},
		{1, nil},
		{score.MaxExact, nil},
		{-score.MaxExact, nil},
		{score.MaxExact + 1, score.ErrOutOfRange},
		{-score.MaxExact - 1, score.ErrOutOfRange},
		{math.MaxInt64, score.ErrOutOfRange},
		{math.MinInt64, score.ErrOutOfRange},
	}
	for _, c := range cases {
		got, err := score.Check(c.in)
		if !errors.Is(err, c.wantErr) {
			t.Errorf("Check(%d) err = %v, want %v", c.in, err, c.wantErr)
		}
		if err == nil && got != c.in {
			t.Errorf("Check(%d) = %d", c.in, got)
		}
	}
}

func TestEveryAcceptedScoreRoundTripsThroughFloat64(t *testing.T) {
	t.Parallel()
	// The 2^53 rule exists because Redis stores scores as doubles: every
	// value Check accepts must survive float64 and come back equal.
	for _, s := range []int64{0, 1, 99, 9999, 1 << 40, score.MaxExact - 1, score.MaxExact, -score.MaxExact} {
		back, err := score.ParseFloat(float64(s))
		if err != nil || back != s {
			t.Errorf("ParseFloat(float64(%d)) = %d, %v", s, back, err)
		}
	}
	// Just past the bound, doubles start skipping integers.
	if float64(score.MaxExact+1) != float64(score.MaxExact) {
		t.Fatal("expected 2^53+1 to collapse onto 2^53 as a double")
	}
}

func TestCount(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      int64
		want    int64
		wantErr error
	}{
		{0, 0, nil},
		{3, 3, nil},
		{score.MaxExact, score.MaxExact, nil},
		{-1, 0, score.ErrNegative},
		{score.MaxExact + 1, 0, score.ErrOutOfRange},
	}
	for _, c := range cases {
		got, err := score.Count(c.in)
		if !errors.Is(err, c.wantErr) || got != c.want {
			t.Errorf("Count(%d) = %d, %v; want %d, %v", c.in, got, err, c.want, c.wantErr)
		}
	}
}

func TestAmountIsExactOrRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		digits  int
		want    int64
		wantErr error
	}{
		{"99.99", 2, 9999, nil},
		{"99.9", 2, 9990, nil},
		{"100", 2, 10000, nil},
		{"0", 2, 0, nil},
		{"0.01", 2, 1, nil},
		{"1000", 0, 1000, nil},    // JPY
		{"12.345", 3, 12345, nil}, // KWD
		{"99.999", 2, 0, score.ErrTooPrecise},
		{"0.001", 2, 0, score.ErrTooPrecise},
		{"1.5", 0, 0, score.ErrTooPrecise},
		{"-0.01", 2, 0, score.ErrNegative},
		{"90071992547409.92", 2, score.MaxExact, nil},
		{"90071992547409.93", 2, 0, score.ErrOutOfRange},
		{"1e30", 2, 0, score.ErrOutOfRange},
		{"1", -1, 0, score.ErrMinorDigits},
		{"1", score.MaxMinorDigits + 1, 0, score.ErrMinorDigits},
		{"99.990000", 2, 9999, nil}, // trailing zeros are not extra precision
	}
	for _, c := range cases {
		got, err := score.Amount(decimal.RequireFromString(c.in), c.digits)
		if !errors.Is(err, c.wantErr) || got != c.want {
			t.Errorf("Amount(%s, %d) = %d, %v; want %d, %v", c.in, c.digits, got, err, c.want, c.wantErr)
		}
	}
}

func TestAmountFloorMatchesLargestThresholdAtOrBelow(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in     string
		digits int
		want   int64
	}{
		{"99.99", 2, 9999},
		{"99.999", 2, 9999},
		{"99.98999999", 2, 9998},
		{"0.009", 2, 0},
		{"1.9", 0, 1},
	}
	for _, c := range cases {
		got, err := score.AmountFloor(decimal.RequireFromString(c.in), c.digits)
		if err != nil || got != c.want {
			t.Errorf("AmountFloor(%s) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	if _, err := score.AmountFloor(decimal.RequireFromString("-0.01"), 2); !errors.Is(err, score.ErrNegative) {
		t.Errorf("negative query: %v", err)
	}
	if _, err := score.AmountFloor(decimal.RequireFromString("1e20"), 2); !errors.Is(err, score.ErrOutOfRange) {
		t.Errorf("huge query: %v", err)
	}
}

func TestParseAmount(t *testing.T) {
	t.Parallel()
	if got, err := score.ParseAmount(" 99.99 ", 2); err != nil || got != 9999 {
		t.Errorf("ParseAmount = %d, %v", got, err)
	}
	for _, bad := range []string{"", "abc", "1.2.3", "0x10", "NaN"} {
		if _, err := score.ParseAmount(bad, 2); !errors.Is(err, score.ErrMalformed) {
			t.Errorf("ParseAmount(%q) err = %v, want ErrMalformed", bad, err)
		}
	}
	if d := score.MinorToAmount(9999, 2); !d.Equal(decimal.RequireFromString("99.99")) {
		t.Errorf("MinorToAmount = %s", d)
	}
}

func TestBounds(t *testing.T) {
	t.Parallel()
	if got := score.Inclusive(9999); got != "9999" {
		t.Errorf("Inclusive = %q", got)
	}
	if got := score.Exclusive(9999); got != "(9999" {
		t.Errorf("Exclusive = %q", got)
	}
	if score.NegInf != "-inf" || score.PosInf != "+inf" {
		t.Error("infinity bounds changed")
	}
}

func TestParseScoresReadBack(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      any
		want    int64
		wantErr error
	}{
		{float64(42), 42, nil},
		{"42", 42, nil},
		{[]byte("42"), 42, nil},
		{"4.2e1", 42, nil},
		{"-7", -7, nil},
		{"9007199254740992", score.MaxExact, nil},
		{int64(5), 5, nil},
		{"9007199254740993", 0, score.ErrOutOfRange},
		{42.5, 0, score.ErrNotInteger},
		{"42.5", 0, score.ErrNotInteger},
		{math.NaN(), 0, score.ErrNotInteger},
		{math.Inf(1), 0, score.ErrNotInteger},
		{"inf", 0, score.ErrNotInteger},
		{"-inf", 0, score.ErrNotInteger},
		{"nan", 0, score.ErrNotInteger},
		{"0x10", 0, score.ErrMalformed},
		{"", 0, score.ErrMalformed},
		{"12abc", 0, score.ErrMalformed},
		{1e300, 0, score.ErrOutOfRange},
		{struct{}{}, 0, score.ErrMalformed},
	}
	for _, c := range cases {
		got, err := score.Parse(c.in)
		if !errors.Is(err, c.wantErr) || got != c.want {
			t.Errorf("Parse(%v) = %d, %v; want %d, %v", c.in, got, err, c.want, c.wantErr)
		}
	}
}

func TestTimeCodecDefault(t *testing.T) {
	t.Parallel()
	var c score.TimeCodec
	if c.Bits() != 10 || c.MaxSeq() != 1023 || c.EpochMs() != 0 {
		t.Fatalf("zero codec: bits %d maxseq %d epoch %d", c.Bits(), c.MaxSeq(), c.EpochMs())
	}
	if y := c.MaxTime().UTC().Year(); y != 2248 {
		t.Errorf("default MaxTime year = %d, want 2248", y)
	}
	at := time.Date(2026, 12, 1, 8, 0, 0, 123_000_000, time.UTC)
	s, err := c.EncodeTime(at, 7)
	if err != nil {
		t.Fatal(err)
	}
	if want := at.UnixMilli()<<10 | 7; s != want {
		t.Errorf("EncodeTime = %d, want %d", s, want)
	}
	back, seq, err := c.DecodeTime(s)
	if err != nil || !back.Equal(at) || seq != 7 {
		t.Errorf("DecodeTime = %v, %d, %v", back, seq, err)
	}
	bound, err := c.DueBound(at.UnixMilli())
	if err != nil || bound != at.UnixMilli()<<10|1023 {
		t.Errorf("DueBound = %d, %v", bound, err)
	}
}

func TestTimeCodecOrdersByTimeThenSeq(t *testing.T) {
	t.Parallel()
	var c score.TimeCodec
	ms := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	prev := int64(-1)
	for _, p := range []struct{ ms, seq int64 }{{ms, 0}, {ms, 1}, {ms, 1023}, {ms + 1, 0}, {ms + 1, 5}, {ms + 2, 0}} {
		s, err := c.Encode(p.ms, p.seq)
		if err != nil {
			t.Fatal(err)
		}
		if s <= prev {
			t.Errorf("(%d,%d) -> %d not after %d", p.ms, p.seq, s, prev)
		}
		prev = s
	}
	// Everything due at or before ms sorts at or below DueBound(ms); the
	// next millisecond sorts above it.
	b, _ := c.DueBound(ms)
	last, _ := c.Encode(ms, c.MaxSeq())
	next, _ := c.Encode(ms+1, 0)
	if !(last <= b && next > b) {
		t.Errorf("bound %d, last %d, next %d", b, last, next)
	}
}

func TestTimeCodecRange(t *testing.T) {
	t.Parallel()
	epoch := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		bits    uint
		unixMs  func(c score.TimeCodec) int64
		seq     int64
		wantErr error
	}{
		{"at epoch", 10, func(c score.TimeCodec) int64 { return epoch.UnixMilli() }, 0, nil},
		{"before epoch", 10, func(c score.TimeCodec) int64 { return epoch.UnixMilli() - 1 }, 0, score.ErrBeforeEpoch},
		{"max time, max seq", 10, func(c score.TimeCodec) int64 { return c.MaxTime().UnixMilli() }, 1023, nil},
		{"past max time", 10, func(c score.TimeCodec) int64 { return c.MaxTime().UnixMilli() + 1 }, 0, score.ErrOutOfRange},
		{"seq too big", 10, func(c score.TimeCodec) int64 { return epoch.UnixMilli() }, 1024, score.ErrSeqRange},
		{"seq negative", 10, func(c score.TimeCodec) int64 { return epoch.UnixMilli() }, -1, score.ErrSeqRange},
		{"zero bits", 0, func(c score.TimeCodec) int64 { return epoch.UnixMilli() + 5 }, 0, nil},
		{"zero bits seq", 0, func(c score.TimeCodec) int64 { return epoch.UnixMilli() + 5 }, 1, score.ErrSeqRange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := score.NewTimeCodec(epoch, tc.bits)
			if err != nil {
				t.Fatal(err)
			}
			ms := tc.unixMs(c)
			s, err := c.Encode(ms, tc.seq)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Encode err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if s > score.MaxExact || s < 0 {
				t.Fatalf("score %d outside [0, 2^53]", s)
			}
			gotMs, gotSeq, err := c.Decode(s)
			if err != nil || gotMs != ms || gotSeq != tc.seq {
				t.Fatalf("Decode = %d, %d, %v; want %d, %d", gotMs, gotSeq, err, ms, tc.seq)
			}
		})
	}
	if _, err := score.NewTimeCodec(epoch, score.MaxSeqBits+1); !errors.Is(err, score.ErrBits) {
		t.Errorf("too many bits: %v", err)
	}
	var c score.TimeCodec
	if _, _, err := c.Decode(-1); !errors.Is(err, score.ErrBeforeEpoch) {
		t.Errorf("Decode(-1): %v", err)
	}
	if _, _, err := c.Decode(score.MaxExact + 1); !errors.Is(err, score.ErrOutOfRange) {
		t.Errorf("Decode(2^53+1): %v", err)
	}
}

func FuzzTimeCodecRoundTrip(f *testing.F) {
	f.Add(int64(1764576000000), int64(0))
	f.Add(int64(0), int64(1023))
	f.Fuzz(func(t *testing.T, ms, seq int64) {
		var c score.TimeCodec
		s, err := c.Encode(ms, seq)
		if err != nil {
			return
		}
		if s < 0 || s > score.MaxExact {
			t.Fatalf("score %d out of range", s)
		}
		if back, _ := score.ParseFloat(float64(s)); back != s {
			t.Fatalf("score %d not exact as a double", s)
		}
		gotMs, gotSeq, err := c.Decode(s)
		if err != nil || gotMs != ms || gotSeq != seq {
			t.Fatalf("round trip (%d,%d) -> %d -> (%d,%d) %v", ms, seq, s, gotMs, gotSeq, err)
		}
	})
}
