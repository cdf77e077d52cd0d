package storm

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestParseCounters(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\nused_cpu_sys_children:9.0\r\n" +
		"# Commandstats\r\ncmdstat_hget:calls=10,usec=5,usec_per_call=0.5,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_zrange:calls=32,usec=7,usec_per_call=0.2,rejected_calls=0,failed_calls=0\r\n"
	cpu, calls := parseCounters(info)
	if math.Abs(cpu-3.75) > 1e-9 || calls != 42 {
		t.Fatalf("cpu %v calls %d, want 3.75 and 42", cpu, calls)
	}
}

// TestContentNamesItsSequence: every tier of promotion(i, seq) names seq,
// so a cart line's answer tells which content priced it.
func TestContentNamesItsSequence(t *testing.T) {
	for _, seq := range []int{0, 7, 12345} {
		p := promotion(3, seq, 1)
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		for _, tier := range p.Tiers {
			if got := seqOf(tier.ID); got != seq {
				t.Fatalf("tier %q: seq %d, want %d", tier.ID, got, seq)
			}
		}
	}
}

func TestPickCartDistinct(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, zipfS, 1, 99)
	idx := make([]int, 20)
	for range 100 {
		pickCart(z, idx)
		seen := map[int]bool{}
		for _, i := range idx {
			if seen[i] || i < 0 || i > 99 {
				t.Fatalf("cart %v: repeated or out of range", idx)
			}
			seen[i] = true
		}
	}
}
