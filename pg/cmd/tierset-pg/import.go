package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/rules"
	"github.com/tierset/tierset/warm"
)

// cmdImport loads a rules file into the tables in one transaction. The
// refusals are warm's: the file is parsed as `tierset warm -rules` parses
// it (a file that does not parse is refused whole), a promotion gradient
// refuses is named and not written (exit 1), and -prune deletes the rows
// the file lacks only up to -max-prune (default warm.DefaultMaxPrune of
// the rows), else the whole import is refused.
func cmdImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("import", stderr)
	rulesPath := f.fs.String("rules", "", "rules `FILE` to load (the JSON `tierset warm -rules` reads); required")
	prune := f.fs.Bool("prune", false, "delete promotions that are not in the file (without it they are only listed)")
	maxPrune := f.fs.Int("max-prune", 0, "with -prune, refuse the whole import when more than `N` promotions would be deleted;\n0: 10% of the stored promotions, at least 1")
	dryRun := f.fs.Bool("dry-run", false, "validate and print what would change; write nothing")
	if err := f.parse(args); err != nil {
		return err
	}
	if *rulesPath == "" {
		return usagef("-rules is required")
	}
	if *maxPrune < 0 {
		return usagef("-max-prune %d: want ≥ 0", *maxPrune)
	}
	promos, err := rules.ParseFile(*rulesPath, rules.Options{})
	if err != nil {
		return err
	}
	pool, r, err := f.rules(ctx, stdout)
	if err != nil {
		return err
	}
	defer pool.Close()
	stored, err := r.Load(ctx)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	storedAs := map[string]string{} // canonical content of each stored promotion
	for _, p := range stored.Promotions {
		have[p.ID] = true
		storedAs[p.ID] = canonical(p)
	}
	for _, s := range stored.Skipped {
		have[s.ID] = true
	}
	inFile := map[string]bool{}
	for _, p := range promos {
		inFile[p.ID] = true
	}
	var absent []string
	for id := range have {
		if !inFile[id] {
			absent = append(absent, id)
		}
	}
	slices.Sort(absent)
	if *prune {
		limit := *maxPrune
		if limit == 0 {
			limit = warm.DefaultMaxPrune(len(have))
		}
		if len(absent) > limit {
			return fmt.Errorf("%w: -prune would delete %d promotions (%v), over the limit of %d; nothing was written\nif the file is right, run again with -max-prune %d",
				warm.ErrPruneLimit, len(absent), absent, limit, len(absent))
		}
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	var added, replaced, unchanged, refused, deleted []string
	var refusals []error
	for _, p := range promos {
		if c, ok := storedAs[p.ID]; ok && c == canonical(p) {
			// Saving it again would bump its revision and make every
			// watcher reload a promotion whose content did not change.
			unchanged = append(unchanged, p.ID)
			continue
		}
		// A savepoint per promotion: a refused one leaves the rest of the
		// transaction usable.
		sp, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		err = r.Save(ctx, sp, p)
		var ve *gradient.ValidationError
		switch {
		case errors.As(err, &ve):
			_ = sp.Rollback(ctx)
			refused = append(refused, p.ID)
			refusals = append(refusals, err)
			continue
		case err != nil:
			return err
		}
		if err := sp.Commit(ctx); err != nil {
			return err
		}
		if have[p.ID] {
			replaced = append(replaced, p.ID)
		} else {
			added = append(added, p.ID)
		}
	}
	if *prune {
		for _, id := range absent {
			if _, err := r.Delete(ctx, tx, id); err != nil {
				return err
			}
			deleted = append(deleted, id)
		}
	}
	if *dryRun {
		fmt.Fprintln(stdout, "dry run: nothing was written; this is what a real import would do")
	} else if err := tx.Commit(ctx); err != nil {
		return err
	}
	show := func(label string, ids []string) {
		if len(ids) > 0 {
			fmt.Fprintf(stdout, "%s: %v\n", label, ids)
		}
	}
	show("added", added)
	show("replaced", replaced)
	show("unchanged (not written)", unchanged)
	show("deleted", deleted)
	if !*prune {
		show("stored but not in the file (kept; -prune deletes them)", absent)
	}
	show("refused (reasons below)", refused)
	for _, e := range refusals {
		fmt.Fprintf(stdout, "  %v\n", e)
	}
	if len(added)+len(replaced)+len(deleted) == 0 && len(refused) == 0 {
		fmt.Fprintln(stdout, "nothing changed: the tables already hold this file")
	}
	fmt.Fprintf(stdout, "summary: added %d, replaced %d, unchanged %d, deleted %d, refused %d\n",
		len(added), len(replaced), len(unchanged), len(deleted), len(refused))
	if len(refused) > 0 {
		return fmt.Errorf("%w: %d promotions not imported", warm.ErrRefused, len(refused))
	}
	return nil
}

// canonical is p's content as one comparable string: its revision left
// out (not content), amounts by value (10.00 and 10 alike), times in UTC,
// and an empty list like none, so a promotion read back from the tables
// equals the one the file gave when nothing differs.
func canonical(p gradient.Promotion) string {
	p.Revision = 0
	p.Start, p.End = p.Start.UTC(), p.End.UTC()
	p.Tiers = slices.Clone(p.Tiers)
	for i := range p.Tiers {
		if len(p.Tiers[i].Gifts) == 0 {
			p.Tiers[i].Gifts = nil
		}
	}
	b, err := json.Marshal(p) // decimal.Decimal marshals its value's shortest text
	if err != nil {
		return "unencodable: " + err.Error() // never equal to a stored one's, so it is written
	}
	return string(b)
}
