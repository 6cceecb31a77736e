# A private Redis Cluster for the tests: sourced by scripts/test.sh, which calls redis_cluster_start
# and redis_cluster_stop. Three masters and three replicas (one per master), loopback only, on six
# consecutive ports from 57000 unless STATEPACT_REDIS_CLUSTER_PORT names the first. When any of the
# six is taken by a server this run directory did not start (another checkout's run), the next
# block of six is used instead (at most 20 tries), so two runs never share (and stop) each other's
# nodes. A named first port is not moved: a busy block there is an error.
# Each node lives in $STATEPACT_RUN_DIR/redis-cluster/<port> (nodes.conf, AOF, pid, log) and its
# whole start command is in start.sh there, so a failover test can kill a node and bring it back
# with `bash <node dir>/start.sh`. --cluster-node-timeout 2000 makes a failover take a few seconds.
# AOF is on (fsync on every write, as for the single server); RDB snapshots are off (--save '').
# A master starts a replica's full sync at once (--repl-diskless-sync-delay 0, not 5 s later), so
# the replicas of a new cluster, or a node a test brought back, are in sync within a second.
# The cluster bus listens 10000 above the node's port, or 10000 below when that would pass 65535
# (as it does from 57000), so it is named with --cluster-port.
# A cluster this run directory started is reused while it is healthy; otherwise it is stopped and
# created afresh. redis_cluster_stop wipes nodes.conf and the AOF, so a stopped cluster is never
# restarted from its old config.

_redis_cluster_port_explicit="${STATEPACT_REDIS_CLUSTER_PORT:+yes}"
_redis_cluster_first_port="${STATEPACT_REDIS_CLUSTER_PORT:-57000}"
STATEPACT_REDIS_CLUSTER_PORT="$_redis_cluster_first_port"

# The cluster bus port of the node on port $1.
_redis_cluster_bus_port() {
  if [ "$1" -le 55535 ]; then echo $(($1 + 10000)); else echo $(($1 - 10000)); fi
}

# Something listens on 127.0.0.1:$1.
_redis_cluster_port_busy() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Something listens on one of the six ports from $1, or on one of their cluster bus ports.
_redis_cluster_block_busy() {
  local port
  for port in $(seq "$1" $(($1 + 5))); do
    if _redis_cluster_port_busy "$port" ||
      _redis_cluster_port_busy "$(_redis_cluster_bus_port "$port")"; then
      return 0
    fi
  done
  return 1
}

# Process $1 runs: it exists and is not a zombie (a node that has exited but that init has not
# reaped yet, which can take a second).
_redis_cluster_alive() {
  local stat
  kill -0 "$1" 2>/dev/null || return 1
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [ "${stat:0:1}" != "Z" ]
}

# Prints the pid of the node this run directory started from node directory $1, when it is alive.
# The process name is checked too, so a stale pid file whose pid now names another process is not
# taken for ours (a test's kill -9 leaves the pid file behind).
_redis_cluster_node_pid() {
  local pid
  pid="$(cat "$1/redis.pid" 2>/dev/null)" || return 1
  if [ -n "$pid" ] && _redis_cluster_alive "$pid" &&
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "redis-server" ]; then
    echo "$pid"
    return 0
  fi
  return 1
}

# Prints the node directories under $1 (one per port, whether or not its node runs).
_redis_cluster_node_dirs() {
  local d
  for d in "$1"/*/; do
    d="${d%/}"
    [ -d "$d" ] || continue
    case "${d##*/}" in '' | *[!0-9]*) continue ;; esac
    echo "$d"
  done
}

# PONG only: a node still loading its AOF answers with an error (and redis-cli exits 0).
_redis_cluster_node_ready() {
  [ "$(redis-cli -p "$1" ping 2>/dev/null)" = "PONG" ]
}

