#!/usr/bin/env bash
# A local rqlite cluster on 127.0.0.1 for development and tests.
#
#   scripts/local_cluster.sh start [--nodes N] [--workers W]
#                                                start N nodes (default 3), wait for a
#                                                leader, start W taskq-worker processes
#                                                (default 0), print the store URL (last line)
#   scripts/local_cluster.sh status              each node's id, address, raft state, leader
#   scripts/local_cluster.sh stop                stop every recorded node (idempotent)
#
# Environment:
#   TASKQ_CLUSTER_DIR        data, logs and pid files
#                            (default ${XDG_RUNTIME_DIR:-/tmp}/taskq-cluster)
#   TASKQ_CLUSTER_HTTP_BASE  HTTP port of node 1 (default 4001); node i uses base+2(i-1)
#   TASKQ_CLUSTER_RAFT_BASE  Raft port of node 1 (default HTTP base + 1); same stride
#   TASKQ_CLUSTER_RQLITED_ARGS  extra rqlited flags for every node, split on spaces
#                            (e.g. "-raft-election-timeout 500ms -raft-heartbeat-timeout 500ms")
#   TASKQ_CLUSTER_START_TIMEOUT  seconds `start` waits for a leader (default 60)
#   TASKQ_CLUSTER_STOP_TIMEOUT   seconds `stop` waits after SIGTERM before SIGKILL (default 10)
#   TASKQ_RQLITED            rqlited binary (otherwise found by scripts/install_rqlite.sh)
#   TASKQ_WORKER_MODULES     modules the workers run jobs from (default taskq.demo_jobs)
#
# `start` wipes the previous cluster's data: every start is a fresh cluster.
# Layout: $TASKQ_CLUSTER_DIR/node<i>/{data/,rqlited.log,pid,http,raft},
#         $TASKQ_CLUSTER_DIR/worker<i>/{worker.log,pid}, plus ./url.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR
readonly HOST="127.0.0.1"
readonly CLUSTER_DIR="${TASKQ_CLUSTER_DIR:-${XDG_RUNTIME_DIR:-/tmp}/taskq-cluster}"
readonly HTTP_BASE="${TASKQ_CLUSTER_HTTP_BASE:-4001}"
readonly RAFT_BASE="${TASKQ_CLUSTER_RAFT_BASE:-$((HTTP_BASE + 1))}"
readonly START_TIMEOUT="${TASKQ_CLUSTER_START_TIMEOUT:-60}"
readonly STOP_TIMEOUT="${TASKQ_CLUSTER_STOP_TIMEOUT:-10}"

log() { printf 'local_cluster: %s\n' "$*" >&2; }

fail() {
    printf 'local_cluster: error: %s\n' "$*" >&2
    exit 1
}

