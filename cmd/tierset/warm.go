package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tierset/tierset/internal/text"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/rules"
	"github.com/tierset/tierset/warm"
)

func cmdWarm(ctx context.Context, args []string, e *env) error {
	fs := newFlags("warm", "tierset warm -rules FILE [-redis URL] [-prefix P] [-prune [-max-prune N]] [-dry-run] [-progress auto|always|never]")
	rulesPath := fs.String("rules", "", "rules `FILE` to load (JSON, see package rules); required")
	redisURL := fs.String("redis", "", "Redis `URL` (redis://host:6379/0), or comma-separated cluster seeds;\ndefault $TIERSET_REDIS_URL; empty: an embedded in-memory Redis (nothing persists)")
	prefix := fs.String("prefix", cache.DefaultPrefix, "key `prefix`")
	prune := fs.Bool("prune", false, "delete stored promotions that are not in the file (without it they are only listed)")
	maxPrune := fs.Int("max-prune", 0, "with -prune, refuse the whole run (write and delete nothing) when more than `N` promotions would be deleted;\n0: 10% of the stored promotions, at least 1")
	reindex := fs.Bool("reindex", false, "first fill the promotion index by SCAN and mark the prefix, so List stops scanning the keyspace\n(once no v0.1.0 writer is left, and after keys were deleted or restored by hand; docs/operations.md)")
	dryRun := fs.Bool("dry-run", false, "validate and print what would change; write nothing")
	progressMode := fs.String("progress", "auto", "progress line: auto (only on a terminal), always or never")
	maxBytes := fs.Int64("max-bytes", rules.DefaultMaxBytes, "refuse rules files larger than this many `bytes`")
	if err := fs.parse(args, e); err != nil {
		return err
	}
	if *rulesPath == "" {
		return usagef("-rules is required")
	}
	if *maxPrune < 0 {
		return usagef("-max-prune %d: want ≥ 0", *maxPrune)
	}
	showProgress, err := progressOn(*progressMode, e)
	if err != nil {
		return err
	}
	promos, err := rules.ParseFile(*rulesPath, rules.Options{MaxBytes: *maxBytes})
	if err != nil {
		return err
	}
	be, err := connect(ctx, *redisURL, e)
	if err != nil {
		return err
	}
	defer be.close()
	c, err := cache.New(be.client, cache.Options{Prefix: *prefix})
	if err != nil {
		return usagef("%v", err)
	}
	if *reindex && !*dryRun {
		res, err := c.Reindex(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "reindexed: %d added, %d pruned\n", res.Added, res.Pruned)
	}
	fmt.Fprintf(e.stdout, "%s: %d promotions\n", text.Escape(*rulesPath), len(promos))
	sum, err := warmAndReport(ctx, c, promos, warm.Options{Prune: *prune, DryRun: *dryRun, MaxPrune: *maxPrune},
		newProgress(e.stdout, showProgress, "warming"), e.stdout)
	if errors.Is(err, warm.ErrPruneLimit) {
		fmt.Fprintf(e.stdout, "would prune %d: %s\n", len(sum.WouldPrune), escapeJoin(sum.WouldPrune))
		return fmt.Errorf("%w\nif the file is right, run again with -max-prune %d", err, len(sum.WouldPrune))
	}
	return err
}

func progressOn(mode string, e *env) (bool, error) {
	switch mode {
	case "auto":
		return e.tty, nil
	case "always":
		return true, nil
	case "never":
		return false, nil
	}
	return false, usagef("-progress %q: want auto, always or never", mode)
}

// warmAndReport runs warm.Warm and prints its summary (also when it
// failed part-way, so the operator sees what was done).
func warmAndReport(ctx context.Context, c *cache.Cache, promos []gradient.Promotion, opts warm.Options, p *progress, w io.Writer) (warm.Summary, error) {
	opts.Progress = p.update
	start := time.Now()
	sum, err := warm.Warm(ctx, c, promos, opts)
	if sum.DryRun {
		fmt.Fprintln(w, "dry run: nothing was written; this is what a real run would do")
	}
	listIDs(w, "added", sum.Added)
	listIDs(w, "updated", sum.Updated)
	listIDs(w, "pruned", sum.Pruned)
	listIDs(w, "ended, skipped", sum.Ended)
	if len(sum.WouldPrune) > 0 && !opts.Prune {
		listIDs(w, "stored but not in the file (kept; -prune deletes them)", sum.WouldPrune)
	}
	listIDs(w, "stale, kept (Redis holds a newer revision)", sum.Stale)
	listIDs(w, "refused (reasons below)", sum.Refused)
	fmt.Fprintf(w, "summary: added %d, updated %d, unchanged %d, pruned %d, refused %d",
		len(sum.Added), len(sum.Updated), len(sum.Unchanged), len(sum.Pruned), len(sum.Refused))
	if len(sum.Repaired) > 0 {
		fmt.Fprintf(w, ", repaired %d", len(sum.Repaired))
	}
	if len(sum.Ended) > 0 {
		fmt.Fprintf(w, ", ended %d", len(sum.Ended))
	}
	if len(sum.Stale) > 0 {
		fmt.Fprintf(w, ", stale %d", len(sum.Stale))
	}
	fmt.Fprintf(w, " (%s)\n", time.Since(start).Round(time.Millisecond))
	return sum, err
}

// listIDs prints a labelled, bounded list of promotion IDs.
func listIDs(w io.Writer, label string, ids []string) {
	if len(ids) == 0 {
		return
	}
	const show = 20
	s := escapeJoin(ids[:min(show, len(ids))])
	if len(ids) > show {
		s += fmt.Sprintf(", … and %d more", len(ids)-show)
	}
	fmt.Fprintf(w, "%s: %s\n", label, s)
}

// escapeJoin joins IDs for printing, each escaped: stored IDs need not
// be ones this tool wrote.
func escapeJoin(ids []string) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = text.Escape(id)
	}
	return strings.Join(out, ", ")
}