# The cluster on ports "$@" is ready: every node says cluster_state:ok with all 16384 slots
# assigned, knows all six nodes and sees three shards; there are three masters and three replicas,
# and every replica's link to its master is up.
_redis_cluster_healthy() {
  local port info masters=0 replicas=0
  for port in "$@"; do
    info="$(redis-cli -p "$port" cluster info 2>/dev/null)" || return 1
    case "$info" in *cluster_state:ok*) ;; *) return 1 ;; esac
    case "$info" in *cluster_slots_assigned:16384*) ;; *) return 1 ;; esac
    case "$info" in *cluster_known_nodes:6*) ;; *) return 1 ;; esac
    case "$info" in *cluster_size:3*) ;; *) return 1 ;; esac
    info="$(redis-cli -p "$port" info replication 2>/dev/null)" || return 1
    case "$info" in
      *role:master*) masters=$((masters + 1)) ;;
      *role:slave*)
        case "$info" in *master_link_status:up*) ;; *) return 1 ;; esac
        replicas=$((replicas + 1))
        ;;
      *) return 1 ;;
    esac
  done
  [ "$masters" -eq 3 ] && [ "$replicas" -eq 3 ]
}

# Waits up to $1 seconds until the cluster on ports "${@:2}" is healthy.
_redis_cluster_wait_healthy() {
  local seconds=$1
  shift
  for _ in $(seq 1 $((seconds * 5))); do
    if _redis_cluster_healthy "$@"; then
      return 0
    fi
    sleep 0.2
  done
  _redis_cluster_healthy "$@"
}