usage() {
    sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

http_port() { echo $((HTTP_BASE + 2 * ($1 - 1))); }
raft_port() { echo $((RAFT_BASE + 2 * ($1 - 1))); }
node_dir() { echo "$CLUSTER_DIR/node$1"; }

# Node numbers recorded in the cluster directory, in order.
recorded_nodes() {
    local dir
    for dir in "$CLUSTER_DIR"/node*; do
        [[ -f "$dir/http" ]] && echo "${dir##*/node}"
    done | sort -n
}

# The recorded pid of node $1, printed only if that process is still the
# rqlited we started (its command line names the node's data directory).
live_pid() {
    local pidfile pid
    pidfile="$(node_dir "$1")/pid"
    [[ -f "$pidfile" ]] || return 1
    pid="$(<"$pidfile")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$(node_dir "$1")/data" || return 1
    echo "$pid"
}

port_is_free() {
    python3 -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind((sys.argv[1], int(sys.argv[2])))
except OSError:
    sys.exit(1)
' "$HOST" "$1"
}

find_rqlited() {
    local path
    if ! path="$("$SCRIPT_DIR/install_rqlite.sh" | tail -n 1)"; then
        fail "scripts/install_rqlite.sh could not provide rqlited (see above)"
    fi
    [[ -x "$path" ]] || fail "scripts/install_rqlite.sh printed '$path', which is not executable"
    echo "$path"
}

# Print "<raft state> <leader node id>" for the node at HTTP address $1, or fail.
node_raft_view() {
    curl -fsS --max-time 2 "http://$1/status" 2>/dev/null | python3 -c '
import json, sys
store = json.load(sys.stdin).get("store", {})
print(store.get("raft", {}).get("state", "?"), store.get("leader", {}).get("node_id") or "-")
'
}

cluster_url() {
    local urls=() i
    for ((i = 1; i <= $1; i++)); do
        urls+=("$HOST:$(http_port "$i")")
    done
    local IFS=,
    echo "rqlite://${urls[*]}"
}

cmd_start() {
    local nodes=3 workers=0
    while (($#)); do
        case "$1" in
            --workers)
                [[ "${2:-}" =~ ^[0-9]+$ ]] || fail "--workers needs a number"
                workers="$2"
                shift 2
                ;;
            --workers=*)
                workers="${1#--workers=}"
                [[ "$workers" =~ ^[0-9]+$ ]] || fail "--workers needs a number"
                shift
                ;;
            --nodes)
                [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || fail "--nodes needs a positive number"
                nodes="$2"
                shift 2
                ;;
            --nodes=*)
                nodes="${1#--nodes=}"
                [[ "$nodes" =~ ^[1-9][0-9]*$ ]] || fail "--nodes needs a positive number"
                shift
                ;;
            *) usage ;;
        esac
    done

    local i
    for i in $(recorded_nodes); do
        if live_pid "$i" >/dev/null; then
            fail "a cluster is already running in $CLUSTER_DIR (run: $0 stop)"
        fi
    done
    for ((i = 1; i <= nodes; i++)); do
        port_is_free "$(http_port "$i")" || fail "port $(http_port "$i") on $HOST is in use (set TASKQ_CLUSTER_HTTP_BASE)"
        port_is_free "$(raft_port "$i")" || fail "port $(raft_port "$i") on $HOST is in use (set TASKQ_CLUSTER_RAFT_BASE)"
    done

    local rqlited
    rqlited="$(find_rqlited)"
    rm -rf "$CLUSTER_DIR"
    mkdir -p "$CLUSTER_DIR"

    # Every node gets -bootstrap-expect N and -join with all Raft addresses, so
    # the nodes are symmetric and can start in any order.
    local joins=() extra=()
    for ((i = 1; i <= nodes; i++)); do
        joins+=("$HOST:$(raft_port "$i")")
    done
    read -r -a extra <<<"${TASKQ_CLUSTER_RQLITED_ARGS:-}"
    local join_list
    join_list="$(IFS=,; echo "${joins[*]}")"

    for ((i = 1; i <= nodes; i++)); do
        local dir args
        dir="$(node_dir "$i")"
        mkdir -p "$dir/data"
        args=(-node-id "node$i"
            -http-addr "$HOST:$(http_port "$i")"
            -raft-addr "$HOST:$(raft_port "$i")")
        if ((nodes > 1)); then
            args+=(-bootstrap-expect "$nodes" -join "$join_list")
        fi
        args+=("${extra[@]}" "$dir/data")
        printf '%s\n' "$rqlited" "${args[@]}" >"$dir/cmdline"
        # setsid: the node outlives this shell and its process group.
        setsid "$rqlited" "${args[@]}" </dev/null >"$dir/rqlited.log" 2>&1 &
        echo "$!" >"$dir/pid"
        echo "$HOST:$(http_port "$i")" >"$dir/http"
        echo "$HOST:$(raft_port "$i")" >"$dir/raft"
        log "node$i: pid $!, http $HOST:$(http_port "$i"), raft $HOST:$(raft_port "$i"), log $dir/rqlited.log"
    done

    # Wait (bounded) until every node is up and agrees on a leader.
    local deadline=$((SECONDS + START_TIMEOUT)) ready view
    while :; do
        ready=0
        for ((i = 1; i <= nodes; i++)); do
            if ! live_pid "$i" >/dev/null; then
                log "node$i exited; last lines of $(node_dir "$i")/rqlited.log:"
                tail -n 20 "$(node_dir "$i")/rqlited.log" >&2 || true
                cmd_stop
                fail "node$i did not start"
            fi
            if view="$(node_raft_view "$HOST:$(http_port "$i")")" && [[ "${view#* }" != "-" ]]; then
                ready=$((ready + 1))
            fi
        done
        ((ready == nodes)) && break
        if ((SECONDS >= deadline)); then
            log "no leader known to all $nodes nodes after ${START_TIMEOUT}s; logs are in $CLUSTER_DIR"
            cmd_stop
            fail "cluster did not come up"
        fi
        sleep 0.2
    done

    local url
    url="$(cluster_url "$nodes")"
    echo "$url" >"$CLUSTER_DIR/url"
    if ((workers > 0)); then
        start_workers "$workers" "$url"
    fi
    log "leader: $(node_raft_view "$HOST:$(http_port 1)" | cut -d' ' -f2); stop with: $0 stop"
    echo "$url"
}

