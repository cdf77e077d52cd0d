package warm

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
)

// DefaultBatch is the number of promotions per Refresh call when
// Options.Batch is zero.
const DefaultBatch = 100

// Cache is what Warm needs of a *cache.Cache.
type Cache interface {
	Refresh(ctx context.Context, promos ...gradient.Promotion) (cache.RefreshReport, error)
	Delete(ctx context.Context, id string, revision int64) (cache.RefreshResult, error)
	Info(ctx context.Context, id string) (cache.Info, error)
	List(ctx context.Context) ([]cache.Info, error)
}

// Options tune Warm. The zero value warms without pruning.
type Options struct {
	// Prune deletes the promotions stored in the cache but absent from
	// promos. Default false: they are only listed in Summary.WouldPrune.
	Prune bool
	// DryRun writes nothing: it computes each promotion's content hash
	// exactly as Refresh would, compares it with the stored version
	// (Cache.Info) and reports what a real run would do.
	DryRun bool
	// Batch is how many promotions go into one Refresh call (each is
	// still its own transaction); Progress is called after each batch.
	// Default DefaultBatch (100).
	Batch int
	// Progress, when set, is called with the promotions handled so far and
	// the total, after every batch. Default nil.
	Progress func(done, total int)
	// Now decides which promotions have already ended (End ≤ Now): they
	// are skipped, since their keys would only sit out the cache's grace
	// period. Default time.Now.
	Now func() time.Time
	// MaxRecordBytes must equal the cache's Options.MaxRecordBytes for a
	// dry run to refuse exactly what Refresh would. Default
	// 64 KiB, the cache's default.
	MaxRecordBytes int
	// MaxPrune caps the promotions one Prune may delete. When the input
	// leaves out more of the stored ones, Warm writes and deletes nothing
	// and returns ErrPruneLimit (a dry run too): a truncated or wrong
	// file must not empty the cache. Default DefaultMaxPrune of the
	// promotions stored before the run (10%, at least 1). Negative is
	// refused (a *ValidationError with Field "options").
	MaxPrune int
}

// DefaultMaxPrune is the prune limit for stored promotions when
// Options.MaxPrune is zero: 10% of them, at least 1.
func DefaultMaxPrune(stored int) int { return max(1, stored/10) }

// Summary is what a warm-up did (or, for a dry run, would do). Every list
// holds promotion IDs, in file order (Pruned and WouldPrune sorted).
type Summary struct {
	DryRun    bool
	Added     []string
	Updated   []string
	Unchanged []string
	// Repaired had the same content but were not whole in Redis (a key
	// evicted or deleted): rewritten, or in a dry run, would be.
	Repaired []string
	// Ended were not written: their End is already past.
	Ended []string
	// Refused were rejected by the cache (Errors says why); nothing of
	// them was written.
	Refused []string
	Errors  []error
	// Pruned were deleted (Prune) or, in a dry run with Prune, would be.
	Pruned []string
	// WouldPrune are stored but not in the file, and were kept (no Prune).
	WouldPrune []string
	// Deleted were deleted because the source says so (Loaded.Deleted),
	// or in a dry run would be; an ordered delete of a promotion that was
	// not stored is listed too (it left its tombstone).
	Deleted []string
	// Stale were not written or deleted because Redis holds a newer
	// revision of them (another writer, such as a watcher, got there
	// first); sorted. Not an error.
	Stale []string
}

// Warm loads promos into c: Added, Updated, or Unchanged when the stored
// content hash matches (nothing written). It is idempotent: a second run
// with the same promotions reports every one Unchanged and writes nothing.
// promos must already be valid and have unique IDs (rules.Parse ensures
// both). A promotion the cache refuses is counted in Refused and the rest
// are still written; the returned error then wraps ErrRefused. A Redis
// error stops the run and is returned with the Summary so far.
func Warm(ctx context.Context, c Cache, promos []gradient.Promotion, opts Options) (Summary, error) {
	return warmWith(ctx, c, promos, nil, nil, opts)
}

// check refuses options out of range, before anything is read.
func (o Options) check() error {
	if o.Batch < 0 {
		return invalid("options", "Batch %d (want 0 for the default, or positive)", o.Batch)
	}
	if o.MaxPrune < 0 {
		return invalid("options", "MaxPrune %d (want 0 for the default, or positive)", o.MaxPrune)
	}
	return nil
}

