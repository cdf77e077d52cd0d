package cache

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/score"
)

func amountPromo(id string, thresholds ...string) gradient.Promotion {
	p := gradient.Promotion{ID: id, Metric: gradient.Amount, MinorDigits: 2}
	for i, th := range thresholds {
		p.Tiers = append(p.Tiers, gradient.Tier{ID: "t" + strconv.Itoa(i), Threshold: decimal.RequireFromString(th),
			Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(1)}})
	}
	return p
}

func mutate(p gradient.Promotion, f func(p *gradient.Promotion)) gradient.Promotion {
	p.Tiers = append([]gradient.Tier(nil), p.Tiers...)
	f(&p)
	return p
}

// TestBadInput: every bad input gets a typed error (errors.Is) and writes
// nothing under the cache's prefix. Corrupt-data rows plant bytes under
// their own prefix and check the planted keys are all that is there.
func TestBadInput(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		good := simplePromotion("good", 3, 5)
		refresh := func(ps ...gradient.Promotion) func(ctx context.Context, c *Cache) error {
			return func(ctx context.Context, c *Cache) error { _, err := c.Refresh(ctx, ps...); return err }
		}
		match := func(q Query) func(ctx context.Context, c *Cache) error {
			return func(ctx context.Context, c *Cache) error {
				_, err := c.Match(ctx, q, MatchOptions{Next: true})
				return err
			}
		}
		cartLine := func(q Query) func(ctx context.Context, c *Cache) error {
			return func(ctx context.Context, c *Cache) error {
				rs, err := c.MatchCart(ctx, []Query{QuantityQuery("good", 4), q}, MatchOptions{})
				if err != nil {
					return err
				}
				if rs[0].Err != nil {
					return errors.New("good line failed: " + rs[0].Err.Error())
				}
				return rs[1].Err
			}
		}
		batch := make([]gradient.Promotion, 10)
		for i := range batch {
			batch[i] = simplePromotion("batch"+strconv.Itoa(i), 1, 2)
		}
		batch[7].Tiers[1].Threshold = decimal.NewFromInt(1) // duplicate threshold in #8 of 10

		rows := []struct {
			name string
			run  func(ctx context.Context, c *Cache) error
			want []error
		}{
			{"duplicate thresholds", refresh(simplePromotion("p", 3, 5, 3)), []error{gradient.ErrInvalid, gradient.ErrDuplicateThreshold}},
			{"duplicate amount thresholds 9.9 and 9.90", refresh(amountPromo("p", "9.9", "9.90")), []error{gradient.ErrDuplicateThreshold}},
			{"zero threshold", refresh(simplePromotion("p", 0, 5)), []error{gradient.ErrInvalid, gradient.ErrThreshold}},
			{"negative threshold", refresh(simplePromotion("p", -3, 5)), []error{gradient.ErrThreshold}},
			{"fractional count threshold", refresh(mutate(good, func(p *gradient.Promotion) { p.Tiers[0].Threshold = decimal.RequireFromString("2.5") })), []error{gradient.ErrThreshold}},
			{"sub-cent amount", refresh(amountPromo("p", "99.999")), []error{gradient.ErrInvalid, gradient.ErrThreshold}},
			{"amount of 2^53+1 minor units", refresh(amountPromo("p", "90071992547409.93")), []error{gradient.ErrThreshold}},
			{"amount of exactly 2^53 minor units", refresh(amountPromo("p", "90071992547409.92")), []error{gradient.ErrInvalid, gradient.ErrThreshold}},
			{"malformed decimal", func(ctx context.Context, c *Cache) error {
				_, err := score.ParseAmount("12.3.4", 2)
				return err
			}, []error{score.ErrMalformed}},
			{"empty tier list", refresh(gradient.Promotion{ID: "p", Metric: gradient.Quantity}), []error{gradient.ErrNoTiers}},
			{"duplicate tier ids", refresh(mutate(good, func(p *gradient.Promotion) { p.Tiers[1].ID = p.Tiers[0].ID })), []error{gradient.ErrDuplicateTierID}},
			{"id with braces", refresh(simplePromotion("a{b}", 1)), []error{gradient.ErrInvalid, gradient.ErrBadID}},
			{"id with space", refresh(simplePromotion("a b", 1)), []error{gradient.ErrBadID}},
			{"id with newline", refresh(simplePromotion("a\nb", 1)), []error{gradient.ErrBadID}},
			{"id of 200 bytes", refresh(simplePromotion(strings.Repeat("x", 200), 1)), []error{gradient.ErrBadID}},
			{"empty id", refresh(simplePromotion("", 1)), []error{gradient.ErrBadID}},
			{"window end before start", refresh(mutate(good, func(p *gradient.Promotion) {
				p.Start, p.End = time.Now(), time.Now().Add(-time.Hour)
			})), []error{gradient.ErrBadWindow}},
			{"window end equals start", refresh(mutate(good, func(p *gradient.Promotion) { p.Start = time.Now(); p.End = p.Start })), []error{gradient.ErrBadWindow}},
			{"unknown metric", refresh(mutate(good, func(p *gradient.Promotion) { p.Metric = 9 })), []error{gradient.ErrBadMetric}},
			{"percent over 100", refresh(mutate(good, func(p *gradient.Promotion) { p.Tiers[0].Reward.Percent = decimal.NewFromInt(101) })), []error{gradient.ErrBadReward}},
			{"gift qty 0", refresh(mutate(good, func(p *gradient.Promotion) { p.Tiers[0].Gifts = []gradient.Gift{{SKU: "s", Qty: 0}} })), []error{gradient.ErrBadGift}},
			{"record over MaxRecordBytes", func(ctx context.Context, c *Cache) error {
				small, err := New(c.client, Options{Prefix: c.prefix, MaxRecordBytes: 40})
				if err != nil {
					return err
				}
				_, err = small.Refresh(ctx, good)
				return err
			}, []error{gradient.ErrInvalid}},
			{"one invalid in a batch of 10", refresh(batch...), []error{gradient.ErrInvalid, gradient.ErrDuplicateThreshold}},
			{"same promotion twice in a batch", refresh(good, good), []error{&ValidationError{Field: "promotions"}}},
			{"negative query value", match(QuantityQuery("good", -1)), []error{&ValidationError{Field: "query"}, gradient.ErrBadValue}},
			{"negative amount in a cart line", cartLine(AmountQuery("good", decimal.RequireFromString("-0.01"))), []error{&ValidationError{Field: "query"}}},
			{"query value ≥ 2^53", match(QuantityQuery("good", 1<<53)), []error{&ValidationError{Field: "query"}, gradient.ErrBadValue}},
			{"query with unknown metric", match(Query{Promotion: "good", Metric: 7, Value: decimal.NewFromInt(1)}), []error{&ValidationError{Field: "query"}}},
			{"query id with brace", match(QuantityQuery("go{od", 1)), []error{&ValidationError{Field: "id"}, gradient.ErrBadID}},
			{"unknown promotion", match(QuantityQuery("nope", 4)), []error{ErrNotFound}},
			{"unknown promotion in a cart", cartLine(QuantityQuery("nope", 4)), []error{ErrNotFound}},
			{"cart of 1001 lines", func(ctx context.Context, c *Cache) error {
				_, err := c.MatchCart(ctx, make([]Query, MaxCartLines+1), MatchOptions{})
				return err
			}, []error{&ValidationError{Field: "batch"}}},
			{"delete bad id", func(ctx context.Context, c *Cache) error { _, err := c.Delete(ctx, "a b", 0); return err }, []error{&ValidationError{Field: "id"}}},
			{"info bad id", func(ctx context.Context, c *Cache) error { _, err := c.Info(ctx, "a}"); return err }, []error{&ValidationError{Field: "id"}}},
			{"nil client", func(ctx context.Context, c *Cache) error { _, err := New(nil, Options{}); return err }, []error{&ValidationError{Field: "client"}}},
			{"prefix with brace", func(ctx context.Context, c *Cache) error {
				_, err := New(c.client, Options{Prefix: "a{b}"})
				return err
			}, []error{&ValidationError{Field: "options"}}},
			{"negative grace", func(ctx context.Context, c *Cache) error {
				_, err := New(c.client, Options{Grace: -time.Second})
				return err
			}, []error{&ValidationError{Field: "options"}}},
			{"grace under 1ms", func(ctx context.Context, c *Cache) error {
				_, err := New(c.client, Options{Grace: time.Microsecond})
				return err
			}, []error{&ValidationError{Field: "options"}}},
			{"negative MaxRecordBytes", func(ctx context.Context, c *Cache) error {
				_, err := New(c.client, Options{MaxRecordBytes: -1})
				return err
			}, []error{&ValidationError{Field: "options"}}},
			{"negative RefreshRetries", func(ctx context.Context, c *Cache) error {
				_, err := New(c.client, Options{RefreshRetries: -1})
				return err
			}, []error{&ValidationError{Field: "options"}}},
			{"TombstoneTTL under 1ms", func(ctx context.Context, c *Cache) error {
				_, err := New(c.client, Options{TombstoneTTL: time.Microsecond})
				return err
			}, []error{&ValidationError{Field: "options"}}},
			{"cancelled context refresh", func(ctx context.Context, c *Cache) error {
				ctx, cancel := context.WithCancel(ctx)
				cancel()
				_, err := c.Refresh(ctx, good)
				return err
			}, []error{context.Canceled}},
			{"cancelled context cart", func(ctx context.Context, c *Cache) error {
				ctx, cancel := context.WithCancel(ctx)
				cancel()
				_, err := c.MatchCart(ctx, []Query{QuantityQuery("good", 4)}, MatchOptions{})
				return err
			}, []error{context.Canceled}},
		}
		for i, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				ctx := testCtx(t)
				prefix := b.Prefix + "-" + strconv.Itoa(i)
				c, err := New(b.Client, Options{Prefix: prefix})
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(row.name, "query") || strings.Contains(row.name, "cart") || strings.Contains(row.name, "unknown promotion") {
					if _, err := c.Refresh(ctx, good); err != nil {
						t.Fatal(err)
					}
				}
				before, err := testredis.CountKeys(ctx, b.Client, prefix+":")
				if err != nil {
					t.Fatal(err)
				}
				err = row.run(ctx, c)
				if err == nil {
					t.Fatalf("no error, want %v", row.want)
				}
				for _, w := range row.want {
					if !errors.Is(err, w) {
						t.Fatalf("error %q does not match %v", err, w)
					}
				}
				after, err2 := testredis.CountKeys(ctx, b.Client, prefix+":")
				if err2 != nil || after != before {
					t.Fatalf("keys under prefix: %d before, %d after (%v): something was written", before, after, err2)
				}
			})
		}
	})
}

