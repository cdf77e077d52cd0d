package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
)

// line is one cart line in the forms each way takes, built outside any
// timing.
type line struct {
	q     cache.Query
	promo string
	value string // the line's value as PostgreSQL numeric text
}

// workload is the promotions, their oracles, the carts and the oracle's
// answer to each cart (a tier ID per line, "" when no tier is reached).
type workload struct {
	promos   []gradient.Promotion
	matchers []*gradient.Matcher
	carts    [][]line
	want     [][]string
}

const promotions = 20

// newWorkload builds 20 promotions of 3 to 3000 tiers (log-spaced), even
// ones priced by amount (cents), odd ones by count, and n carts of one
// line per promotion, deterministically from seed. A line's value falls
// anywhere from a little below the lowest threshold (no tier) to a little
// above the highest.
func newWorkload(n int, seed uint64) (*workload, error) {
	rng := rand.New(rand.NewPCG(seed, 20))
	w := &workload{}
	for i := range promotions {
		tiers := int(math.Round(3 * math.Pow(1000, float64(i)/float64(promotions-1))))
		p := gradient.Promotion{ID: fmt.Sprintf("cart-p%02d", i), Metric: gradient.Amount, MinorDigits: 2}
		next, step := int64(100+rng.IntN(10000)), 5000
		if i%2 == 1 {
			p.Metric, p.MinorDigits = gradient.Quantity, 0
			next, step = int64(1+rng.IntN(3)), 5
		}
		for t := range tiers {
			p.Tiers = append(p.Tiers, gradient.Tier{
				ID:        "t" + strconv.Itoa(t),
				Threshold: decimal.New(next, -int32(p.MinorDigits)),
				Reward:    gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(int64(1 + t%50))},
			})
			next += int64(1 + rng.IntN(step))
		}
		m, err := gradient.NewMatcher(p)
		if err != nil {
			return nil, fmt.Errorf("cart: promotion %s: %w", p.ID, err)
		}
		w.promos = append(w.promos, p)
		w.matchers = append(w.matchers, m)
	}
	for range n {
		cart := make([]line, promotions)
		want := make([]string, promotions)
		for l, p := range w.promos {
			scores := w.matchers[l].Scores()
			lo, hi := max(0, scores[0]-scores[0]/10-1), scores[len(scores)-1]+scores[len(scores)-1]/100+1
			s := lo + rng.Int64N(hi-lo+1)
			v := decimal.New(s, -int32(p.MinorDigits))
			if p.Metric == gradient.Quantity {
				cart[l] = line{q: cache.QuantityQuery(p.ID, s), promo: p.ID, value: v.String()}
			} else {
				cart[l] = line{q: cache.AmountQuery(p.ID, v), promo: p.ID, value: v.String()}
			}
			hit, err := w.matchers[l].MatchScore(s)
			switch {
			case errors.Is(err, gradient.ErrNoTier):
			case err != nil:
				return nil, err
			default:
				want[l] = hit.Tier.ID
			}
		}
		w.carts, w.want = append(w.carts, cart), append(w.want, want)
	}
	return w, nil
}

// check compares a way's answer to cart i with the oracle's.
func (w *workload) check(i int, got []string) error {
	if len(got) != len(w.want[i]) {
		return fmt.Errorf("cart %d: %d answers for %d lines", i, len(got), len(w.want[i]))
	}
	for l, g := range got {
		if g != w.want[i][l] {
			return fmt.Errorf("cart %d line %d (%s, value %s): tier %q, oracle %q", i, l, w.carts[i][l].promo, w.carts[i][l].value, g, w.want[i][l])
		}
	}
	return nil
}

func (w *workload) tierCounts() string {
	var s []string
	for _, p := range w.promos {
		s = append(s, strconv.Itoa(len(p.Tiers)))
	}
	return strings.Join(s, ", ")
}

// way prices one cart: a tier ID per line, "" for no tier.
type way struct {
	name  string
	price func(ctx context.Context, cart []line) ([]string, error)
}

