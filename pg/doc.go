// Package pg keeps tierset's source of truth in PostgreSQL: Redis is the
// index, the database is the truth.
//
//   - [Migrate] applies the embedded, idempotent SQL migrations to one
//     schema: promotions, tiers and gifts (money as NUMERIC, with CHECK and
//     UNIQUE constraints refusing what package gradient refuses), and a
//     delay-queue outbox.
//   - [Rules] loads promotions into []gradient.Promotion and implements
//     warm.Source, so warm.FromSource warms Redis from the database as the
//     CLI warms it from a file. A promotion gradient refuses is reported by
//     its ID and skipped; the others warm.
//   - [Watch] keeps Redis in step: a trigger NOTIFYs on every committed
//     change to a promotion, and Watch refreshes just that promotion (or
//     deletes it when its row is gone), with a periodic full pass and a full
//     pass after every reconnect for anything a lost notification missed.
//   - [Outbox] writes delay-queue tasks in the caller's transaction; its
//     relay copies committed rows to Redis with EnqueueBatch, idempotent
//     by (key, token). [Source] lists the pending rows for
//     delay.Queue.Reconcile, the compensation path after Redis lost data.
//
// pg is its own module so the core module never depends on pgx.
package pg
