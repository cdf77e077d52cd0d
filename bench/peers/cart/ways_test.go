package main

import (
	"slices"
	"testing"

	"github.com/tierset/tierset/gradient"
)

func TestWorkload(t *testing.T) {
	t.Parallel()
	w, err := newWorkload(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(w.promos); n != promotions {
		t.Fatalf("%d promotions, want %d", n, promotions)
	}
	if lo, hi := len(w.promos[0].Tiers), len(w.promos[promotions-1].Tiers); lo != 3 || hi != 3000 {
		t.Errorf("tiers from %d to %d, want 3 to 3000", lo, hi)
	}
	metrics := map[gradient.Metric]int{}
	hits, misses := 0, 0
	for _, p := range w.promos {
		metrics[p.Metric]++
	}
	for i, cart := range w.carts {
		if len(cart) != promotions {
			t.Fatalf("cart %d has %d lines", i, len(cart))
		}
		for _, id := range w.want[i] {
			if id == "" {
				misses++
			} else {
				hits++
			}
		}
		if err := w.check(i, slices.Clone(w.want[i])); err != nil {
			t.Errorf("the oracle's own answer: %v", err)
		}
	}
	if metrics[gradient.Amount] == 0 || metrics[gradient.Quantity] == 0 {
		t.Errorf("metrics %v, want amounts and counts", metrics)
	}
	if hits == 0 || misses == 0 {
		t.Errorf("%d hits and %d misses, want both", hits, misses)
	}

	wrong := slices.Clone(w.want[0])
	wrong[3] += "x"
	if err := w.check(0, wrong); err == nil {
		t.Error("check accepted a wrong tier")
	}
	if err := w.check(0, wrong[:5]); err == nil {
		t.Error("check accepted a short answer")
	}
	again, err := newWorkload(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(w.want, again.want, slices.Equal) {
		t.Error("the same seed gave other carts")
	}
}