// warmWith is Warm with source-side deletions, and with the stored
// promotions listed before the source was read (nil: list now).
func warmWith(ctx context.Context, c Cache, promos []gradient.Promotion, deleted []Deletion, stored []cache.Info, opts Options) (Summary, error) {
	if err := opts.check(); err != nil {
		return Summary{}, err
	}
	batch := opts.Batch
	if batch == 0 {
		batch = DefaultBatch
	}
	batch = min(batch, cache.MaxRefreshBatch)
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	sum := Summary{DryRun: opts.DryRun}
	inFile := make(map[string]bool, len(promos))
	live := make([]gradient.Promotion, 0, len(promos))
	t := now()
	for _, p := range promos {
		inFile[p.ID] = true
		if !p.End.IsZero() && !t.Before(p.End) {
			sum.Ended = append(sum.Ended, p.ID)
			continue
		}
		live = append(live, p)
	}
	// List before writing, so a failing Redis fails before anything changes.
	if stored == nil {
		var err error
		if stored, err = c.List(ctx); err != nil {
			return sum, fmt.Errorf("warm: %w", err)
		}
	}
	gone := make(map[string]bool, len(deleted))
	for _, d := range deleted {
		gone[d.ID] = true
	}
	var extra []string
	listedRev := make(map[string]int64, len(stored))
	for _, in := range stored {
		if !inFile[in.ID] && !gone[in.ID] {
			extra = append(extra, in.ID)
			listedRev[in.ID] = in.Revision
		}
	}
	sort.Strings(extra)
	if limit := opts.MaxPrune; opts.Prune {
		if limit == 0 {
			limit = DefaultMaxPrune(len(stored))
		}
		if len(extra) > limit {
			sum.WouldPrune = extra
			return sum, fmt.Errorf("%w: the input leaves out %d of the %d stored promotions, and at most %d may be pruned in one run; nothing was written",
				ErrPruneLimit, len(extra), len(stored), limit)
		}
	}
	done := len(promos) - len(live)
	report := func() {
		if opts.Progress != nil {
			opts.Progress(done, len(promos))
		}
	}
	report()
	var refresh func(ctx context.Context, ps ...gradient.Promotion) (cache.RefreshReport, error)
	if opts.DryRun {
		d, err := newDryRun(c, opts.MaxRecordBytes)
		if err != nil {
			return sum, err
		}
		refresh = d.refresh
	} else {
		refresh = c.Refresh
	}
	for i := 0; i < len(live); i += batch {
		chunk := live[i:min(i+batch, len(live))]
		if err := sum.refreshChunk(ctx, refresh, chunk); err != nil {
			return sum, err
		}
		done += len(chunk)
		report()
	}
	for _, d := range deleted {
		if opts.DryRun {
			sum.Deleted = append(sum.Deleted, d.ID)
			continue
		}
		res, err := c.Delete(ctx, d.ID, d.Revision)
		if err != nil {
			return sum, fmt.Errorf("warm: delete: %w", err)
		}
		sum.recordDelete(res, &sum.Deleted)
	}
	switch {
	case !opts.Prune:
		sum.WouldPrune = extra
	case opts.DryRun:
		sum.Pruned = extra
	default:
		for _, id := range extra {
			// Ordered by the revision the listing saw: a promotion written
			// since with a newer revision (by a watcher, say) is Stale, not
			// pruned. A promotion listed without a revision is unordered.
			res, err := c.Delete(ctx, id, listedRev[id])
			if err != nil {
				return sum, fmt.Errorf("warm: prune: %w", err)
			}
			sum.recordDelete(res, &sum.Pruned)
		}
	}
	sort.Strings(sum.Stale)
	if len(sum.Refused) > 0 {
		return sum, fmt.Errorf("%w: %d of %d: %w", ErrRefused, len(sum.Refused), len(promos), errors.Join(sum.Errors...))
	}
	return sum, nil
}

type refreshFunc = func(ctx context.Context, ps ...gradient.Promotion) (cache.RefreshReport, error)

// refreshChunk refreshes a batch; when the cache refuses the batch (it
// validates all before writing any), it retries one by one to write the
// good ones and name the refused.
func (s *Summary) refreshChunk(ctx context.Context, refresh refreshFunc, chunk []gradient.Promotion) error {
	rep, err := refresh(ctx, chunk...)
	if err == nil || (errors.Is(err, cache.ErrRevisionConflict) && len(rep.Promotions) == len(chunk)) {
		// A revision conflict is reported per promotion: the rest of the
		// batch was written, and retrying would give the same answer.
		s.record(rep)
		s.Errors = append(s.Errors, conflicts(err)...)
		return nil
	}
	if !refusal(err) {
		s.record(rep)
		return fmt.Errorf("warm: %w", err)
	}
	for _, p := range chunk {
		rep, err := refresh(ctx, p)
		switch {
		case err == nil:
			s.record(rep)
		case refusal(err):
			s.Refused = append(s.Refused, p.ID)
			s.Errors = append(s.Errors, err)
		default:
			return fmt.Errorf("warm: %w", err)
		}
	}
	return nil
}

