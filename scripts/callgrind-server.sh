# callgrind-server.sh, sourced by the *-server-cost.sh scripts after they
# set PORT: a temporary DIR (removed on exit, with the server shut down),
# callgrind_start, which starts redis-server on PORT under valgrind's
# callgrind (its dumps in $DIR/cg.out.*) and sets PID, and callgrind_stop.
command -v valgrind >/dev/null || { echo "valgrind not found (apt-get install valgrind)" >&2; exit 2; }
DIR=$(mktemp -d)
cleanup() {
	redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
	rm -rf "$DIR"
}
trap cleanup EXIT
callgrind_start() {
	valgrind --tool=callgrind --callgrind-out-file="$DIR/cg.out" \
		redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$DIR" >"$DIR/valgrind.log" 2>&1 &
	for _ in $(seq 1 150); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.2; done
	PID=$(redis-cli -p "$PORT" info server | tr -d '\r' | sed -n 's/^process_id://p')
}
# callgrind_stop shuts the server down and gives callgrind time to write
# its last dump.
callgrind_stop() {
	redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
	sleep 2
}
