#!/usr/bin/env bash
# scripts/redis-cluster.sh up|down|status|env|revive [PORT...]|wait
#
# Starts/stops a real local Redis Cluster for tests: 6 redis-server nodes on
# 127.0.0.1 (3 masters + 3 replicas), each with its own directory, pidfile and
# log under $TIERSET_CLUSTER_DIR.
#
#   export TIERSET_REDIS_CLUSTER=$(scripts/redis-cluster.sh up | tail -1)
#   scripts/redis-cluster.sh status
#   eval "$(scripts/redis-cluster.sh env)"
#   scripts/redis-cluster.sh revive   # after a failover test killed a node
#   scripts/redis-cluster.sh down
#
# "Healthy" (what `up`, `wait` and `revive` wait for) means, on every node:
# cluster_state:ok, 16384 slots ok, 6 known nodes, cluster_size 3; each master
# has connected_slaves:1 (online) and each replica master_link_status:up; no
# node is flagged fail/handshake/noaddr; and CLUSTER SLOTS is identical on all
# nodes: 3 ranges covering 0-16383, each with a master and its replica.
#
# Environment:
#   TIERSET_CLUSTER_BASE_PORT  first port of the block of 6 (default 21001: the
#                              ports and their bus ports +10000 stay below
#                              32768, outside the kernel's ephemeral range, so a
#                              client socket cannot hold one).
#                              Cluster bus ports are port+10000. If the block is
#                              in use, the next blocks of 6 are tried.
#   TIERSET_CLUSTER_DIR        state dir (default ${TMPDIR:-/tmp}/tierset-cluster-<baseport>,
#                              keyed by the *requested* base port so up/down agree).
#   TIERSET_CLUSTER_WAIT       seconds to wait for a healthy cluster (default 30).
#   TIERSET_CLUSTER_PORT_TRIES number of blocks of 6 to try (default 10).
#   TIERSET_CLUSTER_NODE_TIMEOUT cluster-node-timeout in ms (default 2000).
#   TIERSET_CLUSTER_FULL_COVERAGE cluster-require-full-coverage, yes (the
#                              default, Redis's) or no: with no, the other
#                              masters keep serving their slots while one fails over.
#   TIERSET_CLUSTER_DEBUG=1    log every failed health probe while waiting.
#   TIERSET_CLUSTER_KEEP_ON_FAIL=1 keep the dir (logs) when `up` fails.
#
# Files in $TIERSET_CLUSTER_DIR:
#   seeds        the comma-separated seed list (same as the last stdout line of `up`)
#   ports        one port per line
#   nodes.tsv    port<TAB>pid<TAB>role (master|replica), as of `up` (rewritten by `revive`)
#   node-<port>/ dir, nodes.conf, redis.log, redis.pid of each node
#
# `down` only ever kills pids recorded in its own pidfiles (or reported by a
# node whose working directory is inside $TIERSET_CLUSTER_DIR) and only removes
# a directory carrying this script's marker file.
set -euo pipefail

PROG=${0##*/}
NNODES=6
MARKER=.tierset-cluster
HOST=127.0.0.1

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }

usage() {
	cat >&2 <<EOF
usage: $PROG up|down|status|env|revive [PORT...]|wait
  up      start a 6-node cluster (3 masters, 3 replicas); last stdout line = seeds
  down    stop the nodes recorded in the state dir and remove it (idempotent)
  status  print cluster info of every node
  env     print 'export TIERSET_REDIS_CLUSTER=...' for the running cluster
  revive  restart dead nodes (all, or the given ports) and wait until healthy
  wait    wait (TIERSET_CLUSTER_WAIT s) until the cluster is fully healthy
EOF
	exit 2
}

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

now() { printf '%s' "${EPOCHREALTIME/,/.}"; }
elapsed_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# ---------------------------------------------------------------- config