// refusal tells a promotion the cache will not store from a failure to
// store it.
func refusal(err error) bool {
	return errors.Is(err, gradient.ErrInvalid) || errors.Is(err, &cache.ValidationError{Field: "id"}) || errors.Is(err, cache.ErrRevisionConflict)
}

// conflicts splits a Refresh's joined revision conflicts.
func conflicts(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// recordDelete files a Delete's outcome: Stale, or into done.
func (s *Summary) recordDelete(res cache.RefreshResult, done *[]string) {
	if res.Outcome == cache.Stale {
		s.Stale = append(s.Stale, res.ID)
		return
	}
	*done = append(*done, res.ID)
}

func (s *Summary) record(rep cache.RefreshReport) {
	for _, r := range rep.Promotions {
		switch r.Outcome {
		case cache.Added:
			s.Added = append(s.Added, r.ID)
		case cache.Updated:
			s.Updated = append(s.Updated, r.ID)
		case cache.Unchanged:
			s.Unchanged = append(s.Unchanged, r.ID)
		case cache.Repaired:
			s.Repaired = append(s.Repaired, r.ID)
		case cache.Stale:
			s.Stale = append(s.Stale, r.ID)
		case cache.Conflict:
			s.Refused = append(s.Refused, r.ID)
		}
	}
}

// dryRun computes each promotion's version with cache.Version (the
// hash and the checks of Refresh, without writing anything) and
// classifies it against the real cache's Info.
type dryRun struct {
	real Cache
	opts cache.Options
}

func newDryRun(real Cache, maxRecordBytes int) (*dryRun, error) {
	if maxRecordBytes < 0 {
		return nil, fmt.Errorf("warm: dry run: %w", &cache.ValidationError{Field: "options", Detail: fmt.Sprintf("MaxRecordBytes %d", maxRecordBytes)})
	}
	return &dryRun{real: real, opts: cache.Options{MaxRecordBytes: maxRecordBytes}}, nil
}

// refresh refuses a batch exactly as Cache.Refresh does (duplicates, then
// the first invalid promotion, before anything), then reports what
// Refresh would do to each promotion.
func (d *dryRun) refresh(ctx context.Context, ps ...gradient.Promotion) (cache.RefreshReport, error) {
	if len(ps) > cache.MaxRefreshBatch {
		return cache.RefreshReport{}, &cache.ValidationError{Field: "batch", Detail: fmt.Sprintf("%d promotions (max %d)", len(ps), cache.MaxRefreshBatch)}
	}
	versions := make([]string, len(ps))
	seen := make(map[string]int, len(ps))
	for i := range ps {
		if j, dup := seen[ps[i].ID]; dup {
			return cache.RefreshReport{}, &cache.ValidationError{Field: "promotions", Detail: fmt.Sprintf("%q at positions %d and %d", ps[i].ID, j, i)}
		}
		seen[ps[i].ID] = i
		v, err := cache.Version(&ps[i], d.opts)
		if err != nil {
			return cache.RefreshReport{}, err
		}
		versions[i] = v
	}
	out := cache.RefreshReport{Promotions: make([]cache.RefreshResult, 0, len(ps))}
	var conflicts []error
	for i := range ps {
		r := cache.RefreshResult{ID: ps[i].ID, Version: versions[i]}
		in, err := d.real.Info(ctx, r.ID)
		switch {
		case errors.Is(err, cache.ErrNotFound):
			r.Outcome = cache.Added
			out.Added++
		case errors.Is(err, cache.ErrDamaged) && in.Version == r.Version:
			r.Outcome, r.Previous = cache.Repaired, in.Version
			out.Repaired++
		case errors.Is(err, cache.ErrDamaged):
			r.Outcome, r.Previous = cache.Updated, in.Version
			out.Updated++
		case err != nil:
			return out, err
		case ps[i].Revision > 0 && in.Revision > ps[i].Revision,
			ps[i].Revision == 0 && in.Revision > 0 && in.Version != r.Version:
			r.Outcome, r.Version, r.Revision = cache.Stale, in.Version, in.Revision
			out.Stale++
		case ps[i].Revision > 0 && in.Revision == ps[i].Revision && in.Version != r.Version:
			r.Outcome = cache.Conflict
			out.Conflicts++
			conflicts = append(conflicts, &cache.RevisionConflictError{ID: r.ID, Revision: in.Revision, Held: in.Version, Wrote: r.Version})
		case in.Version == r.Version:
			r.Outcome, r.Previous = cache.Unchanged, in.Version
			out.Unchanged++
		default:
			r.Outcome, r.Previous = cache.Updated, in.Version
			out.Updated++
		}
		out.Promotions = append(out.Promotions, r)
	}
	return out, errors.Join(conflicts...)
}
