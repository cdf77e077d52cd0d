package keyname

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ok   bool
	}{
		{"tierset", true},
		{"tierset-bench-0a1b:x_y.z", true},
		{"préfixe", true},
		{strings.Repeat("n", MaxBytes), true},
		{"", false},
		{strings.Repeat("n", MaxBytes+1), false},
		{"a{b", false},
		{"a}b", false},
		{"a*b", false},
		{"a?b", false},
		{"a[b]", false},
		{`a\b`, false},
		{"a b", false},
		{"a\tb", false},
		{"a\u00a0b", false}, // no-break space
		{"a\x00b", false},
		{"a\x7fb", false},
		{"a\xffb", false}, // invalid UTF-8
	}
	for _, tc := range tests {
		err := Check(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("Check(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
