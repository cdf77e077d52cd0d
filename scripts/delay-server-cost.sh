#!/usr/bin/env bash
# delay-server-cost.sh: the delay queue's server cost per task, as
# instructions counted by callgrind (repeatable to ~0.1% for one build,
# unlike times on a shared 2-core machine), for batched enqueue (1000 a
# pipeline), one-by-one Enqueue and EnqueueBatch of 4 jobs (tasks/10 each:
# the fixed cost of a script call), take (100 a call), ack (100 a call)
# and ack keeping tombstones (Options.DoneTTL; tasks/10, 100 a call).
#
#   scripts/delay-server-cost.sh [tasks]        (default 20000; needs valgrind)
#
# It starts its own redis-server under valgrind on port 6393 (or
# TIERSET_COST_PORT), never touches another server, and removes its files.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-20000}
PORT=${TIERSET_COST_PORT:-6393}
# shellcheck source=scripts/callgrind-server.sh
. "$ROOT/scripts/callgrind-server.sh"
(cd "$ROOT" && go build -o "$DIR/servercost" ./bench/servercost)
callgrind_start
"$DIR/servercost" -addr "127.0.0.1:$PORT" -pid "$PID" -n "$N"
callgrind_stop
for f in "$DIR"/cg.out.*; do
	phase=$(sed -n 's/^desc: Trigger: dump //p' "$f")
	[ -n "$phase" ] || continue
	case $phase in start | setup) continue ;; esac
	ir=$(sed -n 's/^summary: //p' "$f")
	n=$N
	case $phase in *:*) n=${phase#*:}; phase=${phase%%:*} ;; esac
	awk -v p="$phase" -v ir="$ir" -v n="$n" 'BEGIN { printf "%-8s %12d instructions  %8.0f per task (%d tasks)\n", p, ir, ir / n, n }'
	if [ -n "${TIERSET_COST_KEEP:-}" ]; then cp "$f" "$TIERSET_COST_KEEP.$phase"; fi
done
