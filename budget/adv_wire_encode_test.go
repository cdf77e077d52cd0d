package budget

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestAdvWireEncodeRandom: encode is byte for byte encoding/json's on
// random bodies drawn from plain and escaped text alike (a record an
// earlier release wrote is compared with the same cart sent again).
func TestAdvWireEncodeRandom(t *testing.T) {
	alphabet := []string{"a", "Z", "0", " ", "-", "_", ".", "=", "@", ":", "{", "}", "\"", "\\", "<", ">", "&", "'",
		"/", "~", "\x7f", "é", "\u2028", "\u2029", "顧", "\U0001F600", "\ufffd", "\x00", "\t", "\n", "\xff"}
	for _, tc := range []struct {
		name  string
		plain bool // only printable ASCII the plain path takes
	}{{"plain alphabet", true}, {"every character", false}} {
		t.Run(tc.name, func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(7, 8))
			letters := alphabet
			if tc.plain {
				letters = []string{"a", "Z", "0", " ", "-", "_", ".", "=", "@", ":", "{", "}", "'", "/", "~"}
			}
			text := func() string {
				var b strings.Builder
				for range 1 + rnd.IntN(12) {
					b.WriteString(letters[rnd.IntN(len(letters))])
				}
				return b.String()
			}
			plainSeen := 0
			for range 5000 {
				var bd body
				if n := rnd.IntN(4); n > 0 {
					bd.A = map[string]string{}
					for range n {
						bd.A[text()] = text()
					}
				}
				for range 1 + rnd.IntN(4) {
					bd.L = append(bd.L, Line{Promotion: text(), Uses: rnd.Int64N(MaxAmount + 1), Amount: rnd.Int64N(3) * rnd.Int64N(MaxAmount+1)})
				}
				want, err := json.Marshal(bd)
				if err != nil {
					t.Fatal(err)
				}
				if got := bd.encode(); got != string(want) {
					t.Fatalf("encode %#v = %s, encoding/json %s", bd, got, want)
				}
				if _, ok := bd.plain(); ok {
					plainSeen++
				}
			}
			if tc.plain && plainSeen != 5000 {
				t.Errorf("%d of 5000 plain bodies took the plain path", plainSeen)
			}
		})
	}
}
