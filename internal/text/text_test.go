package text_test

import (
	"strings"
	"testing"

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
