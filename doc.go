// Package tierset answers, at cart time, "which promotion tier does this
// cart line hit?" from Redis in one O(log N) command per line, and runs a
// delay queue beside it on the same score codec.
//
// Use it through its packages: a warm-up job parses a rules file
// ([github.com/tierset/tierset/rules]) and writes it to Redis with
// [github.com/tierset/tierset/warm]; a cart service makes a cache.Cache
// and calls its MatchCart per cart; a worker runs a delay.Queue. This
// package's Example (README.md shows it whole, with its imports) does all
// three in one program.
//
// A promotion's tiers are a sorted set scored by threshold (never a
// float); a hit is one ZRANGE … BYSCORE REV LIMIT 0 1.
//
// # Package map
//
// This is the one list of the repository's packages, each with one job
// (TestPackageMapComplete in internal/doccheck fails when a package is
// missing from it or listed here but gone). Library packages:
//
//   - [github.com/tierset/tierset/score]: exact scores and the 2^53 rule.
//   - [github.com/tierset/tierset/gradient]: the domain (promotions, tiers,
//     rewards, gifts), validation, the in-memory matcher and reward math.
//   - [github.com/tierset/tierset/cache]: the tiers in Redis: atomic
//     refresh, server-side match, cart match in one round trip, gifts,
//     the near cache and read-through.
//   - [github.com/tierset/tierset/delay]: the delay queue: leases, fencing
//     tokens, idempotent enqueue, cancel by business key, retry, dead
//     letter, pools of workers, Sharded for Redis Cluster.
//   - [github.com/tierset/tierset/periodic]: periodic jobs on a delay
//     queue: one task per tick from any number of processes, no leader.
//   - [github.com/tierset/tierset/budget]: promotion caps that never
//     oversell: uses and spend per promotion, per customer and per
//     calendar period, reserved at checkout, confirmed on payment.
//   - [github.com/tierset/tierset/rules]: the JSON rules file, parsed
//     exactly, with errors naming file, promotion, tier and field.
//   - [github.com/tierset/tierset/warm]: the idempotent warm-up job.
//   - [github.com/tierset/tierset/examples]: the sample rules file.
//   - [github.com/tierset/tierset/console]: the operator's web console:
//     browse, act on and chart every queue, promotions, workers.
//
// Nested modules, each with its own go.mod (./... of the root module
// does not reach them):
//
//   - [github.com/tierset/tierset/pg]: PostgreSQL as the source of truth:
//     migrations, LISTEN/NOTIFY watch, the queue's outbox, the budget ledger.
//   - pg/cmd/tierset-pg: warms promotions from PostgreSQL, and watches.
//   - pg/examples/cartsvc: an example cart-pricing HTTP service.
//   - pg/internal/pgtest: a PostgreSQL schema per test.
//   - [github.com/tierset/tierset/contrib/prometheus]: Prometheus metrics.
//   - [github.com/tierset/tierset/contrib/cron]: cron schedules
//     (robfig/cron/v3) in a time zone for package periodic.
//   - bench/peers: tierset's delay queue against asynq, BullMQ and River.
//   - bench/peers/cart, bench/peers/budgetpg: tierset against PostgreSQL:
//     20-line carts priced four ways; a promotion cap on one hot row.
//   - test/browser: the web console in a headless Chromium.
//
// Commands and examples:
//
//   - cmd/tierset: the operator's CLI and tierset web (package console).
//   - examples/expvar: the Observers wired to expvar.
//   - bench: the main job, go run ./bench.
//   - bench/cachecost, bench/servercost: the server cost of the cache's
//     and the queue's hot paths, counted in instructions under callgrind.
//
// Internal packages:
//
//   - bench/internal/callgrind: what bench/cachecost and bench/servercost
//     share: their command line and the callgrind dump of a phase.
//   - bench/internal/tiers, bench/internal/delaybench,
//     bench/internal/budgetbench, bench/internal/storm: the tier, delay,
//     budget and sale-storm benchmarks of go run ./bench.
//   - bench/peers/internal/cli: what the peer benchmark commands share
//     around a run (count lists, the machine's load, floors).
//   - delay/internal/luacompose: the one list of the delay scripts and how
//     each is composed from lib.lua and its body.
//   - delay/internal/luagen: go generate ./delay: writes the composed
//     scripts and scripts_gen.go.
//   - internal/cacheraw: cache's member decoder, for the bench's
//     full-scan baseline (the member format is storage, not API).
//   - internal/deadletters: every dead letter's ID, and requeueing a list
//     of IDs, for the CLI and the console.
//   - internal/delayraw: delay's lease calls one by one (take, ack,
//     retry, kill, extend), which a Pool runs on its own, for the bench
//     commands' measurements and other packages' tests.
//   - internal/delaytest: test helpers over delay queues that the
//     console's and the browser tests share.
//   - internal/doccheck: tests that every doc link resolves and that this
//     map is complete.
//   - internal/exampleredis: the embedded Redis the Examples run on.
//   - internal/faultproxy: a TCP proxy that cuts a reply, adds latency or
//     kills connections, for fault tests.
//   - internal/inputerr: the one refused-input error that budget, cache,
//     delay, pg and warm each export as ValidationError.
//   - internal/keyname: the check of key prefixes and queue names, and the
//     default prefix.
//   - internal/keyscan: the one SCAN over every master.
//   - internal/matchfmt: match input parsed and results worded once, for
//     the CLI and the console.
//   - internal/measure: the measurement helpers every benchmark shares.
//   - internal/opsview: the JSON views the CLI and the console's /api share.
//   - internal/redisconf: what tierset asks of a go-redis client; URLs
//     printed with the password redacted.
//   - internal/redisserver: private redis-server processes for tests and
//     the bench.
//   - internal/slot: Redis Cluster hash slots, checked on the client.
//   - internal/soak: the one switch (TIERSET_SOAK=1) that runs the long
//     tests: soaks, kill loops, fault schedules.
//   - internal/testredis: test backends: miniredis, a real Redis, a cluster.
//   - internal/testrun: a worker's or pool's Run started in a test and
//     stopped at cleanup.
//   - internal/text: outside input quoted and escaped for messages and
//     terminals.
//
// The root package holds this documentation and [ClusterOptions] (go-redis
// Cluster settings that follow a failover in seconds). The end-to-end
// tests, of several packages together on real Redis (the match against
// the in-memory oracle, deadlines during a stalled server, failovers on a
// 3+3 cluster), are in test/e2e.
package tierset
