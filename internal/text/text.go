// Package text quotes outside input for error messages and escapes text
// for a terminal, so neither a huge input nor a control byte reaches
// what a person reads.
package text

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// QuoteMax is how many bytes of an input Quote shows.
const QuoteMax = 40

// Quote is QuoteLimit(s, QuoteMax), for values such as numbers and names.
func Quote(s string) string { return QuoteLimit(s, QuoteMax) }

// QuoteLimit is strconv.Quote of at most max bytes of s (cut on a rune
// boundary), followed by "…" and the full length when s was cut. It reads
// only the bytes it shows, so quoting a 200 kB input costs what quoting
// max bytes does.
func QuoteLimit(s string, max int) string {
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// Escape makes s safe to print on a terminal: control characters (C0, DEL,
// C1; CR, LF and TAB included), Unicode format characters (bidi overrides
// and the like) and bytes that are not UTF-8 are written as Go escapes
// (\r, \x1b, \u202e); everything else is kept, backslashes included, so
// ordinary text (and text already quoted by strconv.Quote) reads
// unchanged.
func Escape(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case needsEscape(r):
			q := strconv.QuoteRune(r) // 'x' with the escape inside
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// EscapeLines is Escape for a message whose line breaks are meant (joined
// errors): each line is escaped on its own and the LFs between them kept.
func EscapeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Escape(l)
	}
	return strings.Join(lines, "\n")
}

func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || c >= 0x80 {
			return false
		}
	}
	return true
}

func needsEscape(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) ||
		r == '\u2028' || r == '\u2029'
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}
