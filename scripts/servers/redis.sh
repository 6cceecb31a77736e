# A private redis-server for the tests: sourced by scripts/test.sh, which calls redis_start and
# redis_stop. Loopback only, port 56379 unless STATEPACT_REDIS_PORT names one. When the default port
# is taken by a server this run directory did not start (another checkout's run), the next free
# port is used instead, so two runs never share (and stop) each other's server.
# AOF is on so fencing tokens survive a restart; RDB snapshots are off (--save '').

_redis_port_explicit="${STATEPACT_REDIS_PORT:+yes}"
STATEPACT_REDIS_PORT="${STATEPACT_REDIS_PORT:-56379}"

# PONG only: a server still loading its AOF answers with an error (and redis-cli exits 0).
_redis_ready() {
  [ "$(redis-cli -p "$STATEPACT_REDIS_PORT" ping 2>/dev/null)" = "PONG" ]
}

# Something listens on 127.0.0.1:$1.
_port_busy() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# The server this run directory started is alive.
_redis_ours() {
  local dir="$STATEPACT_RUN_DIR/redis"
  [ -f "$dir/redis.pid" ] && [ -f "$dir/port" ] && kill -0 "$(cat "$dir/redis.pid")" 2>/dev/null
}

redis_start() {
  local dir="${STATEPACT_RUN_DIR:?STATEPACT_RUN_DIR must be set}/redis"
  mkdir -p "$dir"
  if _redis_ours; then
    STATEPACT_REDIS_PORT="$(cat "$dir/port")"
  elif [ -z "$_redis_port_explicit" ]; then
    local tries=0
    while _port_busy "$STATEPACT_REDIS_PORT" && [ $tries -lt 50 ]; do
      STATEPACT_REDIS_PORT=$((STATEPACT_REDIS_PORT + 1))
      tries=$((tries + 1))
    done
  fi
  export STATEPACT_REDIS_PORT
  export STATEPACT_TEST_REDIS_URL="redis://127.0.0.1:${STATEPACT_REDIS_PORT}/0"
  # Idempotent: our own server is reused; so is one on an explicitly named port (left running by
  # redis_stop, since this run directory did not start it).
  if _redis_ready; then
    return 0
  fi
  redis-server --port "$STATEPACT_REDIS_PORT" --bind 127.0.0.1 --daemonize yes \
    --dir "$dir" --appendonly yes --appendfsync always --save '' \
    --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" || return 1
  echo "$STATEPACT_REDIS_PORT" >"$dir/port"
  local i
  for i in $(seq 1 600); do
    if _redis_ready; then
      return 0
    fi
    sleep 0.05
  done
  echo "redis-server did not answer PING on port $STATEPACT_REDIS_PORT; see $dir/redis.log" >&2
  return 1
}

redis_stop() {
  local dir="${STATEPACT_RUN_DIR:?STATEPACT_RUN_DIR must be set}/redis"
  # Only the server this run directory started: one reused from another checkout is not ours.
  [ -f "$dir/redis.pid" ] || return 0
  local pid
  pid="$(cat "$dir/redis.pid")"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    local port
    port="$(cat "$dir/port" 2>/dev/null || echo "$STATEPACT_REDIS_PORT")"
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || kill "$pid"
    local i
    for i in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
  fi
  rm -f "$dir/redis.pid" "$dir/port"
  return 0
}
