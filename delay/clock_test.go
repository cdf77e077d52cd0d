package delay

import (
	"testing"
	"time"
)

// The offset estimate keeps the narrowest interval a reply gave: a reply
// that waited behind other work (wide, lopsided) does not move it; a
// sample that disagrees with it (a stepped clock) replaces it at once;
// an old one gives way as it ages.
func TestClockEstimate(t *testing.T) {
	t.Parallel()
	base := time.UnixMilli(1_700_000_000_000)
	const trueOff = 250 * time.Millisecond // Redis TIME minus the client clock
	// call returns a sample of a script that ran at client time ran, sent
	// before it by up and answered after it by down.
	type call struct{ ran, up, down time.Duration }
	sample := func(off time.Duration, c call) (int64, time.Time, time.Time) {
		at := base.Add(c.ran)
		return at.Add(off).UnixMilli(), at.Add(-c.up), at.Add(c.down)
	}
	tests := []struct {
		name  string
		calls []call
		step  time.Duration // client clock step (or drift) before the last call
		want  time.Duration // |estimate - truth| at most
	}{
		{"one narrow call", []call{{0, 100 * time.Microsecond, 100 * time.Microsecond}}, 0, time.Millisecond},
		{"late replies do not move it", []call{
			{0, 100 * time.Microsecond, 100 * time.Microsecond},
			{10 * time.Millisecond, 0, 20 * time.Millisecond},
			{20 * time.Millisecond, 0, 30 * time.Millisecond},
		}, 0, time.Millisecond},
		{"a stepped clock replaces it", []call{
			{0, 100 * time.Microsecond, 100 * time.Microsecond},
			{time.Second, 2 * time.Millisecond, 2 * time.Millisecond},
		}, 500 * time.Millisecond, 3 * time.Millisecond},
		{"an aged sample gives way", []call{
			{0, 100 * time.Microsecond, 100 * time.Microsecond},
			{10 * time.Second, 3 * time.Millisecond, 3 * time.Millisecond},
		}, 3 * time.Millisecond, time.Millisecond}, // drifted 300 ppm
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c clockEst
			off := trueOff
			for i, cl := range tc.calls {
				if i == len(tc.calls)-1 {
					off -= tc.step // the client clock jumped ahead by step
				}
				ms, sent, recv := sample(off, cl)
				c.observe(ms, sent, recv)
			}
			if d := (c.offset() - off).Abs(); d > tc.want {
				t.Fatalf("estimate %v, true offset %v: off by %v > %v", c.offset(), off, d, tc.want)
			}
		})
	}
}