REQ_BASE=${TIERSET_CLUSTER_BASE_PORT:-21001}
is_uint "$REQ_BASE" || die "TIERSET_CLUSTER_BASE_PORT must be a number, got '$REQ_BASE'"
REQ_BASE=$((10#$REQ_BASE))
WAIT_SECS=${TIERSET_CLUSTER_WAIT:-30}
is_uint "$WAIT_SECS" || die "TIERSET_CLUSTER_WAIT must be a whole number of seconds"
PORT_TRIES=${TIERSET_CLUSTER_PORT_TRIES:-10}
is_uint "$PORT_TRIES" || die "TIERSET_CLUSTER_PORT_TRIES must be a number"
NODE_TIMEOUT=${TIERSET_CLUSTER_NODE_TIMEOUT:-2000}
is_uint "$NODE_TIMEOUT" || die "TIERSET_CLUSTER_NODE_TIMEOUT must be a number (ms)"
FULL_COVERAGE=${TIERSET_CLUSTER_FULL_COVERAGE:-yes}
[[ $FULL_COVERAGE == yes || $FULL_COVERAGE == no ]] || die "TIERSET_CLUSTER_FULL_COVERAGE must be yes or no"

DIR=${TIERSET_CLUSTER_DIR:-${TMPDIR:-/tmp}/tierset-cluster-$REQ_BASE}
[[ -n $DIR ]] || die "empty TIERSET_CLUSTER_DIR"
[[ $DIR == /* ]] || DIR=$PWD/$DIR
DIR=${DIR%/}
case "$DIR" in
"" | / | /tmp | /var | /var/tmp | /root | /home | "$HOME") die "refusing to use '$DIR' as cluster dir" ;;
esac

HAVE_TIMEOUT=0
command -v timeout >/dev/null 2>&1 && HAVE_TIMEOUT=1

need() { command -v "$1" >/dev/null 2>&1 || die "'$1' not found on PATH"; }

# rcli PORT CMD... : redis-cli against one node, never reads stdin, bounded
# time, CRs stripped. Exit status is redis-cli's (non-zero if unreachable).
rcli() {
	local p=$1
	shift
	local out rc=0
	if ((HAVE_TIMEOUT)); then
		out=$(timeout 5 redis-cli -h "$HOST" -p "$p" "$@" </dev/null 2>/dev/null) || rc=$?
	else
		out=$(redis-cli -h "$HOST" -p "$p" "$@" </dev/null 2>/dev/null) || rc=$?
	fi
	printf '%s\n' "${out//$'\r'/}"
	return "$rc"
}

ping_ok() { [[ $(rcli "$1" ping 2>/dev/null || true) == PONG* ]]; }

# field NAME <<<"$info" : value of NAME:value line
# (reads all input, so it never causes SIGPIPE upstream)
field() { awk -v k="$1:" 'index($0, k) == 1 && !done { print substr($0, length(k) + 1); done = 1 }'; }

# pid_alive PID [PORT]: pid is a live (non-zombie) redis-server (serving PORT).
pid_alive() {
	local pid=$1 port=${2:-} stat comm cmd
	is_uint "$pid" || return 1
	[[ -r /proc/$pid/stat ]] || { kill -0 "$pid" 2>/dev/null; return; }
	stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[[ ${stat%% *} != Z && ${stat%% *} != X ]] || return 1
	comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
	[[ $comm == redis-server* ]] || return 1
	if [[ -n $port ]]; then
		cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
		cmd+=" "
		[[ $cmd == *":$port "* || $cmd == *" $port "* ]] || return 1
	fi
	return 0
}

# port_in_use PORT: something listens on it (any address) or accepts on loopback.
port_in_use() {
	local p=$1
	if command -v ss >/dev/null 2>&1; then
		[[ -n $(ss -Htln "sport = :$p" 2>/dev/null) ]] && return 0
	fi
	if ((HAVE_TIMEOUT)); then
		timeout 1 bash -c "exec 3<>/dev/tcp/$HOST/$p" 2>/dev/null && return 0
	else
		(exec 3<>"/dev/tcp/$HOST/$p") 2>/dev/null && return 0
	fi
	ping_ok "$p" && return 0
	return 1
}

node_dir() { printf '%s/node-%s' "$DIR" "$1"; }
node_pid() { local f; f="$(node_dir "$1")/redis.pid"; [[ -r $f ]] && tr -dc '0-9' <"$f"; true; }

# PORTS is loaded from $DIR/ports (or set by up).
PORTS=()
load_ports() {
	PORTS=()
	if [[ -r $DIR/ports ]]; then
		local p
		while read -r p; do is_uint "$p" && PORTS+=("$p"); done <"$DIR/ports"
	fi
	if ((${#PORTS[@]} == 0)) && [[ -d $DIR ]]; then
		local d
		for d in "$DIR"/node-*; do
			[[ -d $d ]] || continue
			d=${d##*/node-}
			is_uint "$d" && PORTS+=("$d")
		done
	fi
	return 0
}

seeds_of() {
	local s="" p
	for p in "${PORTS[@]}"; do s+="${s:+,}$HOST:$p"; done
	printf '%s' "$s"
}

# ---------------------------------------------------------------- teardown

# stop_nodes: SIGTERM every node of $DIR that is ours, wait up to 5 s, SIGKILL.
stop_nodes() {
	local p pid pd phys ndir info
	local -a pids=()
	load_ports
	for p in "${PORTS[@]}"; do
		ndir=$(node_dir "$p")
		pid=$(node_pid "$p")
		if [[ -n $pid ]] && pid_alive "$pid" "$p"; then
			pids+=("$pid")
			continue
		fi
		# No (valid) pidfile: ask the node itself, but only kill it if it
		# really is one of ours (its working dir is our node dir).
		[[ -d $ndir ]] || continue
		ping_ok "$p" || continue
		phys=$(cd "$ndir" 2>/dev/null && pwd -P) || continue
		pd=$(rcli "$p" config get dir 2>/dev/null | sed -n 2p) || true
		[[ -n $pd && $pd == "$phys" ]] || continue
		info=$(rcli "$p" info server 2>/dev/null) || continue
		pid=$(field process_id <<<"$info")
		[[ -n $pid ]] && pid_alive "$pid" && pids+=("$pid")
	done
	((${#pids[@]})) || return 0
	kill -TERM "${pids[@]}" 2>/dev/null || true
	local left
	wait_gone 50 "${pids[@]}" && return 0
	log "nodes still alive after 5s, sending SIGKILL: ${left[*]}"
	kill -KILL "${left[@]}" 2>/dev/null || true
	wait_gone 30 "${left[@]}" && return 0
	log "warning: could not kill: ${left[*]}"
	return 0
}

# wait_gone N PID...: polls up to N times, 0.1 s apart, until every PID has
# exited; fails with the ones still alive in the caller's $left.
wait_gone() {
	local n=$1 i pid
	shift
	for ((i = 0; i < n; i++)); do
		left=()
		for pid in "$@"; do pid_alive "$pid" && left+=("$pid"); done
		((${#left[@]})) || return 0
		sleep 0.1
	done
	return 1
}

remove_dir() {
	[[ -e $DIR ]] || return 0
	if [[ -f $DIR/$MARKER ]]; then
		rm -rf -- "$DIR"
	else
		log "warning: $DIR has no $MARKER marker; not removing it"
	fi
}

cmd_down() {
	if [[ ! -e $DIR ]]; then
		log "nothing to do ($DIR does not exist)"
		return 0
	fi
	[[ -f $DIR/$MARKER ]] || die "$DIR exists but was not created by $PROG (no $MARKER); refusing to touch it"
	stop_nodes
	remove_dir
	log "cluster in $DIR is down"
}

# ---------------------------------------------------------------- health

# normalize `cluster slots` raw output to sorted lines "start-end master,replica..."
# (Redis 7.0 raw layout: start, end, then per node: ip, port, id, metadata-map).
norm_slots() {
	awk '
	function isint(s) { return s ~ /^[0-9]+$/ }
	{ a[NR] = $0 }
	END {
		i = 1
		while (i <= NR) {
			if (!(isint(a[i]) && isint(a[i+1]))) { print "PARSE_ERROR at line " i ": " a[i]; exit 0 }
			s = a[i]; e = a[i+1]; i += 2; nodes = ""
			while (i <= NR && !isint(a[i])) {
				nodes = nodes (nodes == "" ? "" : ",") a[i+1]
				i += 4
			}
			print s "-" e " " nodes
		}
	}' | sort -n
}

HEALTH_MSG=""
MASTERS=()
REPLICAS=()
# health_check: 0 if every node agrees the cluster is fully healthy.
health_check() {
	local p info repl role ref="" norm nodes
	MASTERS=()
	REPLICAS=()
	for p in "${PORTS[@]}"; do
		info=$(rcli "$p" cluster info) || { HEALTH_MSG="node $p does not answer"; return 1; }
		[[ $(field cluster_state <<<"$info") == ok ]] || { HEALTH_MSG="node $p: cluster_state:$(field cluster_state <<<"$info")"; return 1; }
		[[ $(field cluster_slots_ok <<<"$info") == 16384 ]] || { HEALTH_MSG="node $p: cluster_slots_ok:$(field cluster_slots_ok <<<"$info")"; return 1; }
		[[ $(field cluster_known_nodes <<<"$info") == "$NNODES" ]] || { HEALTH_MSG="node $p: cluster_known_nodes:$(field cluster_known_nodes <<<"$info")"; return 1; }
		[[ $(field cluster_size <<<"$info") == 3 ]] || { HEALTH_MSG="node $p: cluster_size:$(field cluster_size <<<"$info")"; return 1; }

		repl=$(rcli "$p" info replication) || { HEALTH_MSG="node $p: INFO replication failed"; return 1; }
		role=$(field role <<<"$repl")
		case "$role" in
		master)
			[[ $(field connected_slaves <<<"$repl") == 1 ]] || { HEALTH_MSG="master $p: connected_slaves:$(field connected_slaves <<<"$repl")"; return 1; }
			[[ $(field slave0 <<<"$repl") == *state=online* ]] || { HEALTH_MSG="master $p: replica not online"; return 1; }
			MASTERS+=("$p")
			;;
		slave)
			[[ $(field master_link_status <<<"$repl") == up ]] || { HEALTH_MSG="replica $p: master_link_status:$(field master_link_status <<<"$repl")"; return 1; }
			[[ $(field master_sync_in_progress <<<"$repl") == 0 ]] || { HEALTH_MSG="replica $p: sync in progress"; return 1; }
			REPLICAS+=("$p")
			;;
		*) HEALTH_MSG="node $p: unknown role '$role'"; return 1 ;;
		esac

		nodes=$(rcli "$p" cluster nodes) || { HEALTH_MSG="node $p: CLUSTER NODES failed"; return 1; }
		if grep -Eq 'fail|handshake|noaddr|disconnected' <<<"$nodes"; then
			HEALTH_MSG="node $p: cluster nodes shows fail/handshake/noaddr/disconnected"
			return 1
		fi

		norm=$(rcli "$p" cluster slots | norm_slots) || { HEALTH_MSG="node $p: CLUSTER SLOTS failed"; return 1; }
		if [[ -z $ref ]]; then
			ref=$norm
			# 3 ranges covering 0..16383, each served by a master + 1 replica.
			local check
			check=$(awk '
				{ split($1, r, "-"); n++; total += r[2] - r[1] + 1; k = split($2, ns, ",")
				  if (k != 2) bad = bad " " $1 "(" k " nodes)" }
				END { if (n != 3) print "ranges=" n; else if (total != 16384) print "slots=" total; else if (bad != "") print "bad:" bad }' <<<"$norm")
			[[ -z $check ]] || { HEALTH_MSG="node $p: cluster slots: $check"; return 1; }
		elif [[ $norm != "$ref" ]]; then
			HEALTH_MSG="node $p: cluster slots disagree with node ${PORTS[0]}"
			return 1
		fi
	done
	((${#MASTERS[@]} == 3 && ${#REPLICAS[@]} == 3)) || { HEALTH_MSG="masters=${#MASTERS[@]} replicas=${#REPLICAS[@]}"; return 1; }
	# masters serving slots must be exactly the nodes that say role:master
	local want got
	want=$(printf '%s\n' "${MASTERS[@]}" | sort -n | tr '\n' ' ')
	got=$(awk '{ split($2, ns, ","); print ns[1] }' <<<"$ref" | sort -n | tr '\n' ' ')
	[[ $want == "$got" ]] || { HEALTH_MSG="slot owners ($got) != role:master nodes ($want)"; return 1; }
	HEALTH_MSG=ok
	return 0
}

wait_healthy() {
	local secs=$1 deadline
	deadline=$(awk -v a="$(now)" -v s="$secs" 'BEGIN { printf "%.3f", a + s }')
	while :; do
		health_check && return 0; [[ -n ${TIERSET_CLUSTER_DEBUG:-} ]] && log "$(now) $HEALTH_MSG"
		if awk -v a="$(now)" -v d="$deadline" 'BEGIN { exit !(a >= d) }'; then
			return 1
		fi
		sleep 0.1
	done
}

all_nodes_alive() {
	local p pid
	((${#PORTS[@]} == NNODES)) || return 1
	for p in "${PORTS[@]}"; do
		pid=$(node_pid "$p")
		[[ -n $pid ]] && pid_alive "$pid" "$p" || return 1
		ping_ok "$p" || return 1
	done
}

write_nodes_tsv() {
	local p role tmp="$DIR/nodes.tsv.tmp"
	: >"$tmp"
	for p in "${PORTS[@]}"; do
		role=replica
		[[ " ${MASTERS[*]} " == *" $p "* ]] && role=master
		printf '%s\t%s\t%s\n' "$p" "$(node_pid "$p")" "$role" >>"$tmp"
	done
	mv -f "$tmp" "$DIR/nodes.tsv"
}

# start_node PORT: launch one daemonized cluster node in $DIR/node-PORT.
# (Also used by `revive`: an existing nodes.conf makes the node rejoin.)
start_node() {
	local p=$1 nd
	nd=$(node_dir "$p")
	mkdir -p "$nd"
	rm -f "$nd/redis.pid"
	redis-server \
		--cluster-enabled yes \
		--cluster-config-file nodes.conf \
		--cluster-node-timeout "$NODE_TIMEOUT" \
		--cluster-allow-reads-when-down no \
		--cluster-require-full-coverage "$FULL_COVERAGE" \
		--save "" \
		--appendonly no \
		--repl-diskless-sync-delay 0 \
		--repl-ping-replica-period 1 \
		--shutdown-timeout 0 \
		--daemonize yes \
		--bind "$HOST" \
		--port "$p" \
		--dir "$nd" \
		--logfile "$nd/redis.log" \
		--pidfile "$nd/redis.pid" \
		</dev/null >"$nd/start.out" 2>&1 ||
		die "redis-server on port $p failed to start: $(tail -n 3 "$nd/start.out" 2>/dev/null)"
}

# wait_nodes_ready PORT...: every node answers PING and wrote its pidfile (5 s).
wait_nodes_ready() {
	local i p ready lg
	for ((i = 0; i < 100; i++)); do
		ready=1
		for p in "$@"; do
			[[ -n $(node_pid "$p") ]] && ping_ok "$p" || { ready=0; break; }
		done
		((ready)) && return 0
		for p in "$@"; do
			lg=$(node_dir "$p")/redis.log
			if [[ -s $lg ]] && grep -Eq 'Could not create server TCP|Address already in use|Fatal|FATAL' "$lg"; then
				die "node $p failed to start: $(grep -E 'Could not create|Address already|Fatal|FATAL' "$lg" | tail -n1)"
			fi
		done
		sleep 0.05
	done
	die "nodes did not come up within 5s (last not ready: port $p)"
}

# ---------------------------------------------------------------- up

UP_OK=0
UP_STARTED=0
LAUNCHED=()
up_cleanup() {
	local rc=$?
	((UP_STARTED)) || return 0
	((UP_OK)) && return 0
	log "up failed (exit $rc); diagnostics follow"
	if [[ -s $DIR/create.log ]]; then
		log "--- redis-cli --cluster create output (tail):"
		tail -n 30 "$DIR/create.log" >&2 || true
	fi
	local p i
	# a just-launched daemon may not have written its pidfile yet: give the
	# nodes we launched a moment so stop_nodes can find (and kill) them.
	for ((i = 0; i < 20; i++)); do
		local missing=0
		for p in "${LAUNCHED[@]}"; do [[ -n $(node_pid "$p") ]] || missing=1; done
		((missing)) || break
		sleep 0.1
	done
	for p in "${PORTS[@]}"; do
		if [[ -s $(node_dir "$p")/redis.log ]]; then
			log "--- node $p redis.log (tail):"
			tail -n 8 "$(node_dir "$p")/redis.log" >&2 || true
		fi
	done
	stop_nodes || true
	if [[ ${TIERSET_CLUSTER_KEEP_ON_FAIL:-0} == 1 ]]; then
		log "keeping $DIR (TIERSET_CLUSTER_KEEP_ON_FAIL=1)"
	else
		remove_dir || true
	fi
	log "stopped the nodes this run started"
}

cmd_up() {
	need redis-server
	need redis-cli
	local t0
	t0=$(now)

	if [[ -e $DIR ]]; then
		if [[ ! -f $DIR/$MARKER ]]; then
			if [[ -d $DIR && -z $(ls -A "$DIR" 2>/dev/null) ]]; then
				rmdir "$DIR"
			else
				die "$DIR exists and was not created by $PROG; set TIERSET_CLUSTER_DIR elsewhere or remove it"
			fi
		else
			load_ports
			if all_nodes_alive && wait_healthy 10; then
				log "cluster already running and healthy in $DIR"
				printf '%s\n' "$(seeds_of)"
				return 0
			fi
			log "found a stale or unhealthy cluster in $DIR (${HEALTH_MSG:-nodes not running}); cleaning it up"
			stop_nodes
			remove_dir
			[[ ! -e $DIR ]] || die "could not clean $DIR"
		fi
	fi

	# pick a free block of 6 ports (+ their bus ports, port+10000)
	local base="" try b p busy
	for ((try = 0; try < PORT_TRIES; try++)); do
		b=$((REQ_BASE + try * NNODES))
		if ((b < 1024 || b + NNODES - 1 + 10000 > 65535)); then
			die "port block $b..$((b + NNODES - 1)) is out of range (need 1024 <= port and port+10000 <= 65535)"
		fi
		busy=""
		for ((p = b; p < b + NNODES; p++)); do
			if port_in_use "$p"; then busy="$p"; break; fi
			if port_in_use $((p + 10000)); then busy="$((p + 10000)) (cluster bus of $p)"; break; fi
		done
		if [[ -z $busy ]]; then
			base=$b
			break
		fi
		log "port $busy is in use; trying the next block"
	done
	[[ -n $base ]] || die "no free block of $NNODES ports (and bus ports +10000) found starting at $REQ_BASE after $PORT_TRIES tries"

	PORTS=()
	for ((p = base; p < base + NNODES; p++)); do PORTS+=("$p"); done

	mkdir -p "$DIR"
	UP_STARTED=1
	trap up_cleanup EXIT
	: >"$DIR/$MARKER"
	printf '%s\n' "${PORTS[@]}" >"$DIR/ports"

	printf '%s\n' "$NODE_TIMEOUT" >"$DIR/node_timeout"
	printf '%s\n' "$FULL_COVERAGE" >"$DIR/full_coverage"
	for p in "${PORTS[@]}"; do
		start_node "$p"
		LAUNCHED+=("$p")
	done
	wait_nodes_ready "${PORTS[@]}"

	local t_start t_create
	t_start=$(elapsed_since "$t0")
	local -a addrs=()
	for p in "${PORTS[@]}"; do addrs+=("$HOST:$p"); done
	local rc=0
	if ((HAVE_TIMEOUT)); then
		timeout 60 redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes </dev/null >"$DIR/create.log" 2>&1 || rc=$?
	else
		redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes </dev/null >"$DIR/create.log" 2>&1 || rc=$?
	fi
	((rc == 0)) || die "redis-cli --cluster create failed (exit $rc)"
	grep -q '\[OK\] All 16384 slots covered' "$DIR/create.log" || die "redis-cli --cluster create did not report all 16384 slots covered"

	t_create=$(elapsed_since "$t0")
	# Replicas only show up in CLUSTER SLOTS once their replication offset is
	# non-zero, which on an empty master otherwise takes until the first
	# replication PING. FUNCTION FLUSH on the (empty, just created) masters is a
	# key-free write that is propagated to replicas and bumps the offset now.
	local role
	for p in "${PORTS[@]}"; do
		role=$(rcli "$p" info replication | field role) || true
		[[ $role == master ]] && { rcli "$p" function flush sync >/dev/null || true; }
	done
	if ! wait_healthy "$WAIT_SECS"; then
		die "cluster not healthy after ${WAIT_SECS}s: $HEALTH_MSG"
	fi

	write_nodes_tsv
	local seeds
	seeds=$(seeds_of)
	printf '%s\n' "$seeds" >"$DIR/seeds"
	UP_OK=1
	log "cluster up in $(elapsed_since "$t0")s (nodes started ${t_start}s, create done ${t_create}s): masters ${MASTERS[*]}, replicas ${REPLICAS[*]}, dir $DIR, node-timeout ${NODE_TIMEOUT}ms"
	printf '%s\n' "$seeds"
}

# ---------------------------------------------------------------- status / env

cmd_status() {
	[[ -f $DIR/$MARKER ]] || die "no cluster in $DIR"
	load_ports
	local p pid role repl rc=0
	for p in "${PORTS[@]}"; do
		pid=$(node_pid "$p")
		if ! ping_ok "$p"; then
			printf '=== %s:%s pid=%s DOWN\n' "$HOST" "$p" "${pid:-?}"
			rc=1
			continue
		fi
		repl=$(rcli "$p" info replication || true)
		role=$(field role <<<"$repl")
		[[ $role == slave ]] && role="replica of $(field master_host <<<"$repl"):$(field master_port <<<"$repl") link=$(field master_link_status <<<"$repl")"
		[[ $role == master ]] && role="master connected_slaves=$(field connected_slaves <<<"$repl")"
		printf '=== %s:%s pid=%s %s\n' "$HOST" "$p" "${pid:-?}" "$role"
		rcli "$p" cluster info || true
	done
	if health_check; then
		echo "health: ok"
	else
		echo "health: NOT OK: $HEALTH_MSG"
		rc=1
	fi
	return "$rc"
}

cmd_env() {
	[[ -f $DIR/$MARKER && -r $DIR/seeds ]] || die "no running cluster in $DIR (run '$PROG up')"
	load_ports
	local p alive=0
	for p in "${PORTS[@]}"; do ping_ok "$p" && alive=$((alive + 1)); done
	((alive > 0)) || die "cluster in $DIR is not running (no node answers)"
	printf 'export TIERSET_CLUSTER_DIR=%q\n' "$DIR"
	printf 'export TIERSET_REDIS_CLUSTER=%s\n' "$(cat "$DIR/seeds")"
}

# revive [PORT...]: restart dead nodes of this cluster (default: every dead
# one) with the same arguments, then wait until the cluster is fully healthy
# again. A revived ex-master rejoins as a replica of the node that replaced it.
cmd_revive() {
	[[ -f $DIR/$MARKER ]] || die "no cluster in $DIR"
	need redis-server
	load_ports
	if [[ -r $DIR/node_timeout ]]; then
		NODE_TIMEOUT=$(tr -dc '0-9' <"$DIR/node_timeout")
		[[ -n $NODE_TIMEOUT ]] || NODE_TIMEOUT=2000
	fi
	if [[ -r $DIR/full_coverage ]]; then
		FULL_COVERAGE=$(tr -dc 'yesno' <"$DIR/full_coverage")
		[[ $FULL_COVERAGE == yes || $FULL_COVERAGE == no ]] || FULL_COVERAGE=yes
	fi
	local -a want=("$@") dead=()
	((${#want[@]})) || want=("${PORTS[@]}")
	local p pid
	for p in "${want[@]}"; do
		[[ " ${PORTS[*]} " == *" $p "* ]] || die "port $p is not a node of the cluster in $DIR (${PORTS[*]})"
		pid=$(node_pid "$p")
		if [[ -n $pid ]] && pid_alive "$pid" "$p"; then continue; fi
		ping_ok "$p" && die "port $p answers but its pidfile process is gone; not touching it"
		dead+=("$p")
	done
	local t0
	t0=$(now)
	for p in "${dead[@]}"; do start_node "$p"; done
	((${#dead[@]} == 0)) || wait_nodes_ready "${dead[@]}"
	wait_healthy "$WAIT_SECS" || die "cluster not healthy ${WAIT_SECS}s after revive: $HEALTH_MSG"
	write_nodes_tsv
	log "revived [${dead[*]}], healthy after $(elapsed_since "$t0")s: masters ${MASTERS[*]}, replicas ${REPLICAS[*]}"
	printf '%s\n' "$(cat "$DIR/seeds" 2>/dev/null || seeds_of)"
}

cmd_wait() {
	[[ -f $DIR/$MARKER ]] || die "no cluster in $DIR"
	load_ports
	wait_healthy "$WAIT_SECS" || die "cluster not healthy after ${WAIT_SECS}s: $HEALTH_MSG"
	log "cluster healthy: masters ${MASTERS[*]}, replicas ${REPLICAS[*]}"
}

case "${1:-}" in
up) cmd_up ;;
revive) shift; cmd_revive "$@" ;;
wait) cmd_wait ;;
down) cmd_down ;;
status) cmd_status ;;
env) cmd_env ;;
-h | --help | help) usage ;;
*) usage ;;
esac
