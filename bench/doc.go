// Command bench measures the tierset tier match against the alternatives a
// reader would otherwise write, on the same data and the same query values:
//
//   - range: the library's [cache.Cache.Match], one
//     ZRANGE key <value> -inf BYSCORE REV LIMIT 0 1 on the server;
//   - fullscan: the anti-pattern, ZRANGE key 0 -1 WITHSCORES, decode every
//     member, pick the largest threshold ≤ value in Go (it lives only here);
//   - raw: go-redis issuing the same ZRANGE as range, with no decoding, as
//     the overhead baseline;
//   - cart and rawcart: a cart of -cart lines matched with
//     [cache.Cache.MatchCart] (one pipeline) and with a raw go-redis
//     pipeline of the same ZRANGEs.
//
// With no flags it runs on an embedded miniredis, so `go run ./bench` needs
// no setup; those numbers measure miniredis, not Redis. -redis URL runs on a
// real server and -cluster addr,addr,... on a Redis Cluster. The program
// prints a table of ops/s, p50 and p99 with the ratios and the floors of
// the tier engine issue, writes the same rows as CSV with -csv, and draws
// p50 against tier count as SVG with -chart.
//
// Implementations are measured in interleaved short rounds, so a noisy
// neighbour slows them equally, and every answer is checked against the
// in-memory [gradient.Matcher] oracle before anything is timed.
//
// The same comparisons exist as testing.B benchmarks for benchstat:
//
//	go test ./bench -run '^$' -bench . -count 10 | tee new.txt
//
// (with TIERSET_REDIS_URL set they also run on that server).
package main
