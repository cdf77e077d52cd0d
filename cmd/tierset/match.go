package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/examples"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/matchfmt"
	"github.com/tierset/tierset/internal/text"
	"github.com/tierset/tierset/rules"
	"github.com/tierset/tierset/warm"
)

func cmdMatch(ctx context.Context, args []string, e *env) error {
	fs := newFlags("match", "tierset match -promo ID -value V [-base AMOUNT] [-rounding MODE] [-at TIME] [-redis URL | -rules FILE] [-prefix P]")
	promo := fs.String("promo", "", "promotion `ID`; required")
	value := fs.String("value", "", "the cart line's `value` in the promotion's metric: items, or money in major units; required")
	base := fs.String("base", "", "the money the reward applies to (the line total), for the discount;\ndefault: the value itself for amount promotions; quantity promotions need it")
	rounding := fs.String("rounding", "half-up", "how the discount is rounded to the currency's minor unit: down, half-up, half-even or up")
	at := fs.String("at", "", "match as of this RFC 3339 `time` (default now)")
	redisURL := fs.String("redis", "", "Redis `URL`, or comma-separated cluster seeds;\ndefault $TIERSET_REDIS_URL; empty: an embedded in-memory Redis loaded from -rules")
	rulesPath := fs.String("rules", "", "rules `FILE` warmed into the embedded Redis first (only without -redis; default: the built-in "+examples.RulesName+")")
	prefix := fs.String("prefix", cache.DefaultPrefix, "key `prefix`")
	if err := fs.parse(args, e); err != nil {
		return err
	}
	if *promo == "" || *value == "" {
		return usagef("-promo and -value are required")
	}
	if *redisURL != "" && *rulesPath != "" {
		return usagef("-rules only applies without -redis (with -redis, match reads what warm stored)")
	}
	q, err := parseMatchArgs(*value, *base, *rounding, *at)
	if err != nil {
		return err
	}
	var be *backend
	if *rulesPath != "" {
		be, err = connectEmbedded(e) // -rules asks for the embedded Redis, whatever $TIERSET_REDIS_URL says
	} else {
		be, err = connect(ctx, *redisURL, e)
	}
	if err != nil {
		return err
	}
	defer be.close()
	if be.embedded {
		promos, path, err := loadRules(*rulesPath)
		if err != nil {
			return err
		}
		c, err := cache.New(be.client, cache.Options{Prefix: *prefix})
		if err != nil {
			return usagef("%v", err)
		}
		sum, err := warm.Warm(ctx, c, promos, warm.Options{})
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "tierset: warmed %d promotions from %s into the embedded Redis\n", len(sum.Added), text.Escape(path))
	}
	return matchOne(ctx, be, *prefix, *promo, q, e.stdout)
}

// matchQuery is a parsed match request.
type matchQuery = matchfmt.Query

// parseMatchArgs parses match's flags; a bad one is a usage error.
func parseMatchArgs(value, base, rounding, at string) (matchQuery, error) {
	q, err := matchfmt.Parse(value, base, rounding, at)
	if err != nil {
		return q, usagef("%v", err)
	}
	return q, nil
}

// matchOne looks the promotion up (for its metric and currency digits),
// matches the value and prints the answer. Reaching no tier is an
// answer; an absent or inactive promotion is an error.
func matchOne(ctx context.Context, be *backend, prefix, id string, q matchQuery, w io.Writer) error {
	probe, err := cache.New(be.client, cache.Options{Prefix: prefix, Now: q.Now})
	if err != nil {
		return usagef("%v", err)
	}
	info, err := probe.Info(ctx, id)
	if errors.Is(err, cache.ErrNotFound) {
		return fmt.Errorf("promotion %s: not found under prefix %s", quoteArg(id), quoteArg(prefix))
	}
	if err != nil {
		return err
	}
	// Amount queries are encoded with the cache's MinorDigits, which must
	// be the promotion's own.
	opts := cache.Options{Prefix: prefix, Now: q.Now, MinorDigits: info.MinorDigits}
	c, err := cache.New(be.client, opts)
	if err != nil {
		return err
	}
	res, err := c.Match(ctx, cache.Query{Promotion: id, Metric: info.Metric, Value: q.Value}, cache.MatchOptions{Next: true, Gifts: true})
	if err != nil && res.Err == nil { // transport or context failure: no answer at all
		return err
	}
	printResult(w, info, q, res)
	switch {
	case res.Err == nil, errors.Is(res.Err, cache.ErrNoTier):
		return nil
	case errors.Is(res.Err, cache.ErrNotActive):
		return fmt.Errorf("promotion %s is not active at %s", quoteArg(id), q.Now().UTC().Format(time.RFC3339))
	}
	return res.Err
}

func printResult(w io.Writer, info cache.Info, q matchQuery, res cache.Result) {
	fmt.Fprintf(w, "promotion %s: %s, %s, %d minor digits, %d tiers, version %s\n",
		text.Escape(info.ID), rules.MetricName(info.Metric), rules.KindName(info.Kind), gradient.Digits(info.MinorDigits), info.Tiers, text.Escape(res.Version))
	fmt.Fprintf(w, "  value:    %s\n", showMatched(info, q.Value))
	switch {
	case errors.Is(res.Err, cache.ErrNotActive):
		fmt.Fprintf(w, "  not active at %s (window %s)\n", q.Now().UTC().Format(time.RFC3339), window(info))
		return
	case errors.Is(res.Err, cache.ErrNoTier):
		fmt.Fprintln(w, "  tier:     none reached")
	case res.Err != nil:
		fmt.Fprintf(w, "  error:    %s\n", text.Escape(res.Err.Error()))
		return
	default:
		t := res.Tier
		fmt.Fprintf(w, "  tier:     %s (threshold %s)\n", text.Escape(t.ID), showValue(info, t.Threshold))
		fmt.Fprintf(w, "  reward:   %s\n", describeReward(t.Reward))
		fmt.Fprintf(w, "  discount: %s\n", discount(info, q, t.Reward))
		if t.HasGifts {
			var gs []string
			for _, g := range t.Gifts {
				s := fmt.Sprintf("%d × %s", g.Qty, text.Escape(g.SKU))
				if g.Name != "" {
					s += fmt.Sprintf(" (%s)", text.Escape(g.Name))
				}
				gs = append(gs, s)
			}
			fmt.Fprintf(w, "  gifts:    %s\n", strings.Join(gs, ", "))
		} else {
			fmt.Fprintln(w, "  gifts:    none")
		}
	}
	if n := res.Next; n != nil {
		fmt.Fprintf(w, "  next:     %s at %s: %s more for %s\n", text.Escape(n.ID), showValue(info, n.Threshold), showValue(info, res.Shortfall), describeReward(n.Reward))
	} else {
		fmt.Fprintln(w, "  next:     none (top tier)")
	}
}

var (
	window         = matchfmt.Window
	showMatched    = matchfmt.ShowMatched
	showValue      = matchfmt.ShowValue
	describeReward = matchfmt.DescribeReward
	discount       = matchfmt.Discount
)

// parseAmountArg parses a non-negative decimal flag; a bad one is a usage error.
func parseAmountArg(flag, s, example string) (decimal.Decimal, error) {
	d, err := matchfmt.ParseAmount(flag, s, example)
	if err != nil {
		return d, usagef("%v", err)
	}
	return d, nil
}