# Stops every node this run directory started under $1 (whichever ports they are on), then wipes
# each node directory's cluster state (nodes.conf, AOF, pid file) so the next start creates a fresh
# cluster. Logs and start.sh stay. Fails if a node would not die.
_redis_cluster_stop_nodes() {
  local root=$1 d pid pids=() status=0
  while IFS= read -r d; do
    if pid="$(_redis_cluster_node_pid "$d")"; then
      # A node a test has paused (SIGSTOP) answers only once continued; the timeout bounds the rest.
      kill -CONT "$pid" 2>/dev/null || true
      timeout 2 redis-cli -p "${d##*/}" shutdown nosave now >/dev/null 2>&1 || true
      pids+=("$pid")
    fi
  done < <(_redis_cluster_node_dirs "$root")
  # SHUTDOWN first; then SIGTERM (with SIGCONT, for a paused node), then SIGKILL: 5 s for each.
  local signal
  for signal in none TERM KILL; do
    if [ ${#pids[@]} -eq 0 ]; then
      break
    fi
    if [ "$signal" != none ]; then
      for pid in "${pids[@]}"; do
        kill "-$signal" "$pid" 2>/dev/null || true
        kill -CONT "$pid" 2>/dev/null || true
      done
    fi
    for _ in $(seq 1 100); do
      local alive=()
      for pid in "${pids[@]}"; do
        if _redis_cluster_alive "$pid"; then alive+=("$pid"); fi
      done
      pids=("${alive[@]}")
      if [ ${#pids[@]} -eq 0 ]; then
        break
      fi
      sleep 0.05
    done
  done
  while IFS= read -r d; do
    if _redis_cluster_node_pid "$d" >/dev/null; then
      echo "redis cluster node ${d##*/} (pid $(cat "$d/redis.pid")) would not stop" >&2
      status=1
      continue
    fi
    rm -rf "$d/nodes.conf" "$d/appendonlydir" "$d/redis.pid" "$d"/appendonly.aof* "$d/dump.rdb" \
      "$d"/temp-*
  done < <(_redis_cluster_node_dirs "$root")
  return $status
}

# Writes the start command of the node on port $1 to its directory $2 and runs it.
_redis_cluster_start_node() {
  local port=$1 dir=$2
  mkdir -p "$dir"
  {
    echo "#!/usr/bin/env bash"
    echo "# Starts (or, after a kill, restarts) the Redis Cluster node on port $port; written by"
    echo "# redis_cluster_start (scripts/servers/redis_cluster.sh)."
    printf 'exec redis-server'
    printf ' %q' --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
      --cluster-port "$(_redis_cluster_bus_port "$port")" \
      --cluster-config-file "$dir/nodes.conf" --cluster-node-timeout 2000 \
      --repl-diskless-sync-delay 0 \
      --dir "$dir" --appendonly yes --appendfsync always --save '' --daemonize yes \
      --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
    echo
  } >"$dir/start.sh"
  bash "$dir/start.sh"
}

redis_cluster_start() {
  local root="${STATEPACT_RUN_DIR:?STATEPACT_RUN_DIR must be set}/redis-cluster"
  mkdir -p "$root"
  local ports=() port d
  if [ -f "$root/ports" ]; then
    read -r -a ports <"$root/ports" || true
  fi
  # Idempotent: our own cluster is reused when all six nodes run and it is healthy (a test may have
  # just brought a node back: its replica gets a few seconds to catch up).
  local ours=0
  if [ ${#ports[@]} -eq 6 ]; then
    for port in "${ports[@]}"; do
      if _redis_cluster_node_pid "$root/$port" >/dev/null; then ours=$((ours + 1)); fi
    done
  fi
  if [ "$ours" -eq 6 ] && _redis_cluster_wait_healthy 10 "${ports[@]}"; then
    STATEPACT_REDIS_CLUSTER_PORT="${ports[0]}"
  else
    # Some of ours may run in a broken cluster: stop them all and start from nothing.
    _redis_cluster_stop_nodes "$root" || {
      echo "could not stop this run's old redis cluster nodes; see $root" >&2
      return 1
    }
    rm -f "$root/ports"
    STATEPACT_REDIS_CLUSTER_PORT="$_redis_cluster_first_port"
    if [ -z "$_redis_cluster_port_explicit" ]; then
      local tries=0
      while _redis_cluster_block_busy "$STATEPACT_REDIS_CLUSTER_PORT" && [ $tries -lt 20 ]; do
        STATEPACT_REDIS_CLUSTER_PORT=$((STATEPACT_REDIS_CLUSTER_PORT + 6))
        tries=$((tries + 1))
      done
    fi
    if _redis_cluster_block_busy "$STATEPACT_REDIS_CLUSTER_PORT"; then
      echo "redis cluster: ports $STATEPACT_REDIS_CLUSTER_PORT-$((STATEPACT_REDIS_CLUSTER_PORT + 5))" \
        "(or their bus ports) are taken by servers this run did not start" >&2
      return 1
    fi
    read -r -a ports <<<"$(seq -s ' ' "$STATEPACT_REDIS_CLUSTER_PORT" $((STATEPACT_REDIS_CLUSTER_PORT + 5)))"
    # Nothing of ours runs any more: old node directories (logs, start.sh) go too.
    while IFS= read -r d; do rm -rf "$d"; done < <(_redis_cluster_node_dirs "$root")
    for port in "${ports[@]}"; do
      _redis_cluster_start_node "$port" "$root/$port" || {
        echo "redis-server for cluster node $port did not start; see $root/$port/redis.log" >&2
        return 1
      }
    done
    echo "${ports[*]}" >"$root/ports"
    for port in "${ports[@]}"; do
      for _ in $(seq 1 600); do
        if _redis_cluster_node_ready "$port"; then
          break
        fi
        sleep 0.05
      done
      _redis_cluster_node_ready "$port" || {
        echo "redis cluster node $port did not answer PING; see $root/$port/redis.log" >&2
        return 1
      }
    done
    local addrs=()
    for port in "${ports[@]}"; do addrs+=("127.0.0.1:$port"); done
    # Bounded: redis-cli waits for the nodes to agree with no limit of its own.
    timeout 60 redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
      >"$root/create.log" 2>&1 || {
      tail -n 20 "$root/create.log" >&2
      echo "redis-cli --cluster create failed; see $root/create.log and the logs in $root/<port>" >&2
      return 1
    }
    _redis_cluster_wait_healthy 60 "${ports[@]}" || {
      echo "redis cluster on ports ${ports[*]} did not become healthy within 60 s (cluster_state:ok" \
        "and 16384 slots on every node, every replica's master link up); see the logs in" \
        "$root/<port>/redis.log" >&2
      return 1
    }
  fi
  export STATEPACT_REDIS_CLUSTER_PORT
  export STATEPACT_TEST_REDIS_CLUSTER_URL="redis://127.0.0.1:${STATEPACT_REDIS_CLUSTER_PORT}"
  export STATEPACT_TEST_REDIS_CLUSTER_PORTS="${ports[*]}"
  export STATEPACT_TEST_REDIS_CLUSTER_DIR="$root"
}

redis_cluster_stop() {
  local root="${STATEPACT_RUN_DIR:?STATEPACT_RUN_DIR must be set}/redis-cluster"
  [ -d "$root" ] || return 0
  # Only the nodes this run directory started (found by their pid files), and all of them.
  _redis_cluster_stop_nodes "$root" || true
  rm -f "$root/ports"
  return 0
}
