package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/internal/opsview"
	"github.com/tierset/tierset/internal/text"
)

const budgetSynopsis = "tierset budget ls|show [-budget NAME] [-order ID] -redis URL [-prefix P] [-json]"

// budgetCmd is tierset budget: its subcommands, in the order help lists
// them, each with the flags it reads besides -redis and -prefix.
var budgetCmd = command{name: "budget", common: []string{"redis", "prefix"}, flags: budgetFlags, subs: []subcommand{
	{"ls", []string{"budget", "json"}}, {"show", []string{"budget", "order", "json"}},
}}

func budgetFlags() *cmdFlags {
	fs := newFlags("budget", budgetSynopsis)
	fs.String("budget", "", "budget `NAME`; required for show (ls lists every budget, or this one)")
	fs.String("order", "", "show: the holds of this order `ID` (its record) instead of the budget")
	fs.String("redis", "", "Redis: host:port, a redis:// or rediss:// `URL`, or comma-separated cluster seeds (default $TIERSET_REDIS_URL); required")
	fs.String("prefix", "tierset", "key `prefix`")
	fs.Bool("json", false, "print JSON (the field names of the console's /api/budgets answers)")
	return fs
}

// cmdBudget lists budgets' caps (ls) or shows one budget, or an order's
// holds (show). It reads the definitions budget.Publish wrote, and writes
// nothing but what every budget read does (holds whose time has passed
// are given back).
func cmdBudget(ctx context.Context, args []string, e *env) error {
	sub, fs, err := budgetCmd.parse(args, e)
	if err != nil {
		return err
	}
	str := func(name string) string { return fs.Lookup(name).Value.String() }
	name, prefix, order := str("budget"), str("prefix"), str("order")
	if err := keyname.Check(prefix); err != nil {
		return usagef("-prefix %s: %v", quoteArg(prefix), err)
	}
	if sub == "show" && name == "" {
		return usagef("show needs -budget")
	}
	if name != "" {
		if err := keyname.Check(name); err != nil {
			return usagef("-budget %s: invalid budget name: %v", quoteArg(name), err)
		}
	}
	if !redisGiven(str("redis")) {
		return usagef("-redis (or $TIERSET_REDIS_URL) is required: a budget lives in a real Redis")
	}
	be, err := connect(ctx, str("redis"), e)
	if err != nil {
		return err
	}
	defer be.close()
	out := output{w: e.stdout, json: str("json") == "true"}
	names, err := budget.List(ctx, be.client, prefix)
	if err != nil {
		return err
	}
	if name != "" && !slices.Contains(names, name) {
		known := "there is no budget under it"
		if len(names) > 0 {
			known = "budgets: " + escapeJoin(names)
		}
		return fmt.Errorf("no budget %s under prefix %s (%s)", quoteArg(name), quoteArg(prefix), known)
	}
	if order != "" {
		b, err := budget.Open(ctx, be.client, name, budget.Options{Prefix: prefix})
		if err != nil {
			return err
		}
		o, err := b.Order(ctx, order)
		if err != nil {
			return err
		}
		v := opsview.BudgetOrderOf(name, o)
		if out.json {
			return out.encode(v)
		}
		return printBudgetOrder(out.w, v)
	}
	if name != "" {
		names = []string{name}
	}
	views := make([]opsview.Budget, 0, len(names))
	for _, n := range names {
		v, err := opsview.ReadBudget(ctx, be.client, prefix, n)
		if err != nil {
			return err
		}
		views = append(views, v)
	}
	if out.json {
		if sub == "show" {
			return out.encode(views[0])
		}
		return out.encode(views)
	}
	if len(views) == 0 {
		fmt.Fprintf(out.w, "no budget under prefix %s\n", text.Escape(prefix))
		return nil
	}
	return printBudgets(out.w, views)
}

// printBudgets prints one line per cap: its budget, promotion, limit,
// used, held and remaining, and the period counted now.
func printBudgets(w io.Writer, vs []opsview.Budget) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUDGET\tPROMOTION\tCAP\tLIMIT\tUSED\tHELD\tREMAINING\tPERIOD\t")
	for _, v := range vs {
		if v.Error != "" {
			fmt.Fprintf(tw, "%s\t-\t%s\t\t\t\t\t\t\n", text.Escape(v.Name), text.Escape(v.Error))
		}
		for _, p := range v.Promotions {
			if p.MaxPerCart > 0 {
				fmt.Fprintf(tw, "%s\t%s\tuses per cart\t%d\t-\t-\t-\t\t\n", text.Escape(v.Name), text.Escape(p.ID), p.MaxPerCart)
			}
			if len(p.Caps) == 0 && p.MaxPerCart == 0 {
				fmt.Fprintf(tw, "%s\t%s\tnone\t\t\t\t\t\t\n", text.Escape(v.Name), text.Escape(p.ID))
			}
			for _, c := range p.Caps {
				used := fmt.Sprint(c.Used)
				if c.Values > 0 {
					used = fmt.Sprintf("%d (%d values, most %d)", c.Used, c.Values, c.Most)
				}
				period := ""
				if c.Start != nil {
					period = c.Start.Format(time.RFC3339) + " .. " + c.End.Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s\t\n", text.Escape(v.Name), text.Escape(p.ID), text.Escape(c.Cap),
					c.Limit, used, c.Held, c.Remaining, period)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	holds := int64(0)
	for _, v := range vs {
		holds += v.Holds
	}
	fmt.Fprintf(w, "%s, %s held\n", count(len(vs), "budget", "budgets"), count(int(holds), "order", "orders"))
	return nil
}

func printBudgetOrder(w io.Writer, v opsview.BudgetOrder) error {
	t := func(x *time.Time) string {
		if x == nil {
			return "-"
		}
		return x.Format(time.RFC3339Nano)
	}
	fmt.Fprintf(w, "order %s in budget %s: %s\n", text.Escape(v.Order), text.Escape(v.Budget), v.State)
	fmt.Fprintf(w, "reserved %s, hold ends %s, confirmed %s\n", t(v.Reserved), t(v.Expires), t(v.Confirmed))
	keys := make([]string, 0, len(v.Attributes))
	for k := range v.Attributes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "attribute %s = %s\n", text.Escape(k), text.Escape(v.Attributes[k]))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROMOTION\tUSES\tAMOUNT\t")
	for _, l := range v.Lines {
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", text.Escape(l.Promotion), l.Uses, l.Amount)
	}
	return tw.Flush()
}
