package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/warm"
)

// The enum spellings in the database are the rules file's (package rules).
var (
	metricNames = map[string]gradient.Metric{"quantity": gradient.Quantity, "amount": gradient.Amount}
	kindNames   = map[string]gradient.RuleKind{"threshold": gradient.Threshold, "parity_price": gradient.ParityPrice, "parity_discount": gradient.ParityDiscount}
	rewardNames = map[string]gradient.RewardKind{"percent_off": gradient.PercentOff, "amount_off": gradient.AmountOff, "fixed_price": gradient.FixedPrice, "every_n": gradient.EveryN}
)

func nameOf[K comparable](m map[string]K, v K) string {
	for s, k := range m {
		if k == v {
			return s
		}
	}
	return ""
}

// Rules reads and writes promotions in schema's promotions, tiers and
// gifts tables. It implements warm.Source.
type Rules struct {
	db     DB
	schema string
}

var _ warm.Source = (*Rules)(nil)

// NewRules returns the promotions of schema ("" = DefaultSchema), which
// Migrate must have created.
func NewRules(db DB, schema string) (*Rules, error) {
	s, err := checkSchema(schema)
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, invalid("options", "nil DB")
	}
	return &Rules{db: db, schema: s}, nil
}

// Schema returns the schema the rules live in.
func (r *Rules) Schema() string { return r.schema }

// Load reads every promotion, with its revision, and the deletions its
// tombstones keep, with theirs, from one consistent snapshot (a
// repeatable read, read-only transaction). A promotion whose rows
// gradient refuses, or that cannot be parsed, is reported in Skipped by
// its ID, as a *ValidationError with Field "row", and left out; the rest are returned valid.
// warm.FromSource applies the deletions as ordered deletes, so a warm-up
// that read the table before a change never undoes what a newer writer
// (Watch) stored.
func (r *Rules) Load(ctx context.Context) (warm.Loaded, error) {
	var out warm.Loaded
	err := r.read(ctx, nil, func(ps []gradient.Promotion, bad []warm.Skipped, gone []warm.Deletion) {
		out.Promotions, out.Skipped, out.Deleted = ps, bad, gone
	})
	return out, err
}

// LoadOne reads one promotion and its revision. found is false when no
// row has that ID: p.ID is then id and p.Revision the revision of its
// deletion (0 when no tombstone is kept for it, see PurgeTombstones), for
// cache.Delete. A promotion gradient refuses is returned as a *ValidationError with
// Field "row".
func (r *Rules) LoadOne(ctx context.Context, id string) (p gradient.Promotion, found bool, err error) {
	var rowErr error
	err = r.read(ctx, &id, func(ps []gradient.Promotion, bad []warm.Skipped, gone []warm.Deletion) {
		switch {
		case len(bad) > 0:
			found, rowErr = true, bad[0].Err
		case len(ps) > 0:
			p, found = ps[0], true
		case len(gone) > 0:
			p = gradient.Promotion{ID: id, Revision: gone[0].Revision}
		default:
			p = gradient.Promotion{ID: id}
		}
	})
	if err != nil {
		return p, false, err
	}
	return p, found, rowErr
}

