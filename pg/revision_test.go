package pg

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tierset/tierset/pg/internal/pgtest"
)

// insertPromotionSQL writes promotion id with one tier and one gift.
const insertPromotionSQL = `
INSERT INTO %s.promotions (id, metric) VALUES ('%id', 'quantity');
INSERT INTO %s.tiers (promotion_id, tier_id, position, threshold, reward_kind, percent) VALUES ('%id', 't1', 0, 5, 'percent_off', 10);
INSERT INTO %s.gifts (promotion_id, tier_id, position, sku, qty) VALUES ('%id', 't1', 0, 'sku-1', 1);`

func execSQL(t *testing.T, pool *pgxpool.Pool, schema, id, sql string) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), replaceID(sprintf(sql, schema), id)); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func replaceID(sql, id string) string {
	out := []byte{}
	for i := 0; i < len(sql); i++ {
		if i+3 <= len(sql) && sql[i:i+3] == "%id" {
			out = append(out, id...)
			i += 2
			continue
		}
		out = append(out, sql[i])
	}
	return string(out)
}

// revisionOf returns the promotion's revision, or, when its row is gone,
// its tombstone's (tomb true); 0 when neither exists.
func revisionOf(t *testing.T, pool *pgxpool.Pool, schema, id string) (rev int64, tomb bool) {
	t.Helper()
	err := pool.QueryRow(t.Context(), `SELECT revision FROM `+schema+`.promotions WHERE id = $1`, id).Scan(&rev)
	if err == nil {
		return rev, false
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	err = pool.QueryRow(t.Context(), `SELECT revision FROM `+schema+`.promotion_tombstones WHERE id = $1`, id).Scan(&rev)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return rev, true
}

// TestMigrateRevisionsInPlace builds the schema as it was before
// revisions, fills it, migrates, and checks every promotion has a
// revision and the triggers run from then on.
func TestMigrateRevisionsInPlace(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	ctx := testCtx(t, 30*time.Second)
	if res, err := migrateTo(ctx, pool, schema, 2); err != nil || res.Current != 2 {
		t.Fatalf("migrate to 2 = %+v, %v", res, err)
	}
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		execSQL(t, pool, schema, id, insertPromotionSQL)
	}
	// Up to 3: the migrations after it are not this test's.
	res, err := migrateTo(ctx, pool, schema, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("migrated an old schema holding %d promotions: applied %v", len(ids), res.Applied)
	if len(res.Applied) != 1 || res.Applied[0] != "0003_revisions" {
		t.Fatalf("applied %v, want [0003_revisions]", res.Applied)
	}
	seen := map[int64]bool{}
	for _, id := range ids {
		rev, tomb := revisionOf(t, pool, schema, id)
		if rev <= 0 || tomb || seen[rev] {
			t.Fatalf("promotion %s migrated with revision %d (tombstone %v, seen %v)", id, rev, tomb, seen)
		}
		seen[rev] = true
	}
	before, _ := revisionOf(t, pool, schema, "a")
	execSQL(t, pool, schema, "a", `UPDATE %s.tiers SET percent = 20 WHERE promotion_id = '%id'`)
	if after, _ := revisionOf(t, pool, schema, "a"); after <= before {
		t.Fatalf("revision %d after a tier change, was %d", after, before)
	}
}

// TestRevisionTriggers: each change to a promotion, its tiers or its
// gifts gives it a higher revision; a delete leaves a tombstone with a
// higher one still, and a re-create goes higher again.
func TestRevisionTriggers(t *testing.T) {
	t.Parallel()
	pool, schema := testDB(t)
	steps := []struct {
		name string
		id   string
		sql  string
		tomb bool // the ID's revision is now its tombstone's
	}{
		{"insert", "p", insertPromotionSQL, false},
		{"update promotion", "p", `UPDATE %s.promotions SET minor_digits = 3 WHERE id = '%id'`, false},
		{"update tier", "p", `UPDATE %s.tiers SET percent = 15 WHERE promotion_id = '%id'`, false},
		{"insert tier", "p", `INSERT INTO %s.tiers (promotion_id, tier_id, position, threshold, reward_kind, percent) VALUES ('%id', 't2', 1, 9, 'percent_off', 20)`, false},
		{"update gift", "p", `UPDATE %s.gifts SET qty = 2 WHERE promotion_id = '%id'`, false},
		{"delete gift", "p", `DELETE FROM %s.gifts WHERE promotion_id = '%id'`, false},
		{"delete tier", "p", `DELETE FROM %s.tiers WHERE promotion_id = '%id' AND tier_id = 't2'`, false},
		{"many changes in one transaction", "p", `UPDATE %s.tiers SET percent = 30 WHERE promotion_id = '%id'; INSERT INTO %s.gifts (promotion_id, tier_id, position, sku, qty) VALUES ('%id', 't1', 0, 'sku-2', 1); UPDATE %s.promotions SET kind = 'threshold' WHERE id = '%id'`, false},
		{"delete", "p", `DELETE FROM %s.promotions WHERE id = '%id'`, true},
		{"re-create", "p", insertPromotionSQL, false},
		{"delete q, to be renamed onto", "q", insertPromotionSQL + `DELETE FROM %s.promotions WHERE id = '%id'`, true},
		{"rename p to q: the old ID", "p", `UPDATE %s.promotions SET id = 'q' WHERE id = '%id'`, true},
	}
	var last int64
	for _, st := range steps {
		execSQL(t, pool, schema, st.id, st.sql)
		rev, tomb := revisionOf(t, pool, schema, st.id)
		t.Logf("%-32s revision %d (tombstone %v)", st.name, rev, tomb)
		if rev <= last || tomb != st.tomb {
			t.Fatalf("after %s: revision %d (tombstone %v), want above %d (tombstone %v)", st.name, rev, tomb, last, st.tomb)
		}
		last = rev
	}
	if rev, tomb := revisionOf(t, pool, schema, "q"); rev <= last || tomb {
		t.Fatalf("renamed promotion q has revision %d (tombstone %v), want a row above %d", rev, tomb, last)
	}
	var tombs int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM `+schema+`.promotion_tombstones WHERE id = 'q'`).Scan(&tombs); err != nil || tombs != 0 {
		t.Fatalf("%d tombstones left for q, which has a row again (%v)", tombs, err)
	}
}

// TestFaultRevisionCreateWaitsForDelete: a promotion re-created while its
// deletion is uncommitted waits for it, and gets a revision above the
// deletion's tombstone, whichever took its sequence number first.
func TestFaultRevisionCreateWaitsForDelete(t *testing.T) {
	t.Parallel()
	pool, schema := testDB(t)
	ctx := testCtx(t, 30*time.Second)
	execSQL(t, pool, schema, "p", insertPromotionSQL)
	del, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = del.Rollback(ctx) }()
	if _, err := del.Exec(ctx, `DELETE FROM `+schema+`.promotions WHERE id = 'p'`); err != nil {
		t.Fatal(err)
	}
	var tombRev int64
	if err := del.QueryRow(ctx, `SELECT revision FROM `+schema+`.promotion_tombstones WHERE id = 'p'`).Scan(&tombRev); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	pid := conn.Conn().PgConn().PID()
	created := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, sprintf(`INSERT INTO %s.promotions (id, metric) VALUES ('p', 'amount')
			ON CONFLICT (id) DO UPDATE SET metric = EXCLUDED.metric`, schema))
		created <- err
	}()
	// Commit the delete only once the insert is seen waiting on it.
	waitBlocked(ctx, t, pool, pid)
	if err := del.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	rev, tomb := revisionOf(t, pool, schema, "p")
	t.Logf("deletion's tombstone revision %d; the insert that waited for it got %d", tombRev, rev)
	if tomb || rev <= tombRev {
		t.Fatalf("re-created promotion has revision %d (tombstone %v), want a row above the deletion's %d", rev, tomb, tombRev)
	}
}

// waitBlocked returns once backend pid waits on a lock.
func waitBlocked(ctx context.Context, t *testing.T, pool *pgxpool.Pool, pid uint32) {
	t.Helper()
	for {
		var waiting bool
		if err := pool.QueryRow(ctx, `SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("backend %d never waited on a lock", pid)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestRulesLoadRevisionsAndDeletions: Load and LoadOne carry each row's
// revision and each tombstone's; once purged, a deletion has none.
func TestRulesLoadRevisionsAndDeletions(t *testing.T) {
	t.Parallel()
	pool, r := testRules(t)
	ctx := testCtx(t, 30*time.Second)
	ps := examplePromotions(t)[:2]
	saveAll(t, pool, r, ps...)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := r.Delete(ctx, tx, ps[1].ID); err != nil || !ok {
		t.Fatalf("Delete = %v, %v", ok, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	liveRev, _ := revisionOf(t, pool, r.schema, ps[0].ID)
	tombRev, tomb := revisionOf(t, pool, r.schema, ps[1].ID)
	if !tomb || tombRev <= liveRev {
		t.Fatalf("tombstone %v revision %d, live revision %d", tomb, tombRev, liveRev)
	}
	ld, err := r.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ld.Promotions) != 1 || ld.Promotions[0].Revision != liveRev ||
		len(ld.Deleted) != 1 || ld.Deleted[0].ID != ps[1].ID || ld.Deleted[0].Revision != tombRev {
		t.Fatalf("Load = %d promotions (first revision %d), deleted %+v; want revision %d and %s deleted at %d",
			len(ld.Promotions), ld.Promotions[0].Revision, ld.Deleted, liveRev, ps[1].ID, tombRev)
	}
	tests := []struct {
		id    string
		found bool
		rev   int64
	}{
		{ps[0].ID, true, liveRev},
		{ps[1].ID, false, tombRev},
		{"never-existed", false, 0},
	}
	for _, tt := range tests {
		p, found, err := r.LoadOne(ctx, tt.id)
		if err != nil || found != tt.found || p.ID != tt.id || p.Revision != tt.rev {
			t.Errorf("LoadOne(%s) = %s revision %d, found %v, %v; want revision %d, found %v", tt.id, p.ID, p.Revision, found, err, tt.rev, tt.found)
		}
	}
	if n, err := r.PurgeTombstones(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("PurgeTombstones of an hour ago = %d, %v; want 0", n, err)
	}
	if n, err := r.PurgeTombstones(ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("PurgeTombstones = %d, %v; want 1", n, err)
	}
	if p, found, err := r.LoadOne(ctx, ps[1].ID); err != nil || found || p.Revision != 0 {
		t.Fatalf("LoadOne after the purge = revision %d, found %v, %v; want 0, false", p.Revision, found, err)
	}
}
