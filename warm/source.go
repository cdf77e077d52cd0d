package warm

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/rules"
)

// Source is where a warm-up reads its promotions: a rules file ([File]) or
// a database (package github.com/tierset/tierset/pg).
type Source interface {
	// Load returns the valid promotions, with unique IDs, and the ones it
	// skipped because they are invalid. An error means nothing usable was
	// read.
	Load(ctx context.Context) (Loaded, error)
}

// Loaded is what a Source read.
type Loaded struct {
	Promotions []gradient.Promotion
	// Skipped were refused by the source (invalid rows); they are neither
	// written nor pruned, so a bad edit never removes a live promotion.
	Skipped []Skipped
	// Deleted are promotions the source deleted, each with the revision
	// of its deletion (a source that keeps tombstones, or an outbox).
	// FromSource applies them as ordered deletes (cache.Delete with that
	// revision), with or without Prune and outside MaxPrune: a deletion
	// the source states is not a guess from absence. A promotion Redis
	// holds at a newer revision is kept (Summary.Stale).
	Deleted []Deletion
}

// Deletion is one promotion the source deleted, at Revision (0:
// unordered, deleted whatever Redis holds).
type Deletion struct {
	ID       string
	Revision int64
}

// Skipped is one promotion a source refused, by ID, with the reason.
type Skipped struct {
	ID  string
	Err error
}

// File is a rules file parsed with rules.ParseFile. A file is all or
// nothing: any invalid promotion fails Load, so Skipped is always empty.
type File struct {
	Path    string
	Options rules.Options
}

// Load parses the file.
func (f File) Load(ctx context.Context) (Loaded, error) {
	if err := ctx.Err(); err != nil {
		return Loaded{}, err
	}
	ps, err := rules.ParseFile(f.Path, f.Options)
	if err != nil {
		return Loaded{}, err
	}
	return Loaded{Promotions: ps}, nil
}

// FromSource loads src and warms c with it as Warm does, then applies the
// source's deletions (Loaded.Deleted) as ordered deletes. Skipped
// promotions are added to Summary.Refused and Summary.Errors (the error
// then wraps ErrRefused), and their stored versions are kept even with
// Prune: Warm does not see them among the stored promotions.
//
// With Prune, the stored promotions are listed BEFORE the source is read,
// and only those are pruned, each by an ordered Delete at the revision
// the listing saw. So a promotion created after the source was read, and
// written by another writer (a watcher) meanwhile, is never pruned: it
// was not listed, or Redis holds it at a newer revision (Summary.Stale).
// A promotion listed with revision 0 is pruned unordered.
func FromSource(ctx context.Context, c Cache, src Source, opts Options) (Summary, error) {
	if src == nil {
		return Summary{}, invalid("source", "nil source")
	}
	if err := opts.check(); err != nil {
		return Summary{}, err
	}
	var stored []cache.Info
	if opts.Prune {
		var err error
		if stored, err = c.List(ctx); err != nil {
			return Summary{}, fmt.Errorf("warm: %w", err)
		}
		if stored == nil {
			stored = []cache.Info{} // non-nil: listed already
		}
	}
	ld, err := src.Load(ctx)
	if err != nil {
		return Summary{}, fmt.Errorf("warm: source: %w", err)
	}
	skip := make(map[string]bool, len(ld.Skipped))
	for _, s := range ld.Skipped {
		skip[s.ID] = true
	}
	if stored != nil && len(skip) > 0 {
		kept := stored[:0]
		for _, in := range stored {
			if !skip[in.ID] {
				kept = append(kept, in)
			}
		}
		stored = kept
	}
	sum, err := warmWith(ctx, hideStored{c, skip}, ld.Promotions, ld.Deleted, stored, opts)
	if len(ld.Skipped) == 0 {
		return sum, err
	}
	for _, s := range ld.Skipped {
		sum.Refused = append(sum.Refused, s.ID)
		sum.Errors = append(sum.Errors, s.Err)
	}
	if err != nil && !errors.Is(err, ErrRefused) {
		return sum, err
	}
	return sum, fmt.Errorf("%w: %d of %d: %w", ErrRefused, len(sum.Refused), len(ld.Promotions)+len(ld.Skipped), errors.Join(sum.Errors...))
}

// hideStored leaves skipped IDs out of List, so Warm neither prunes nor
// reports them as extra.
type hideStored struct {
	Cache
	skip map[string]bool
}

func (h hideStored) List(ctx context.Context) ([]cache.Info, error) {
	all, err := h.Cache.List(ctx)
	if err != nil || len(h.skip) == 0 {
		return all, err
	}
	out := all[:0:0]
	for _, in := range all {
		if !h.skip[in.ID] {
			out = append(out, in)
		}
	}
	return out, nil
}
