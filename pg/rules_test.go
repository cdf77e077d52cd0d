package pg

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/rules"
	"github.com/tierset/tierset/warm"
)

func examplePromotions(t testing.TB) []gradient.Promotion {
	t.Helper()
	ps, err := rules.ParseFile(filepath.Join("..", "examples", "rules.json"), rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// saveAll writes ps in one transaction.
func saveAll(t testing.TB, pool *pgxpool.Pool, r *Rules, ps ...gradient.Promotion) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, p := range ps {
		if err := r.Save(ctx, tx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// testRules is Rules on a fresh schema, with the schema's pool.
func testRules(t testing.TB) (*pgxpool.Pool, *Rules) {
	t.Helper()
	pool, schema := testDB(t)
	r, err := NewRules(pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	return pool, r
}

func testCache(t testing.TB) *cache.Cache {
	t.Helper()
	srv := testredis.StartServer(t)
	c, err := cache.New(srv.Client(&redis.Options{}), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func version(t testing.TB, p gradient.Promotion) string {
	t.Helper()
	v, err := cache.Version(&p, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRulesRoundTrip(t *testing.T) {
	pool, schema := testDB(t)
	r, err := NewRules(pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	ps := examplePromotions(t)
	saveAll(t, pool, r, ps...)
	saveAll(t, pool, r, ps...) // saving again replaces, never duplicates
	ld, err := r.Load(testCtx(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(ld.Skipped) != 0 || len(ld.Promotions) != len(ps) {
		t.Fatalf("Load: %d promotions, skipped %v; want %d, none", len(ld.Promotions), ld.Skipped, len(ps))
	}
	got := map[string]gradient.Promotion{}
	for _, p := range ld.Promotions {
		got[p.ID] = p
	}
	for _, p := range ps {
		// The content hash covers every field the cache stores, decimals exactly.
		if g, ok := got[p.ID]; !ok || version(t, g) != version(t, p) {
			t.Errorf("promotion %q did not round-trip: got %+v, want %+v", p.ID, g, p)
		}
	}
	one, found, err := r.LoadOne(testCtx(t, 10*time.Second), ps[1].ID)
	if err != nil || !found || version(t, one) != version(t, ps[1]) {
		t.Fatalf("LoadOne(%q) = %v, %v", ps[1].ID, found, err)
	}
	if _, found, err := r.LoadOne(testCtx(t, 10*time.Second), "absent"); found || err != nil {
		t.Fatalf("LoadOne(absent) = %v, %v; want not found", found, err)
	}
}

func TestRulesSaveRefusesInvalid(t *testing.T) {
	pool, schema := testDB(t)
	r, _ := NewRules(pool, schema)
	p := examplePromotions(t)[0]
	p.Tiers[1].Threshold = p.Tiers[0].Threshold // duplicate threshold
	ctx := testCtx(t, 10*time.Second)
	tx, _ := pool.Begin(ctx)
	defer func() { _ = tx.Rollback(ctx) }()
	err := r.Save(ctx, tx, p)
	if !errors.Is(err, gradient.ErrDuplicateThreshold) {
		t.Fatalf("Save = %v, want gradient.ErrDuplicateThreshold", err)
	}
	var n int
	_ = tx.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.promotions`).Scan(&n)
	if n != 0 {
		t.Fatalf("a refused Save wrote %d promotions", n)
	}
}

// TestRulesLoadSkipsRefused corrupts rows past what the constraints can
// see; each bad promotion is reported by ID, the others warm, and with
// Prune the bad one's stored version stays in Redis.
func TestRulesLoadSkipsRefused(t *testing.T) {
	tests := []struct {
		name, promo, sql string
		sentinel         error
	}{
		{"amount finer than minor digits", "bundle-2-for-30", `UPDATE %s.tiers SET amount = 30.001 WHERE promotion_id = 'bundle-2-for-30' AND tier_id = 'two'`, gradient.ErrBadReward},
		{"fractional item count", "qty-3-5-10", `UPDATE %s.tiers SET threshold = 4.5 WHERE promotion_id = 'qty-3-5-10' AND tier_id = 'buy5'`, gradient.ErrThreshold},
		{"threshold finer than minor digits", "every-100-10", `INSERT INTO %s.tiers (promotion_id, tier_id, position, threshold, reward_kind, amount, step) VALUES ('every-100-10', 'dup', 9, 100.001, 'every_n', 10, 100)`, gradient.ErrThreshold},
		{"no tiers", "jp-5000", `DELETE FROM %s.tiers WHERE promotion_id = 'jp-5000'`, gradient.ErrNoTiers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, schema := testDB(t)
			r, _ := NewRules(pool, schema)
			ps := examplePromotions(t)
			saveAll(t, pool, r, ps...)
			c := testCache(t)
			ctx := testCtx(t, 30*time.Second)
			if _, err := warm.FromSource(ctx, c, r, warm.Options{}); err != nil {
				t.Fatal(err)
			}
			before, err := c.Info(ctx, tt.promo)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, sprintf(tt.sql, schema)); err != nil {
				t.Fatal(err)
			}
			sum, err := warm.FromSource(ctx, c, r, warm.Options{Prune: true})
			if !errors.Is(err, warm.ErrRefused) {
				t.Fatalf("FromSource = %v, want ErrRefused", err)
			}
			var ve *ValidationError
			if len(sum.Refused) != 1 || sum.Refused[0] != tt.promo || !errors.As(sum.Errors[0], &ve) || ve.Field != "row" ||
				!errors.Is(sum.Errors[0], ErrInvalid) || !errors.Is(sum.Errors[0], tt.sentinel) {
				t.Fatalf("Refused %v, errors %v; want %q refused as a *ValidationError with Field row wrapping %v", sum.Refused, sum.Errors, tt.promo, tt.sentinel)
			}
			if len(sum.Unchanged) != len(ps)-1 || len(sum.Pruned) != 0 {
				t.Fatalf("unchanged %v, pruned %v; want the other %d unchanged and nothing pruned", sum.Unchanged, sum.Pruned, len(ps)-1)
			}
			after, err := c.Info(ctx, tt.promo)
			if err != nil || after.Version != before.Version {
				t.Fatalf("the refused promotion's stored version: %v, %v; want %s kept", after.Version, err, before.Version)
			}
		})
	}
}

func sprintf(sql, schema string) string { return strings.ReplaceAll(sql, "%s", schema) }
