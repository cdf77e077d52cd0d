package slot

import (
	"strconv"
	"sync"
)

// TagOf returns a short hash tag (without braces) that hashes to slot s,
// so a key "<...>{<TagOf(s)>}<...>" lives on slot s and can share a
// transaction with any other key of that slot. The tags are "i<n>" for
// the smallest n landing on each slot; the table is computed once, on
// first use, and never changes. s outside [0, Count) panics.
func TagOf(s int) string { return slotTags()[s] }

// slotTags is a memo of a pure function, not state: every call sees the
// same table.
var slotTags = sync.OnceValue(func() *[Count]string {
	var t [Count]string
	left := Count
	buf := make([]byte, 0, 12)
	for n := 0; left > 0; n++ {
		buf = strconv.AppendInt(append(buf[:0], 'i'), int64(n), 10)
		s := int(crc16(string(buf)) % Count)
		if t[s] == "" {
			t[s] = string(buf)
			left--
		}
	}
	return &t
})