// TestCorruptData plants bytes this package did not write and checks each
// read gives ErrCorrupt (never a panic), reported to the Observer, and
// that the read wrote nothing.
func TestCorruptData(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		obs := &countingObserver{}
		c := newCache(t, b, Options{Observer: obs})
		if _, err := c.Refresh(ctx, simplePromotion("g", 2)); err != nil {
			t.Fatal(err)
		}
		valid, err := c.Match(ctx, QuantityQuery("g", 3), MatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		plant := []struct {
			name   string
			member string
		}{
			{"garbage", "not msgpack at all"},
			{"str32 of 2 GiB", "\xdb\x7f\xff\xff\xff"},
			{"array32 huge", "\xdd\x7f\xff\xff\xff"},
			{"bin32 huge", "\xc6\x7f\xff\xff\xff"},
			{"map32 huge", "\xdf\x7f\xff\xff\xff"},
			{"valid record plus trailing byte", mustMember(t, c, "x") + "\x00"},
			{"oversized", strings.Repeat("a", defaultMaxRecordBytes+1)},
		}
		for i, p := range plant {
			id := "bad" + strconv.Itoa(i)
			if err := b.Client.ZAdd(ctx, c.tiersKey(id), redis.Z{Score: 1, Member: p.member}).Err(); err != nil {
				t.Fatal(err)
			}
			writes := recordWrites(t, b)
			for _, next := range []bool{false, true} {
				_, err := c.Match(ctx, QuantityQuery(id, 5), MatchOptions{Next: next})
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s (next=%v): %v, want ErrCorrupt", p.name, next, err)
				}
			}
			if w := writes(); len(w) != 0 {
				t.Fatalf("%s: a read wrote %v", p.name, w)
			}
		}
		if obs.decodeErrors.Load() < int64(len(plant)) {
			t.Fatalf("observer saw %d decode errors", obs.decodeErrors.Load())
		}
		// Corrupt gift bytes under the hit's version.
		for _, raw := range []string{"\xdb\x7f\xff\xff\xff", "\x91\x93\xa1s\x00\xa0", "\x91\x93\xa1s\x01\xa0\xc0"} {
			if err := b.Client.HSet(ctx, c.giftsKey("g", valid.Version), "tier0", raw).Err(); err != nil {
				t.Fatal(err)
			}
			r, err := c.Match(ctx, QuantityQuery("g", 3), MatchOptions{Gifts: true})
			if !errors.Is(err, ErrCorrupt) || r.Tier == nil || r.Tier.Gifts != nil {
				t.Fatalf("corrupt gifts %q: %+v %v", raw, r, err)
			}
		}
		// Corrupt meta.
		if err := b.Client.HSet(ctx, c.metaKey("g"), metaTiers, "many").Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Info(ctx, "g"); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("corrupt meta: %v", err)
		}
		if _, err := c.List(ctx); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("corrupt meta in List: %v", err)
		}
	})
}

