// Package warm is the warm-up job: it loads promotions (usually parsed by
// the rules package) into a [cache.Cache] and reports what changed.
//
//	promos, err := rules.ParseFile("rules.json", rules.Options{})
//	if err != nil {
//		return err
//	}
//	sum, err := warm.Warm(ctx, c, promos, warm.Options{Prune: true})
//	// sum counts Added, Updated, Unchanged, Pruned and Refused
//
// [FromSource] does the same from a [Source] such as pg.Rules, ordered
// by revision.
//
// [Warm] is idempotent: the cache stores a content hash with every
// promotion, so a second run with the same promotions reports all of them
// Unchanged and writes nothing. With [Options].Prune, promotions stored
// under the prefix but absent from the input are deleted; without it they
// are only listed ([Summary].WouldPrune). A prune that would delete more
// than [Options].MaxPrune (by default 10% of the stored promotions, at
// least 1) is refused whole: nothing is written or deleted, the error
// wraps [ErrPruneLimit] and WouldPrune lists what would have gone, so a
// truncated or wrong file cannot empty the cache. [Options].DryRun validates,
// computes every content hash exactly as the cache would, compares with
// the stored versions and writes nothing to the cache.
//
// A promotion the cache refuses (a record over its MaxRecordBytes, a score
// it reserves) is counted in [Summary].Refused with its reason; the others
// are still written, and the error wraps [ErrRefused]; so is a promotion
// whose revision Redis already holds with other content
// ([cache.ErrRevisionConflict]: retrying would give the same answer).
// Promotions whose
// window has already ended are skipped ([Summary].Ended): their keys would
// only sit out the cache's grace period, and writing them again on every
// run would break idempotence.
//
// # Ordering
//
// Every write is ordered by the promotions' revisions (see
// [gradient.Promotion].Revision and "Ordering of writers" in
// docs/design.md): a promotion Redis holds at a newer revision, written
// meanwhile by another writer such as a watcher, is not overwritten and
// is listed in [Summary].Stale. A [Source] can report deletions with
// their revisions ([Loaded].Deleted); [FromSource] applies them as
// ordered deletes. Pruning deletes only promotions the source does not
// know, each by an ordered Delete at the revision the listing saw, so a
// promotion written since at a newer revision is kept (Stale); and
// [FromSource] lists the stored promotions before it reads the source, so
// a promotion created after that read is never among those pruned. A
// promotion stored with revision 0 (unordered) is pruned unordered.
package warm
