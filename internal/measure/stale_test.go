package measure

import (
	"slices"
	"testing"
	"time"
)

// TestStaleWindows: a reader's stale window for a write is the start of
// its last read, after that write returned and before the next one was
// sent, that was served another version; reads that began before the
// return, or once the next write was under way, may serve either.
func TestStaleWindows(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	writes := []Write{{at(9), at(10), "b"}, {at(19), at(20), "a"}}
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		log  []Read
		want []time.Duration
	}{
		{"no stale read", []Read{{at(9), "a"}, {at(11), "b"}, {at(21), "a"}}, []time.Duration{0, 0}},
		{"old before the return only", []Read{{at(9), "a"}, {at(10), "b"}, {at(18), "b"}, {at(22), "a"}}, []time.Duration{0, 0}},
		{"stale after each return", []Read{{at(11), "a"}, {at(13), "a"}, {at(14), "b"}, {at(21), "b"}, {at(25), "a"}}, []time.Duration{3 * ms, ms}},
		{"next write under way", []Read{{at(12), "b"}, {at(19), "a"}, {at(19), "b"}, {at(20), "a"}}, []time.Duration{0, 0}},
		{"stale up to the next sending", []Read{{at(18), "a"}, {at(30), "b"}}, []time.Duration{8 * ms, 10 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := StaleWindows(writes, [][]Read{tc.log}); !slices.Equal(got, tc.want) {
				t.Fatalf("windows %v, want %v", got, tc.want)
			}
		})
	}
}
