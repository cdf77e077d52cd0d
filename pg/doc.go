// Package pg keeps tierset's source of truth in PostgreSQL: Redis is the
// index, the database is the truth.
//
//	if _, err := pg.Migrate(ctx, pool, "tierset"); err != nil { ... }
//	r, err := pg.NewRules(pool, "tierset")
//	sum, err := warm.FromSource(ctx, c, r, warm.Options{}) // database → Redis
//	go pg.Watch(ctx, pool, r, c, pg.WatchOptions{})         // and every change after
//
// The minor_digits column holds the currency's digit count itself (2 for
// USD, 0 for JPY); [Rules] reads it into gradient.Promotion.MinorDigits
// (0 becomes gradient.NoMinorDigits) and [Rules.Save] writes
// gradient.Digits of it.
//
//   - [Migrate] applies the embedded, idempotent SQL migrations to one
//     schema: promotions, tiers and gifts (money as NUMERIC, with CHECK and
//     UNIQUE constraints refusing what package gradient refuses), and a
//     delay-queue outbox.
//   - Revisions: triggers give a promotion a new revision (one sequence
//     per schema) in the transaction of every change to it, its tiers or
//     its gifts, and a deletion a tombstone row with a revision of its
//     own. Every writer here passes them to the cache, which refuses a
//     write older than what it holds (cache.Stale), so whichever writer
//     comes last, Redis never goes back to an older version.
//   - [Rules] loads promotions into []gradient.Promotion, with their
//     revisions, and the tombstones as warm.Deletion, from one snapshot,
//     and implements warm.Source, so warm.FromSource warms Redis from the
//     database as the CLI warms it from a file. A promotion gradient
//     refuses is reported by its ID (a [ValidationError] with Field
//     "row") and skipped, and its stored version is kept; the others
//     warm. [Rules.Save] validates before it writes.
//   - [Watch] keeps Redis in step: a trigger NOTIFYs [RulesChannel] on
//     every committed change to a promotion, its tiers or its gifts, and
//     Watch refreshes just that promotion, or deletes it (cache.Delete at
//     its tombstone's revision, with the readers' grace) when its row is
//     gone. A full pass runs at start, after every reconnect of the
//     listener and every FullEvery, for anything a lost notification
//     missed, and purges tombstones older than KeepTombstones.
//   - [Outbox] writes delay-queue tasks in the caller's transaction, so a
//     task exists exactly when the business change committed. Its relay
//     ([Outbox.RelayOnce], [Outbox.Relay]) copies committed rows to Redis
//     with EnqueueBatch, idempotent by (key, token): a relay killed between
//     the enqueue and its commit re-sends the batch and Redis answers
//     duplicates. The handler marks its row done ([Outbox.Done]) in the
//     transaction that does the work; Cancel and Reschedule change the
//     rows, then in Redis exactly the (key, token) pairs of the rows they
//     changed. [Source] lists the pending rows for delay.Queue.Reconcile,
//     and [Outbox.Reconcile] runs it with the relays held off, moving a
//     task whose due time differs from its row's: the compensation path
//     after Redis lost data, which [Outbox.Relay] also runs at start and
//     every RelayOptions.ReconcileEvery, one process at a time.
//   - [Ledger] keeps a budget's redemptions (package budget) in the
//     budget_ledger table, the truth: [Ledger.Confirm] writes the paid
//     order's row and its confirm task in the caller's transaction;
//     [Ledger.Apply], the task's work, confirms it in Redis, and when
//     Redis cannot (its hold ended, Redis lost it) runs
//     [Ledger.Reconcile], which rebuilds the counters from the ledger
//     with budget.Rebuild (also the step after a failover or a FLUSH).
//     Holds keep counting until their confirm lands, so no grant passes
//     a cap meanwhile. Bad input is a [ValidationError] naming it
//     (Field "redemption" carries the budget's), and writes nothing.
//
// pg is its own module so the core module never depends on pgx.
package pg