# Start $1 taskq-worker processes against store URL $2, from the project's
# virtualenv (set up on first use).
start_workers() {
    local count="$1" url="$2" i dir
    "$SCRIPT_DIR/bootstrap.sh"
    local worker_bin="$SCRIPT_DIR/../.venv/bin/taskq-worker"
    for ((i = 1; i <= count; i++)); do
        dir="$CLUSTER_DIR/worker$i"
        mkdir -p "$dir"
        setsid "$worker_bin" --store "$url" --name "worker$i" \
            --modules "${TASKQ_WORKER_MODULES:-taskq.demo_jobs}" </dev/null >"$dir/worker.log" 2>&1 &
        echo "$!" >"$dir/pid"
        log "worker$i: pid $!, log $dir/worker.log"
    done
}

# The recorded pid of worker $1, printed only if that process is still a taskq-worker.
live_worker_pid() {
    local pidfile pid
    pidfile="$CLUSTER_DIR/worker$1/pid"
    [[ -f "$pidfile" ]] || return 1
    pid="$(<"$pidfile")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--name worker$1" || return 1
    echo "$pid"
}

# Workers drain on SIGTERM: their running jobs finish or are handed back.
stop_workers() {
    local dir i pid pids=()
    for dir in "$CLUSTER_DIR"/worker*; do
        [[ -d "$dir" ]] || continue
        i="${dir##*/worker}"
        if pid="$(live_worker_pid "$i")"; then
            log "worker$i: SIGTERM to pid $pid"
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
    done
    local deadline=$((SECONDS + STOP_TIMEOUT + 30))
    for pid in "${pids[@]}"; do
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "worker pid $pid still running, SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    rm -f "$CLUSTER_DIR"/worker*/pid
}

cmd_stop() {
    stop_workers
    local i pid stopped=0 pids=()
    for i in $(recorded_nodes); do
        if pid="$(live_pid "$i")"; then
            log "node$i: SIGTERM to pid $pid"
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$i:$pid")
        fi
    done
    local deadline=$((SECONDS + STOP_TIMEOUT)) entry
    for entry in "${pids[@]}"; do
        i="${entry%%:*}"
        pid="${entry#*:}"
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "node$i: still running after ${STOP_TIMEOUT}s, SIGKILL to pid $pid"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        stopped=$((stopped + 1))
    done
    for i in $(recorded_nodes); do
        rm -f "$(node_dir "$i")/pid"
    done
    log "stopped $stopped node(s)"
}

cmd_status() {
    local nodes
    nodes="$(recorded_nodes)"
    if [[ -z "$nodes" ]]; then
        echo "no cluster in $CLUSTER_DIR"
        return 1
    fi
    local i pid http view any_http="" up=0
    printf '%-7s %-8s %-16s %-10s %s\n' NODE PID HTTP STATE LEADER
    for i in $nodes; do
        http="$(<"$(node_dir "$i")/http")"
        if ! pid="$(live_pid "$i")"; then
            printf '%-7s %-8s %-16s %-10s %s\n' "node$i" "-" "$http" "down" "-"
            continue
        fi
        if view="$(node_raft_view "$http")"; then
            up=$((up + 1))
            any_http="${any_http:-$http}"
            printf '%-7s %-8s %-16s %-10s %s\n' "node$i" "$pid" "$http" "${view%% *}" "${view#* }"
        else
            printf '%-7s %-8s %-16s %-10s %s\n' "node$i" "$pid" "$http" "no-answer" "-"
        fi
    done
    if [[ -n "$any_http" ]]; then
        echo
        echo "cluster membership as seen by $any_http (/nodes?ver=2):"
        curl -fsS --max-time 5 "http://$any_http/nodes?ver=2" | python3 -c '
import json, sys
for n in sorted(json.load(sys.stdin).get("nodes", []), key=lambda n: n.get("id", "")):
    print("  %-7s api=%-22s raft=%-16s voter=%-5s reachable=%-5s leader=%s" % (
        n.get("id"), n.get("api_addr"), n.get("addr"), n.get("voter"),
        n.get("reachable"), n.get("leader")))
' || echo "  (no answer)"
    fi
    local dir wpid
    for dir in "$CLUSTER_DIR"/worker*; do
        [[ -d "$dir" ]] || continue
        i="${dir##*/worker}"
        if wpid="$(live_worker_pid "$i")"; then
            echo "worker$i: running, pid $wpid, log $dir/worker.log"
        else
            echo "worker$i: not running"
        fi
    done
    if [[ -f "$CLUSTER_DIR/url" ]]; then
        echo
        echo "store URL: $(<"$CLUSTER_DIR/url")"
    fi
    ((up > 0))
}

main() {
    (($#)) || usage
    local command="$1"
    shift
    case "$command" in
        start) cmd_start "$@" ;;
        stop) (($# == 0)) || usage; cmd_stop ;;
        status) (($# == 0)) || usage; cmd_status ;;
        -h | --help | help) usage ;;
        *) usage ;;
    esac
}

main "$@"
