#!/usr/bin/env bash
# cache-server-cost.sh: the tier cache's server cost per operation, as
# instructions counted by callgrind (repeatable for one build, unlike
# times on a shared machine), and the bytes on the wire per operation,
# for a Refresh of an unchanged promotion, a Refresh of a changed one and
# a 20-line MatchCart (bench/cachecost; 10 tiers a promotion).
#
#   scripts/cache-server-cost.sh [n]        (default 2000; needs valgrind)
#
# It starts its own redis-server under valgrind on port 6394 (or
# TIERSET_COST_PORT), never touches another server, and removes its files.
# TIERSET_COST_TREE builds bench/cachecost from another source tree (an
# older commit, to compare), with this tree's bench/cachecost (and
# bench/internal/callgrind) copied in.
#
# Per phase it prints three counts per operation: "total" (everything the
# server ran meanwhile, including serverCron and expiry, which grow with
# the phase's wall time and so vary by tens of per cent on a loaded
# machine), "clients" (inclusive cost of readQueryFromClient and
# handleClientsWithPendingWritesUsingThreads: reading, parsing and running
# the commands and writing their replies) and "commands" (inclusive cost
# of call(): running the commands alone). The last two depend only on
# what the client sent; compare builds by them.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-2000}
PORT=${TIERSET_COST_PORT:-6394}
TREE=${TIERSET_COST_TREE:-$ROOT}
# shellcheck source=scripts/callgrind-server.sh
. "$ROOT/scripts/callgrind-server.sh"
if [ "$TREE" != "$ROOT" ]; then
	mkdir -p "$TREE/bench/cachecost" "$TREE/bench/internal/callgrind"
	cp "$ROOT/bench/cachecost/main.go" "$TREE/bench/cachecost/"
	cp "$ROOT/bench/internal/callgrind/callgrind.go" "$TREE/bench/internal/callgrind/"
fi
(cd "$TREE" && go build -o "$DIR/cachecost" ./bench/cachecost)
callgrind_start
"$DIR/cachecost" -addr "127.0.0.1:$PORT" -pid "$PID" -n "$N"
callgrind_stop
incl() { # incl FILE FUNCTION: the function's inclusive instruction count
	callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
		awk -v fn="$2" '{ gsub(",", "", $1) } $0 ~ ":" fn " " && $1 ~ /^[0-9]+$/ { n += $1 } END { print n + 0 }'
}
for f in "$DIR"/cg.out.*; do
	phase=$(sed -n 's/^desc: Trigger: dump //p' "$f")
	[ -n "$phase" ] || continue
	case $phase in setup) continue ;; esac
	ir=$(sed -n 's/^summary: //p' "$f")
	rq=$(incl "$f" readQueryFromClient)
	wr=$(incl "$f" handleClientsWithPendingWritesUsingThreads)
	cl=$(incl "$f" call)
	awk -v p="$phase" -v ir="$ir" -v c=$((rq + wr)) -v cl="$cl" -v n="$N" \
		'BEGIN { printf "%-10s per op: %8.0f total  %8.0f clients  %8.0f commands (%d ops)\n", p, ir / n, c / n, cl / n, n }'
done
