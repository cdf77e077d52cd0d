#!/usr/bin/env bash
# console-bench.sh: times each console page on 1M tasks and 10k promotions
# (BenchmarkConsole1M) in a private, empty redis-server it starts on
# $PORT (default 7101) and stops by its PID when done.
#   scripts/console-bench.sh [benchtime, default 20x]
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-7101}
dir=$(mktemp -d)
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" --daemonize no >"$dir/log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do
	redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
	sleep 0.1
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
TIERSET_CONSOLE_BENCH_URL="redis://127.0.0.1:$PORT/0" go test -run '^$' -bench BenchmarkConsole1M -benchtime "${1:-20x}" -timeout 30m ./console
redis-cli -p "$PORT" info memory | grep '^used_memory_human'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
