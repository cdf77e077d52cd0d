package main

import (
	"bytes"
	"context"
	"encoding/json"
	"expvar"
	"testing"
)

// TestRun: the observers really fire and land in expvar with the counts
// the run implies.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), "../rules.json", &out); err != nil {
		t.Fatal(err)
	}
	read := func(name string) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(expvar.Get(name).String()), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	// round_trips_match: the cart and the not-found line read again with
	// its meta key (not found vs damaged); round_trips_gifts: its gifts.
	cacheWant := map[string]float64{"lookups": 4, "lookup_hit": 2, "lookup_no_tier": 1, "lookup_not_found": 1, "refresh_added": 6,
		"round_trips_match": 2, "round_trips_gifts": 1}
	got := read("tierset_cache")
	for k, v := range cacheWant {
		if got[k] != v {
			t.Errorf("tierset_cache %s = %v, want %v", k, got[k], v)
		}
	}
	queueWant := map[string]float64{"enqueued": 3, "delivered": 3, "acked": 2, "dead_letters": 1}
	got = read("tierset_delay")
	for k, v := range queueWant {
		if got[k] != v {
			t.Errorf("tierset_delay %s = %v, want %v", k, got[k], v)
		}
	}
	if lat := read("tierset_delay_lateness"); lat["count"] != float64(3) {
		t.Errorf("lateness count = %v, want 3", lat["count"])
	}
	if !bytes.Contains(out.Bytes(), []byte("tierset_cache {")) {
		t.Errorf("output: %s", out.String())
	}
}
