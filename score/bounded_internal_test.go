package score

import (
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

// TestCoefWordsMatchesCoefficient pins the in-place read in coefWords to
// what decimal's own (copying) accessor says.
func TestCoefWordsMatchesCoefficient(t *testing.T) {
	t.Parallel()
	if !layout.ok {
		t.Fatal("decimal.Decimal or big.Int changed layout; coefWords falls back to copying")
	}
	for _, s := range []string{"0", "1", "-1", "99.99", "18446744073709551615", "18446744073709551616", "-" + strings.Repeat("9", 80), strings.Repeat("7", 5000)} {
		d := decimal.RequireFromString(s)
		want := (d.Coefficient().BitLen() + 63) / 64
		if got := coefWords(d); got != want {
			t.Errorf("coefWords(%.30s) = %d, want %d", s, got, want)
		}
	}
	if got := coefWords(decimal.Decimal{}); got != 0 {
		t.Errorf("coefWords(zero value) = %d", got)
	}
}
