# A private redis-server for the tests: sourced by scripts/test.sh, which calls redis_start and
# redis_stop. Port 56379 on loopback so it never meets a system or another engineer's server.
# AOF is on so fencing tokens survive a restart; RDB snapshots are off (--save '').

STATEPACT_REDIS_PORT="${STATEPACT_REDIS_PORT:-56379}"

redis_start() {
  local dir="${STATEPACT_RUN_DIR:?STATEPACT_RUN_DIR must be set}/redis"
  mkdir -p "$dir"
  export STATEPACT_TEST_REDIS_URL="redis://127.0.0.1:${STATEPACT_REDIS_PORT}/0"
  # Idempotent: a server already answering on our port is reused.
  if redis-cli -p "$STATEPACT_REDIS_PORT" ping >/dev/null 2>&1; then
    return 0
  fi
  redis-server --port "$STATEPACT_REDIS_PORT" --bind 127.0.0.1 --daemonize yes \
    --dir "$dir" --appendonly yes --save '' \
    --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" || return 1
  local i
  for i in $(seq 1 100); do
    if redis-cli -p "$STATEPACT_REDIS_PORT" ping >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.05
  done
  echo "redis-server did not answer PING on port $STATEPACT_REDIS_PORT; see $dir/redis.log" >&2
  return 1
}

redis_stop() {
  local dir="${STATEPACT_RUN_DIR:?STATEPACT_RUN_DIR must be set}/redis"
  if redis-cli -p "$STATEPACT_REDIS_PORT" shutdown nosave >/dev/null 2>&1; then
    return 0
  fi
  # Not answering: fall back to the pid file, if its process still exists.
  if [ -f "$dir/redis.pid" ]; then
    local pid
    pid="$(cat "$dir/redis.pid")"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
    fi
    rm -f "$dir/redis.pid"
  fi
  return 0
}
