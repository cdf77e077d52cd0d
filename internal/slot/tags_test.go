package slot

import "testing"

func TestTagOf(t *testing.T) {
	seen := map[string]bool{}
	for s := 0; s < Count; s++ {
		tag := TagOf(s)
		if got := Of("x:{" + tag + "}:y"); got != s {
			t.Fatalf("TagOf(%d) = %q hashes to slot %d", s, tag, got)
		}
		if seen[tag] {
			t.Fatalf("tag %q twice", tag)
		}
		seen[tag] = true
	}
}
