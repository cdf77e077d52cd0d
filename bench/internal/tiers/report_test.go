package tiers

import (
	"bytes"
	"encoding/csv"
	"strconv"
	"testing"
)

// TestOrderedTableAndCSV: the table and the CSV list the rows by
// concurrency, then tier count, then implOrder, whatever order they were
// run in, and leave out cases with no row.
func TestOrderedTableAndCSV(t *testing.T) {
	t.Parallel()
	a, b := implOrder[0], implOrder[1]
	row := func(impl string, tiers, conc int) *stats {
		return &stats{Impl: impl, Tiers: tiers, Concurrency: conc, Lines: 1}
	}
	r := &Result{Backend: "redis", Rows: []*stats{row(b, 10, 8), row(a, 100, 1), row(b, 10, 1), row(a, 10, 8), row(a, 10, 1)}}
	want := [][2]any{{a, "10/1"}, {b, "10/1"}, {a, "100/1"}, {a, "10/8"}, {b, "10/8"}}
	got := r.ordered()
	if len(got) != len(want) {
		t.Fatalf("ordered: %d rows, want %d", len(got), len(want))
	}
	var buf bytes.Buffer
	if err := r.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(recs) != len(want)+1 {
		t.Fatalf("CSV: %d records, %v; want a header and %d rows", len(recs), err, len(want))
	}
	for i, w := range want {
		s := got[i]
		if s.Impl != w[0] || strconv.Itoa(s.Tiers)+"/"+strconv.Itoa(s.Concurrency) != w[1] {
			t.Errorf("ordered[%d] = %s %d/%d, want %s %s", i, s.Impl, s.Tiers, s.Concurrency, w[0], w[1])
		}
		if rec := recs[i+1]; rec[1] != w[0] || rec[2]+"/"+rec[3] != w[1] {
			t.Errorf("CSV row %d = %v, want %s %s", i, rec[1:4], w[0], w[1])
		}
	}
}
