// Package tierset answers, at cart time, "which promotion tier does this
// cart line hit?" from Redis in one O(log N) command per line, and runs a
// delay queue beside it on the same score codec.
//
// Each promotion's tiers live in a Redis sorted set whose score is the
// threshold: an item count, or an amount in integer minor units (cents),
// never a float. A hit is one ZRANGE key value -inf BYSCORE REV LIMIT 0 1
// on the server, so the cost stays flat whether a promotion has 3 tiers or
// 3000, and a whole cart resolves in one pipelined round trip. Gift details
// sit in separate keys and are fetched only after a hit.
//
// The module's packages, each with one job:
//
//   - [github.com/tierset/tierset/score]: exact scores (counts, money in
//     minor units, (ms<<10)|seq time scores), the 2^53 rule, range bounds.
//   - [github.com/tierset/tierset/gradient]: the domain (promotions, tiers,
//     rewards, gifts), validation, the in-memory matcher and reward math.
//   - [github.com/tierset/tierset/cache]: the tiers in Redis: atomic
//     refresh, server-side match, cart match in one round trip, gifts.
//   - [github.com/tierset/tierset/delay]: the delay queue: leases, fencing
//     tokens, idempotent enqueue, cancel by business key, retry, dead letter.
//   - [github.com/tierset/tierset/rules]: the JSON rules file, parsed
//     exactly, with errors naming file, promotion, tier and field.
//   - [github.com/tierset/tierset/warm]: the warm-up job: idempotent by
//     content hash, with prune and dry run.
//   - cmd/tierset: the operator's CLI (warm, match, demo, queue).
//
// The root package holds this documentation, [ClusterOptions] (go-redis
// Cluster settings that follow a failover in seconds), and the end-to-end
// test that checks the Redis-backed match against the in-memory oracle.
package tierset
