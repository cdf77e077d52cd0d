// Command bench is the main job: `go run ./bench`, no flags, no setup.
//
// Backend: with no flag it starts a private redis-server on a free
// loopback port when one is on PATH (no persistence, killed at exit, also
// on Ctrl-C), else it runs on an embedded miniredis. The first line of
// the output says which and why. -redis URL and -cluster addr,addr,...
// run on a server of your own; -miniredis forces the embedded one.
//
// What it measures:
//
//   - tiers (bench/internal/tiers): the library's [github.com/tierset/tierset/cache.Cache.Match]
//     (one ZRANGE … BYSCORE REV LIMIT 0 1) against the full-scan
//     anti-pattern (ZRANGE 0 -1 WITHSCORES, decode all, pick in Go) and
//     raw go-redis issuing the library's command, single lookups and
//     carts ([github.com/tierset/tierset/cache.Cache.MatchCart] against a raw pipeline), and both
//     through the near cache (Options.NearCache; not on miniredis, which
//     has no client tracking), per tier count, timed in interleaved rounds after every answer was checked
//     against the in-memory oracle; and, on a client of its own, bytes
//     read per lookup and round trips per lookup and per cart;
//   - delay (bench/internal/delaybench): round trips per call, batched
//     enqueue, memory per pending task, take+ack; -delay adds one-by-one
//     and concurrent enqueue and lateness at steady rates;
//   - peers (-peers): bench/peers, tierset against asynq and BullMQ
//     (Node, bench/peers/bullmq) on the same Redis and River on the local
//     PostgreSQL, the same four workloads (a burst due at once, 1k/s and
//     10k/s steady, memory per pending task), a nested module so none of
//     them enters tierset's go.mod; -full runs each peer's defaults too;
//   - service (-service): bench/peers/cart, the same 20-line carts priced
//     by PostgreSQL (one query per line, one query per cart) and by
//     tierset (MatchCart, and with the near cache), at 1, 16 and 64
//     clients, with each server's CPU per 1,000 carts;
//   - storm (-storm, alone; bench/internal/storm): 8 client processes
//     (this binary re-executed, each with its own near cache) price
//     Zipf-skewed carts over 10,000 promotions through hot edits and a
//     republish of all, then 150-line carts on both paths (-bigcart
//     runs only those): 16 clients in a closed loop (saturation), and on
//     the Redis path, beside plain go-redis sending the same reads, one
//     client alone and 16 clients in an open loop at 10, 25 and 50% of
//     the closed loop's carts/s, latency counted from each cart's due
//     time; one client alone through the near cache (about 70 s; -quick
//     about 25 s).
//
// Every floor is one named row of one table at the end. Robust floors
// (round trips, bytes per lookup, p50 flatness, the lead over a full
// scan, memory per task, the ratios against the peers and PostgreSQL) fail the run
// under -strict, as .ci/run runs it; tight ones (library against raw
// go-redis, absolute rates) sit within a shared machine's noise and only
// print. On miniredis the timing floors print "not judged (miniredis is
// not Redis)"; round trips and bytes per lookup are judged everywhere.
//
// The default run (tiers 3, 300, 3000; 1 and 4 clients; 200 ms per case)
// takes under 20 s after compilation; -quick is shorter, -full is the
// whole matrix (tiers 3, 30, 300, 3000; 2 s per case; every delay phase).
// -csv and -chart write the tier rows as CSV and p50 against tier count as
// SVG.
//
// The tier comparisons also exist as testing.B benchmarks for benchstat:
//
//	go test ./bench/internal/tiers -run '^$' -bench . -count 10 | tee new.txt
package main
