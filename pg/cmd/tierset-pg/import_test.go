package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/pg"
	"github.com/tierset/tierset/pg/internal/pgtest"
)

// TestImport loads the example rules into a fresh schema, again
// (replaced, idempotent), refuses a file warm refuses and a -prune over
// the limit with nothing written, then warms Redis from the rows through
// -redis host:port.
func TestImport(t *testing.T) {
	pool, schema := pgtest.Schema(t)
	url := pgtest.URL(t)
	if code, out := runCLI(t, "migrate", "-source", url, "-schema", schema); code != 0 {
		t.Fatalf("migrate: exit %d\n%s", code, out)
	}
	examples := filepath.Join("..", "..", "..", "examples", "rules.json")
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"version": 1, "promotions": [{"id": "p1", "metric": "amount", "minor_digits": 2,
		"tiers": [{"id": "a", "threshold": "10", "reward": {"kind": "amount_off", "amount": "1"}},
		          {"id": "b", "threshold": "10", "reward": {"kind": "amount_off", "amount": "2"}}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	one := filepath.Join(dir, "one.json")
	if err := os.WriteFile(one, []byte(`{"version": 1, "promotions": [{"id": "p1", "metric": "quantity", "minor_digits": 2,
		"tiers": [{"id": "a", "threshold": 3, "reward": {"kind": "percent_off", "percent": "10"}}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	oneChanged := filepath.Join(dir, "one-changed.json")
	if err := os.WriteFile(oneChanged, []byte(`{"version": 1, "promotions": [{"id": "p1", "metric": "quantity", "minor_digits": 2,
		"tiers": [{"id": "a", "threshold": 3, "reward": {"kind": "percent_off", "percent": "15"}}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		r, err := pg.NewRules(pool, schema)
		if err != nil {
			t.Fatal(err)
		}
		l, err := r.Load(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Promotions) + len(l.Skipped)
	}
	revisions := func() map[string]int64 {
		t.Helper()
		r, err := pg.NewRules(pool, schema)
		if err != nil {
			t.Fatal(err)
		}
		l, err := r.Load(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, p := range l.Promotions {
			out[p.ID] = p.Revision
		}
		return out
	}
	var before map[string]int64
	for _, st := range []struct {
		name  string
		args  []string
		code  int
		want  string
		count int
	}{
		{"dry run", []string{"-rules", examples, "-dry-run"}, 0, "summary: added 6, replaced 0", 0},
		{"first", []string{"-rules", examples}, 0, "summary: added 6, replaced 0, unchanged 0, deleted 0, refused 0", 6},
		{"again changes nothing", []string{"-rules", examples}, 0, "nothing changed: the tables already hold this file\nsummary: added 0, replaced 0, unchanged 6, deleted 0, refused 0", 6},
		{"a file warm refuses", []string{"-rules", bad}, 1, "p1", 6},
		{"prune over the limit", []string{"-rules", one, "-prune"}, 1, "over the limit of 1; nothing was written", 6},
		{"without -prune the rest is listed", []string{"-rules", one}, 0, "stored but not in the file (kept; -prune deletes them)", 7},
		{"prune within -max-prune", []string{"-rules", one, "-prune", "-max-prune", "6"}, 0, "deleted 6", 1},
		{"a changed promotion is replaced", []string{"-rules", oneChanged}, 0, "replaced: [p1]\nsummary: added 0, replaced 1, unchanged 0", 1},
	} {
		code, out := runCLI(t, append([]string{"import", "-source", url, "-schema", schema}, st.args...)...)
		if code != st.code || !strings.Contains(out, st.want) {
			t.Errorf("%s: exit %d, want %d with %q:\n%s", st.name, code, st.code, st.want, out)
		}
		if n := count(); n != st.count {
			t.Errorf("%s: %d promotions stored, want %d", st.name, n, st.count)
		}
		switch st.name {
		case "first":
			before = revisions()
		case "again changes nothing":
			// an unchanged promotion keeps its revision: no watcher reloads it
			if after := revisions(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("re-import bumped revisions: %v, was %v", after, before)
			}
		}
	}
	srv := testredis.StartServer(t)
	if code, out := runCLI(t, "warm", "-source", url, "-schema", schema, "-redis", srv.Addr()); code != 0 || !strings.Contains(out, "summary: added 1") {
		t.Errorf("warm -redis host:port: exit %d\n%s", code, out)
	}
}