func mustMember(t *testing.T, c *Cache, tier string) string {
	t.Helper()
	e, err := encodePromotion(&gradient.Promotion{ID: "x", Metric: gradient.Quantity, Tiers: []gradient.Tier{{ID: tier, Threshold: decimal.NewFromInt(1),
		Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(1)}}}}, c.maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	return e.members[0]
}

// TestUnreachable: a Redis nobody listens on gives errors that wrap the
// network cause, on every call, and no panic.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	// go-redis retries a refused dial 5 times, 100 ms apart by default:
	// half a second per call that says nothing about the cache.
	rc := redis.NewClient(&redis.Options{Addr: testredis.ClosedAddr(t), MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		DialerRetryTimeout: time.Millisecond, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rc.Close() })
	c, err := New(rc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	calls := map[string]func() error{
		"refresh": func() error { _, err := c.Refresh(ctx, simplePromotion("p", 1)); return err },
		"match":   func() error { _, err := c.Match(ctx, QuantityQuery("p", 1), MatchOptions{}); return err },
		"cart": func() error {
			_, err := c.MatchCart(ctx, []Query{QuantityQuery("p", 1), QuantityQuery("q", 1)}, MatchOptions{Next: true})
			return err
		},
		"delete": func() error { _, err := c.Delete(ctx, "p", 0); return err },
		"info":   func() error { _, err := c.Info(ctx, "p"); return err },
		"list":   func() error { _, err := c.List(ctx); return err },
	}
	for name, call := range calls {
		err := call()
		var op *net.OpError
		if !errors.As(err, &op) {
			t.Fatalf("%s: %v (%T) does not wrap *net.OpError", name, err, err)
		}
	}
}