func tiersetWay(c *cache.Cache) func(context.Context, []line) ([]string, error) {
	return func(ctx context.Context, cart []line) ([]string, error) {
		qs := make([]cache.Query, len(cart))
		for i := range cart {
			qs[i] = cart[i].q
		}
		rs, err := c.MatchCart(ctx, qs, cache.MatchOptions{})
		if err != nil {
			return nil, err
		}
		out := make([]string, len(rs))
		for i, r := range rs {
			switch {
			case r.Err == nil:
				out[i] = r.Tier.ID
			case errors.Is(r.Err, cache.ErrNoTier):
			default:
				return nil, fmt.Errorf("line %d: %w", i, r.Err)
			}
		}
		return out, nil
	}
}

// sqlWays are the two PostgreSQL forms, on pg's own tables.
type sqlWays struct {
	pool            *pgxpool.Pool
	perLineSQL, one string
}

func newSQLWays(pool *pgxpool.Pool, schema string) *sqlWays {
	tiers := pgx.Identifier{schema, "tiers"}.Sanitize()
	return &sqlWays{
		pool: pool,
		// The index UNIQUE (promotion_id, threshold) answers it with one
		// backward index scan that stops at the first row.
		perLineSQL: `SELECT tier_id FROM ` + tiers + ` WHERE promotion_id = $1 AND threshold <= $2::text::numeric
			ORDER BY threshold DESC LIMIT 1`,
		one: `SELECT t.tier_id FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS l(pid, v, i)
			LEFT JOIN LATERAL (SELECT tier_id FROM ` + tiers + ` WHERE promotion_id = l.pid AND threshold <= l.v::numeric
				ORDER BY threshold DESC LIMIT 1) t ON true
			ORDER BY l.i`,
	}
}

// perLine sends one query per line on one connection, as a request
// handler holding a connection would. pgx prepares each statement once per
// connection and reuses it.
func (s *sqlWays) perLine(ctx context.Context, cart []line) ([]string, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	out := make([]string, len(cart))
	for i, ln := range cart {
		err := conn.QueryRow(ctx, s.perLineSQL, ln.promo, ln.value).Scan(&out[i])
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, err
		}
	}
	return out, nil
}

// oneQuery sends the whole cart as one prepared query.
func (s *sqlWays) oneQuery(ctx context.Context, cart []line) ([]string, error) {
	ids, vals := make([]string, len(cart)), make([]string, len(cart))
	for i, ln := range cart {
		ids[i], vals[i] = ln.promo, ln.value
	}
	rows, err := s.pool.Query(ctx, s.one, ids, vals)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(cart))
	for rows.Next() {
		var id *string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		if id == nil {
			out = append(out, "")
		} else {
			out = append(out, *id)
		}
	}
	return out, rows.Err()
}

// backends are the PostgreSQL server processes serving this program's
// pool, recorded as each connection opens.
type backends struct {
	mu   sync.Mutex
	pids map[uint32]struct{}
}

func newBackends() *backends { return &backends{pids: map[uint32]struct{}{}} }

func (b *backends) afterConnect(_ context.Context, c *pgx.Conn) error {
	b.mu.Lock()
	b.pids[c.PgConn().PID()] = struct{}{}
	b.mu.Unlock()
	return nil
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's utime and stime
// (100 on Linux for every architecture Go supports here).
const clockTicks = 100

// cpu sums utime + stime of the backends, in seconds.
func (b *backends) cpu() (float64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ticks int64
	for pid := range b.pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, fmt.Errorf("PostgreSQL backend %d: %w (the CPU figure needs PostgreSQL on this host)", pid, err)
		}
		// The command name (field 2) may hold spaces; fields after its ')' are fixed.
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			return 0, fmt.Errorf("PostgreSQL backend %d: short /proc stat", pid)
		}
		for _, x := range f[11:13] { // utime, stime: fields 14 and 15
			v, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("PostgreSQL backend %d: %w", pid, err)
			}
			ticks += v
		}
	}
	return float64(ticks) / clockTicks, nil
}
