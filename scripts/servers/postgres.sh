# A private PostgreSQL 15 for the tests: sourced by the test script, which calls postgres_start and
# postgres_stop. Data, socket and log live in $STATEPACT_RUN_DIR/postgres; the server listens on
# 127.0.0.1 only, with trust authentication (a throwaway cluster nobody else can reach), on port
# 55432 unless STATEPACT_PG_PORT names one. When the default port is taken by a server this run
# directory did not start, the next free port is used, so two runs never share a port.
# PostgreSQL refuses to run as root, so every server command runs as user postgres.

STATEPACT_PG_BIN=${STATEPACT_PG_BIN:-/usr/lib/postgresql/15/bin}
_pg_port_explicit="${STATEPACT_PG_PORT:+yes}"
STATEPACT_PG_PORT=${STATEPACT_PG_PORT:-55432}

# Something listens on 127.0.0.1:$1.
_pg_port_busy() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

_postgres_as() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

postgres_start() {
  local dir="${STATEPACT_RUN_DIR:?STATEPACT_RUN_DIR must be set}/postgres"
  local data="$dir/data"
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir"
  if [ ! -f "$data/PG_VERSION" ]; then
    _postgres_as "$STATEPACT_PG_BIN/initdb" -D "$data" -U postgres --auth=trust \
      --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || {
      cat "$dir/initdb.log" >&2
      return 1
    }
  fi
  # After a kill -9 the pid file stays behind and blocks the start: drop it if its process is gone.
  if [ -f "$data/postmaster.pid" ]; then
    local pid
    pid=$(head -n 1 "$data/postmaster.pid")
    if ! kill -0 "$pid" 2>/dev/null; then rm -f "$data/postmaster.pid"; fi
  fi
  if _postgres_as "$STATEPACT_PG_BIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    # Ours already runs: on the port recorded when it was started.
    [ -f "$dir/port" ] && STATEPACT_PG_PORT="$(cat "$dir/port")"
  else
    if [ -z "$_pg_port_explicit" ]; then
      local tries=0
      while _pg_port_busy "$STATEPACT_PG_PORT" && [ $tries -lt 50 ]; do
        STATEPACT_PG_PORT=$((STATEPACT_PG_PORT + 1))
        tries=$((tries + 1))
      done
    fi
    echo "$STATEPACT_PG_PORT" >"$dir/port"
    _postgres_as "$STATEPACT_PG_BIN/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 30 \
      -o "-p $STATEPACT_PG_PORT -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=${STATEPACT_PG_FSYNC:-off}" \
      start >/dev/null || {
      tail -n 30 "$dir/server.log" >&2
      return 1
    }
  fi
  local i
  for i in $(seq 1 100); do
    "$STATEPACT_PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$STATEPACT_PG_PORT" && break
    sleep 0.1
  done
  "$STATEPACT_PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$STATEPACT_PG_PORT" || {
    echo "postgres did not become ready" >&2
    return 1
  }
  if [ "$(_postgres_as "$STATEPACT_PG_BIN/psql" -h "$dir" -p "$STATEPACT_PG_PORT" -U postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname = 'statepact_test'")" != "1" ]; then
    _postgres_as "$STATEPACT_PG_BIN/createdb" -h "$dir" -p "$STATEPACT_PG_PORT" -U postgres \
      statepact_test
  fi
  export STATEPACT_PG_PORT
  export STATEPACT_PG_DATA="$data"
  export STATEPACT_TEST_POSTGRES_URL="postgresql://postgres@127.0.0.1:$STATEPACT_PG_PORT/statepact_test"
}

# Succeeds when the server is down afterwards (or never ran); fails if it could not be stopped.
postgres_stop() {
  local data="${STATEPACT_RUN_DIR:?STATEPACT_RUN_DIR must be set}/postgres/data"
  [ -f "$data/PG_VERSION" ] || return 0
  _postgres_as "$STATEPACT_PG_BIN/pg_ctl" -D "$data" status >/dev/null 2>&1 || return 0
  _postgres_as "$STATEPACT_PG_BIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null
}

# A crash: SIGKILL to the postmaster and its children at once (no shutdown checkpoint), then
# waits until they are gone. The next postgres_start runs crash recovery.
postgres_kill() {
  local data="${STATEPACT_RUN_DIR:?STATEPACT_RUN_DIR must be set}/postgres/data"
  [ -f "$data/postmaster.pid" ] || { echo "postgres_kill: no postmaster.pid" >&2; return 1; }
  local pid children i
  pid=$(head -n 1 "$data/postmaster.pid")
  kill -0 "$pid" 2>/dev/null || { echo "postgres_kill: postmaster $pid is not running" >&2; return 1; }
  children=$(pgrep -P "$pid")
  # shellcheck disable=SC2086  # one word per pid
  kill -KILL "$pid" $children || return 1
  for i in $(seq 1 100); do
    local alive=0 p
    for p in $pid $children; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && return 0
    sleep 0.05
  done
  echo "postgres_kill: processes of postmaster $pid still alive" >&2
  return 1
}
