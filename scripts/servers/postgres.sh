# A private PostgreSQL 15 for the tests: sourced by the test script, which calls postgres_start and
# postgres_stop. Data, socket and log live in $STATEPACT_RUN_DIR/postgres; the server listens on
# 127.0.0.1:55432 only, with trust authentication (a throwaway cluster nobody else can reach).
# PostgreSQL refuses to run as root, so every server command runs as user postgres.

STATEPACT_PG_BIN=${STATEPACT_PG_BIN:-/usr/lib/postgresql/15/bin}
STATEPACT_PG_PORT=${STATEPACT_PG_PORT:-55432}

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
  if ! _postgres_as "$STATEPACT_PG_BIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    _postgres_as "$STATEPACT_PG_BIN/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 30 \
      -o "-p $STATEPACT_PG_PORT -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off" \
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
  export STATEPACT_PG_DATA="$data"
  export STATEPACT_TEST_POSTGRES_URL="postgresql://postgres@127.0.0.1:$STATEPACT_PG_PORT/statepact_test"
}

postgres_stop() {
  local data="${STATEPACT_RUN_DIR:?STATEPACT_RUN_DIR must be set}/postgres/data"
  [ -f "$data/PG_VERSION" ] || return 0
  _postgres_as "$STATEPACT_PG_BIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
}
