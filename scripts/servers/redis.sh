# A private redis-server for the tests: sourced by scripts/test.sh, which calls redis_start and
# redis_stop. Port 56379 on loopback so it never meets a system or another engineer's server.
# AOF is on so fencing tokens survive a restart; RDB snapshots are off (--save '').

STATEPACT_REDIS_PORT="${STATEPACT_REDIS_PORT:-56379}"

# PONG only: a server still loading its AOF answers with an error (and redis-cli exits 0).
_redis_ready() {
  [ "$(redis-cli -p "$STATEPACT_REDIS_PORT" ping 2>/dev/null)" = "PONG" ]
}

redis_start() {
  local dir="${STATEPACT_RUN_DIR:?STATEPACT_RUN_DIR must be set}/redis"
  mkdir -p "$dir"
  export STATEPACT_TEST_REDIS_URL="redis://127.0.0.1:${STATEPACT_REDIS_PORT}/0"
  # Idempotent: a server already answering on our port is reused (and left running by redis_stop
  # unless this run directory started it).
  if _redis_ready; then
    return 0
  fi
  redis-server --port "$STATEPACT_REDIS_PORT" --bind 127.0.0.1 --daemonize yes \
    --dir "$dir" --appendonly yes --appendfsync always --save '' \
    --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" || return 1
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
    redis-cli -p "$STATEPACT_REDIS_PORT" shutdown nosave >/dev/null 2>&1 || kill "$pid"
    local i
    for i in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
  fi
  rm -f "$dir/redis.pid"
  return 0
}
