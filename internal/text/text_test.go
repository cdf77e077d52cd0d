package text_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/text"
)

func TestEscape(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"plain text 1.5", "plain text 1.5"},
		{"Tote bag 托特包", "Tote bag 托特包"},
		{"a\x1b[2Jb", `a\x1b[2Jb`},
		{"line\r\nforged", `line\r\nforged`},
		{"tab\there", `tab\there`},
		{"bell\x07", `bell\a`},
		{"del\x7f", `del\x7f`},
		{"c1\u009b", `c1\u009b`},
		{"bidi\u202eevil", `bidi\u202eevil`},
		{"bad\xffbyte", `bad\xffbyte`},
		{`back\slash`, `back\slash`},
		{`quoted "a\"b"`, `quoted "a\"b"`},
	}
	for _, c := range cases {
		if got := text.Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := text.EscapeLines("one\x1b\ntwo\r"); got != "one\\x1b\ntwo\\r" {
		t.Errorf("EscapeLines = %q", got)
	}
}

func TestQuote(t *testing.T) {
	t.Parallel()
	if got := text.Quote("short"); got != `"short"` {
		t.Errorf("Quote(short) = %s", got)
	}
	long := strings.Repeat("é", 100) // 200 bytes, cut on a rune boundary
	got := text.Quote(long)
	if want := `"` + strings.Repeat("é", 20) + `"… (200 bytes)`; got != want {
		t.Errorf("Quote(long) = %s, want %s", got, want)
	}
}

// Duration prints at most two units, and ParseDuration reads back what
// it prints (to the printed precision).
func TestDuration(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{1500 * time.Microsecond, "2ms"},
		{850 * time.Millisecond, "850ms"},
		{4260 * time.Millisecond, "4.3s"},
		{59960 * time.Millisecond, "1m"},
		{4*time.Minute + 12*time.Second, "4m12s"},
		{59*time.Minute + 59*time.Second + 600*time.Millisecond, "1h"},
		{3*time.Hour + 5*time.Minute, "3h5m"},
		{47*time.Hour + 59*time.Minute + 50*time.Second, "2d"},
		{60748*time.Hour + 23*time.Minute + 4026*time.Millisecond, "2531d4h"},
		{-90 * time.Second, "-1m30s"},
		{time.Duration(math.MaxInt64), "106751d23h"},
		{time.Duration(math.MinInt64), "-106751d23h"},
	}
	for _, tc := range cases {
		got := text.Duration(tc.in)
		if got != tc.want {
			t.Errorf("Duration(%v) = %q, want %q", tc.in, got, tc.want)
			continue
		}
		back, err := text.ParseDuration(got)
		if err != nil {
			t.Errorf("ParseDuration(%q): %v", got, err)
			continue
		}
		if diff := (back - tc.in).Abs(); diff > time.Hour/2 && diff > tc.in.Abs()/50 {
			t.Errorf("ParseDuration(Duration(%v)) = %v, off by %v", tc.in, back, diff)
		}
	}
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"90s", 90 * time.Second, false},
		{"2h", 2 * time.Hour, false},
		{"3d", 3 * text.Day, false},
		{"2d4h", 2*text.Day + 4*time.Hour, false},
		{"1.5d", 36 * time.Hour, false},
		{"-1d", -text.Day, false},
		{"d", 0, true},
		{"1d-4h", 0, true},
		{"1e3d", 0, true},
		{"NaNd", 0, true},
		{"infd", 0, true},
		{"200000d", 0, true},
		{"4x", 0, true},
	}
	for _, tc := range cases {
		got, err := text.ParseDuration(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
