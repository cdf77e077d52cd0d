package main_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/internal/slot"
	"github.com/tierset/tierset/internal/testredis"
)

// TestAuditUnindexed: after `warm -reindex`, a promotion whose ID is taken
// out of the index (what a v0.1.0 writer or a restore by hand leaves) is
// named by audit and exits 1; a second `warm -reindex` adds it back and
// audit is clean.
func TestAuditUnindexed(t *testing.T) {
	t.Parallel()
	b := testredis.Redis(t) // skips without a real server
	url, prefix := testredis.URL(), b.Prefix
	rulesFile, err := filepath.Abs("../../examples/rules.json")
	if err != nil {
		t.Fatal(err)
	}
	r := tierset(t, "warm", "-redis", url, "-prefix", prefix, "-rules", rulesFile, "-reindex")
	r.expect(t, 0)
	audit := func() result {
		t.Helper()
		return tierset(t, "audit", "-redis", url, "-match", prefix+":{p:*", "-tierset-prefix", prefix)
	}
	audit().expect(t, 0)
	c, err := cache.New(b.Client, cache.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := c.IDs(t.Context())
	if err != nil || len(ids) == 0 {
		t.Fatalf("IDs after warm: %v, %v", ids, err)
	}
	id := ids[0]
	key := prefix + ":{" + slot.TagOf(slot.Of("{p:"+id+"}")) + "}:ids"
	if err := b.Client.SRem(t.Context(), key, id).Err(); err != nil {
		t.Fatal(err)
	}
	r = audit()
	r.expect(t, 1)
	if !strings.Contains(r.stdout, "not in the promotion index") || !strings.Contains(r.stdout, id) {
		t.Fatalf("audit did not name %s:\n%s", id, r.stdout)
	}
	tierset(t, "warm", "-redis", url, "-prefix", prefix, "-rules", rulesFile, "-reindex").expect(t, 0)
	audit().expect(t, 0)
}