// PurgeTombstones deletes the tombstones of promotions deleted before
// before and returns how many it deleted. A tombstone lets a full pass or
// a one-shot warm-up apply a deletion in order; once purged, the deletion
// reaches Redis only through its notification or a pruning pass. Watch
// purges those older than WatchOptions.KeepTombstones on each full pass.
func (r *Rules) PurgeTombstones(ctx context.Context, before time.Time) (int, error) {
	tag, err := r.db.Exec(ctx, `DELETE FROM `+r.schema+`.promotion_tombstones WHERE deleted_at < $1`, before)
	if err != nil {
		return 0, fmt.Errorf("pg: purge tombstones: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

type tierRow struct {
	promo string
	tier  gradient.Tier
}

func (r *Rules) read(ctx context.Context, id *string, fn func([]gradient.Promotion, []warm.Skipped, []warm.Deletion)) error {
	tx, err := r.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pg: rules: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`); err != nil {
		return fmt.Errorf("pg: rules: %w", err)
	}
	s := r.schema
	var order []string
	promos := map[string]*gradient.Promotion{}
	bad := map[string]error{}
	rows, _ := tx.Query(ctx, `SELECT id, metric, minor_digits, kind, starts_at, ends_at, revision FROM `+s+`.promotions
		WHERE $1::text IS NULL OR id = $1 ORDER BY id`, id)
	var pid, metric, kind string
	var digits int
	var start, end *time.Time
	var rev int64
	_, err = pgx.ForEachRow(rows, []any{&pid, &metric, &digits, &kind, &start, &end, &rev}, func() error {
		p := &gradient.Promotion{ID: pid, MinorDigits: minorDigitsOf(digits), Revision: rev}
		order = append(order, pid)
		promos[pid] = p
		var ok bool
		if p.Metric, ok = metricNames[metric]; !ok {
			bad[pid] = fmt.Errorf("metric %q is not quantity or amount", metric)
		}
		if p.Kind, ok = kindNames[kind]; !ok {
			bad[pid] = fmt.Errorf("kind %q is not threshold, parity_price or parity_discount", kind)
		}
		if start != nil {
			p.Start = *start
		}
		if end != nil {
			p.End = *end
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pg: rules: promotions: %w", err)
	}
	tierAt := map[[2]string]*gradient.Tier{}
	var tiers []tierRow
	rows, _ = tx.Query(ctx, `SELECT promotion_id, tier_id, coalesce(threshold::text, '0'), coalesce(match_value::text, '0'),
		reward_kind, percent::text, amount::text, step::text, cap::text
		FROM `+s+`.tiers WHERE $1::text IS NULL OR promotion_id = $1 ORDER BY promotion_id, position`, id)
	var tid, threshold, match, reward, percent, amount, step, capv string
	_, err = pgx.ForEachRow(rows, []any{&pid, &tid, &threshold, &match, &reward, &percent, &amount, &step, &capv}, func() error {
		t := gradient.Tier{ID: tid}
		var perr error
		num := func(field, v string) decimal.Decimal {
			d, err := decimal.NewFromString(v)
			if err != nil && perr == nil {
				perr = fmt.Errorf("tier %q: %s %q: %w", tid, field, v, err)
			}
			return d
		}
		t.Threshold, t.MatchValue = num("threshold", threshold), num("match_value", match)
		t.Reward.Percent, t.Reward.Amount = num("percent", percent), num("amount", amount)
		t.Reward.Step, t.Reward.Cap = num("step", step), num("cap", capv)
		var ok bool
		if t.Reward.Kind, ok = rewardNames[reward]; !ok && perr == nil {
			perr = fmt.Errorf("tier %q: reward_kind %q is unknown", tid, reward)
		}
		if perr != nil {
			bad[pid] = perr
		}
		tiers = append(tiers, tierRow{pid, t})
		return nil
	})
	if err != nil {
		return fmt.Errorf("pg: rules: tiers: %w", err)
	}
	for _, tr := range tiers {
		if p := promos[tr.promo]; p != nil {
			p.Tiers = append(p.Tiers, tr.tier)
		}
	}
	for _, p := range promos {
		for i := range p.Tiers {
			tierAt[[2]string{p.ID, p.Tiers[i].ID}] = &p.Tiers[i]
		}
	}
	rows, _ = tx.Query(ctx, `SELECT promotion_id, tier_id, sku, qty, name FROM `+s+`.gifts
		WHERE $1::text IS NULL OR promotion_id = $1 ORDER BY promotion_id, tier_id, position`, id)
	var g gradient.Gift
	_, err = pgx.ForEachRow(rows, []any{&pid, &tid, &g.SKU, &g.Qty, &g.Name}, func() error {
		if t := tierAt[[2]string{pid, tid}]; t != nil {
			t.Gifts = append(t.Gifts, g)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pg: rules: gifts: %w", err)
	}
	var gone []warm.Deletion
	rows, _ = tx.Query(ctx, `SELECT id, revision FROM `+s+`.promotion_tombstones
		WHERE $1::text IS NULL OR id = $1 ORDER BY id`, id)
	_, err = pgx.ForEachRow(rows, []any{&pid, &rev}, func() error {
		if promos[pid] == nil { // re-creating deletes the tombstone; a row wins regardless
			gone = append(gone, warm.Deletion{ID: pid, Revision: rev})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pg: rules: tombstones: %w", err)
	}
	var good []gradient.Promotion
	var refused []warm.Skipped
	for _, pid := range order {
		p := promos[pid]
		err := bad[pid]
		if err == nil {
			err = p.Validate()
		}
		if err != nil {
			refused = append(refused, warm.Skipped{ID: pid, Err: rowError(pid, err)})
			continue
		}
		good = append(good, *p)
	}
	fn(good, refused, gone)
	return nil
}

// Save writes p in tx, replacing any promotion with its ID (tiers and
// gifts included). p is validated first: a promotion gradient refuses is
// returned as its *gradient.ValidationError and nothing is written. The
// database gives the change its revision (p.Revision is ignored), and
// the change reaches Redis through Watch when tx commits.
func (r *Rules) Save(ctx context.Context, tx pgx.Tx, p gradient.Promotion) error {
	if err := p.Validate(); err != nil {
		return err
	}
	s := r.schema
	var start, end *time.Time
	if !p.Start.IsZero() {
		start = &p.Start
	}
	if !p.End.IsZero() {
		end = &p.End
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO `+s+`.promotions (id, metric, minor_digits, kind, starts_at, ends_at) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (id) DO UPDATE SET metric = EXCLUDED.metric, minor_digits = EXCLUDED.minor_digits, kind = EXCLUDED.kind,
		starts_at = EXCLUDED.starts_at, ends_at = EXCLUDED.ends_at, updated_at = now()`,
		p.ID, nameOf(metricNames, p.Metric), gradient.Digits(p.MinorDigits), nameOf(kindNames, p.Kind), start, end)
	b.Queue(`DELETE FROM `+s+`.tiers WHERE promotion_id = $1`, p.ID)
	orNull := func(d decimal.Decimal) *string {
		if d.IsZero() {
			return nil
		}
		v := d.String()
		return &v
	}
	for i, t := range p.Tiers {
		rw := t.Reward
		b.Queue(`INSERT INTO `+s+`.tiers (promotion_id, tier_id, position, threshold, match_value, reward_kind, percent, amount, step, cap)
			VALUES ($1, $2, $3, $4::text::numeric, $5::text::numeric, $6, $7::text::numeric, $8::text::numeric, $9::text::numeric, $10::text::numeric)`,
			p.ID, t.ID, i, orNull(t.Threshold), orNull(t.MatchValue), nameOf(rewardNames, rw.Kind),
			rw.Percent.String(), rw.Amount.String(), rw.Step.String(), rw.Cap.String())
		for j, g := range t.Gifts {
			b.Queue(`INSERT INTO `+s+`.gifts (promotion_id, tier_id, position, sku, qty, name) VALUES ($1, $2, $3, $4, $5, $6)`,
				p.ID, t.ID, j, g.SKU, g.Qty, g.Name)
		}
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pg: save promotion %q: %w", p.ID, err)
	}
	return nil
}

// Delete removes the promotion id (its tiers and gifts cascade) in tx and
// reports whether it existed. Its tombstone keeps the deletion's revision;
// Watch then deletes it from Redis, in order.
func (r *Rules) Delete(ctx context.Context, tx pgx.Tx, id string) (bool, error) {
	tag, err := tx.Exec(ctx, `DELETE FROM `+r.schema+`.promotions WHERE id = $1`, id)
	if err != nil {
		return false, fmt.Errorf("pg: delete promotion %q: %w", id, err)
	}
	return tag.RowsAffected() > 0, nil
}

// minorDigitsOf turns the minor_digits column, which holds the digit count
// itself (0 for JPY, as the first schema defined it), into a
// gradient.Promotion.MinorDigits value.
func minorDigitsOf(count int) int {
	if count == 0 {
		return gradient.NoMinorDigits
	}
	return count
}
