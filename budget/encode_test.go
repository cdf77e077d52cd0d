package budget

import (
	"encoding/json"
	"testing"
)

// TestEncodeAsJSON: a request's req is byte for byte what encoding/json
// writes, on the plain path and off it: a record written before the plain
// path must still compare equal with the same cart.
func TestEncodeAsJSON(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bd    body
		plain bool
	}{
		{"one line", body{L: []Line{{Promotion: "summer", Uses: 1}}}, true},
		{"amount", body{L: []Line{{Promotion: "a", Uses: 2, Amount: 1999}, {Promotion: "b", Uses: 9007199254740992}}}, true},
		{"attributes sorted", body{A: map[string]string{"zone": "eu", "customer": "c-1", "b": ""}, L: []Line{{Promotion: "p", Uses: 1}}}, true},
		{"empty attributes omitted", body{A: map[string]string{}, L: []Line{{Promotion: "p", Uses: 1}}}, true},
		{"quote", body{A: map[string]string{"customer": `a"b`}, L: []Line{{Promotion: "p", Uses: 1}}}, false},
		{"backslash", body{A: map[string]string{"customer": `a\b`}, L: []Line{{Promotion: "p", Uses: 1}}}, false},
		{"html", body{A: map[string]string{"customer": "<a&b>"}, L: []Line{{Promotion: "p", Uses: 1}}}, false},
		{"utf-8", body{A: map[string]string{"kunde": "Jürgen\u2028"}, L: []Line{{Promotion: "p", Uses: 1}}}, false},
		{"delete", body{A: map[string]string{"c": "\x7f"}, L: []Line{{Promotion: "p", Uses: 1}}}, false},
		{"odd name", body{A: map[string]string{"a b": "x"}, L: []Line{{Promotion: "p.q-r_s", Uses: 1, Amount: 0}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(tc.bd)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.bd.encode(); got != string(want) {
				t.Errorf("encode = %s, encoding/json %s", got, want)
			}
			if _, ok := tc.bd.plain(); ok != tc.plain {
				t.Errorf("plain path %v, want %v", ok, tc.plain)
			}
		})
	}
}
