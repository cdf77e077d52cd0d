package storm

import (
	"testing"
	"time"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/internal/testredis"
)

// TestOpenLoopSchedule: an open-loop row issues exactly the carts its
// schedule makes due (each client's every interval over the row), and
// each cart's latency from its due time is its service time plus how
// late it started.
func TestOpenLoopSchedule(t *testing.T) {
	t.Parallel()
	b := testredis.Mini(t)
	c, err := cache.New(b.Client, cache.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	const promos = 10
	for i := range promos {
		if _, err := c.Refresh(testredis.Ctx(t), promotion(i, 0, 1)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		l    load
		want int
	}{
		{"4 clients, 10 ms apart each", load{clients: 4, lines: 5, promos: promos, rate: 400, dur: 250 * time.Millisecond}, 100},
		{"3 clients, a rate that does not divide", load{clients: 3, lines: 2, promos: promos, rate: 70, dur: 190 * time.Millisecond}, 14},
	} {
		st, err := runLoad(testredis.Ctx(t), c, tc.l)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if st.errs != 0 || len(st.lat) != tc.want || len(st.svc) != tc.want || len(st.late) != tc.want {
			t.Fatalf("%s: %d errors, %d/%d/%d carts timed, want %d", tc.name, st.errs, len(st.lat), len(st.svc), len(st.late), tc.want)
		}
		// Order statistics keep an element-wise bound: lat ≥ svc and
		// lat ≥ late cart by cart, so also rank by rank.
		for i := range st.lat {
			if st.late[0] < 0 || st.lat[i] < st.svc[i] || st.lat[i] < st.late[i] {
				t.Fatalf("%s: rank %d: latency %d µs, service %d µs, late %d µs", tc.name, i, st.lat[i], st.svc[i], st.late[i])
			}
		}
	}
}
