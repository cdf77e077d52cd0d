// Package budget is promotion caps in Redis that never oversell: a cart's
// uses and spend are reserved at checkout, confirmed on payment and given
// back when the order is not paid.
//
// # Use
//
//	b, _ := budget.New(rdb, "shop", budget.Options{Promotions: []budget.Promotion{{
//		ID: "summer", MaxPerCart: 2, Caps: []budget.Cap{
//			{Measure: budget.Uses, Limit: 1000},                    // 1,000 uses in all
//			{Measure: budget.Spend, Limit: 500_000_00},             // $500,000 of discount, in cents
//			{Measure: budget.Uses, Limit: 1, Per: "customer"},      // once per customer
//			{Measure: budget.Uses, Limit: 100, Period: budget.Day, Location: berlin},
//		}}}})
//	b.Rebuild(ctx, nil) // once: a budget starts empty and gets its epoch
//	res, err := b.Reserve(ctx, budget.Request{Order: "order-42",
//		Attributes: map[string]string{"customer": "c-7"},
//		Lines:      []budget.Line{{Promotion: "summer", Uses: 1, Amount: 1250}},
//		Hold:       15 * time.Minute})
//	// errors.Is(err, budget.ErrLimit): a cap is reached (a *LimitError says which)
//	b.Confirm(ctx, "order-42") // paid: a redemption
//	b.Release(ctx, "order-42") // not paid: given back (or let the hold end)
//	left, _ := b.Remaining(ctx, attrs, "summer", "winter") // cart time, one round trip
//	offers, _ := b.Offers(ctx, attrs, results) // per cache.Result hit: can it still be given?
//
// [New] builds a [Budget] (no I/O) over [Promotion]s, each with [Cap]s:
// a [Measure] (Uses or Spend, exact integer minor units up to 2^53),
// counted in all or [Cap].Per attribute (Medusa's use_by_attribute), in
// all time or per calendar [Period] (Day, Week, Month) in a stated
// *time.Location; and MaxPerCart. [Budget.Define] adds or changes
// promotions. [Budget.Reserve] takes a [Request] and returns a
// [Reservation]; [Budget.Confirm] returns a [Confirmation] (what a ledger
// records; the log stream [Budget.LogKey] has each too, see
// [DecodeRequest]); [Budget.Release] gives a hold back; [Budget.Expire]
// and [Budget.Sweep] report holds that ended unpaid; [Budget.Remaining]
// and [Budget.RemainingPipe] answer what is [Left]; [Budget.Rebuild] sets
// the counters from a ledger's [Redemption]s.
//
// # At cart time, and for operators
//
// [Budget.Offers] takes a cart's cache.Cache.MatchCart results and says
// per hit whether its promotion can still be given to the customer
// ([Offer]; [Left.Allows] checks a line's discount): one Remaining round
// trip after the match, none without a budgeted hit, so one in all when
// the near cache answers the match (TestOffersRoundTrips; TestOffers
// flags a promotion used up per customer and in all). [Budget.Info]
// reads each cap's used, held and remaining, per period and per
// attribute value (TestInfo); [Budget.Order] an order's record.
// [Budget.Publish] writes the definitions so that tools without them
// ([Open], [List]: the tierset CLI's budget command, the console's
// /budgets page) read the caps. [Options].Observer ([Observer]) gets
// grants, refusals by cap and expired holds (TestObserver).
//
// # Guarantees, and the tests that prove them
//
//   - All or none, never over a cap. One script checks every cap of every
//     line and then counts them all, on one slot: a Budget is one hash tag
//     {b:<name>}, so a cart's promotions must be one Budget's (a Budget is
//     the group; split promotions over Budgets to spread a cluster).
//     Tests: TestCaps, TestAllOrNone, TestFaultNoOversell (processes
//     re-executing the test binary, 1,000 reservations from 4 by default,
//     10,000 from 16 under TIERSET_SOAK=1: exactly the cap granted, total
//     and per customer).
//   - Holds end by Redis TIME. Every script purges the holds whose time
//     has passed before it counts, so a late or lost Release never holds a
//     cap and never gives back twice. Periods are judged by Redis TIME too:
//     the client sends the period holding its estimate of Redis TIME and
//     the two beside it, the script picks by TIME (and the call is sent
//     again with Redis TIME when the estimate was off by more), and a day
//     across a DST change is 23 or 25 hours. Tests: TestHoldExpiry,
//     TestPeriodAcrossDST, TestPeriodsWeekMonth, TestPeriodKeysExpire.
//   - Idempotent. The same order with the same attributes and lines
//     answers the same reservation (a retry, or go-redis sending a script
//     again after a lost reply); other arguments give ErrConflict.
//     Confirm and Release answer the same when sent again. Confirm after a
//     hold ended is granted only if every cap still allows it (ErrExpired
//     and the *LimitError otherwise). Tests: TestIdempotent,
//     TestFaultCutAndKill (cut replies and CLIENT KILL: the cap filled
//     exactly, every grant confirmed, released or still held).
//   - Group commit. Concurrent Reserve calls of one Budget share a
//     script (at most Options.MaxBatch), each judged all or none on its
//     own; with none in flight a call goes at once. One whose ctx ends
//     in flight, or whose reply the connection lost, gets ErrUnknown; a
//     reply that still comes settles its grant (expiry task, Observer).
//     Tests: TestBatchExactCap, TestBatchCancelOneWaiter,
//     TestFaultBatchCutReply, TestFaultRetriesUsedUp.
//   - Expiry reported. With Options.Expiry (a *delay.Queue), Reserve
//     enqueues a task keyed by the order, due when the hold ends; its
//     handler calls Expire, which says whether the hold ended unpaid
//     (First the first time). Sweep enqueues again the reports that were
//     lost. Test: TestExpiryReported.
//   - Loss detected. The budget's epoch key exists only once Rebuild made
//     it: after Redis lost its data (a restart without persistence, a
//     flush, a failover to an empty replica) every call answers ErrLost
//     until Rebuild puts back the ledger's redemptions. Tests:
//     TestLostAndRebuild, TestFaultRestart (with appendonly every grant
//     survives; without, the ledger is rebuilt; the cap is never passed),
//     TestFaultSIGKILL (callers killed mid-reserve). A counter evicted
//     while the epoch stays would read as 0: Reserve and Remaining answer
//     ErrLost instead until Rebuild (TestCounterEvicted,
//     TestCounterEvictedByMaxmemory). A Redemption naming its Order is
//     counted once whatever Redis holds of it, and a later Confirm of it
//     counts nothing again (TestRebuildLedgerOrders): the ledger in
//     PostgreSQL (pg.Ledger) rebuilds from its rows this way.
//
// Bad input (TestBadInput, TestBadDefinition) is a *ValidationError
// naming it, matching ErrInvalid, and writes nothing. Fractional uses
// cannot be asked: Line.Uses is an integer.
//
// # What a failover can lose
//
// Redis replicates asynchronously: a reservation or confirmation a master
// answered and had not yet sent to its replica is lost if the replica is
// promoted, and the counters then undercount, which can grant past a cap
// by what was lost. Options.Replicas sends WAIT after every write (same
// connection) and returns ErrNotReplicated when too few replicas
// acknowledged in time; its cost is in docs/benchmarks.md ("Budgets").
// Persistence needs appendfsync always for the same reason. The design,
// keys and memory are in docs/design.md ("Budgets").
package budget
