#!/usr/bin/env bash
# Fault injection: runs every workload of tests/chaos against a private server while nemeses pause
# and kill clients, kill and restart the server and cut connections, then checks the recorded
# history (docs/reliability.md). Exits non-zero on any anomaly and keeps that run's histories.
#
#   bash scripts/chaos.sh postgres|redis|all|memory [SECONDS]     (default 60 seconds)
#
# Environment (all optional):
#   STATEPACT_CHAOS_SEED          seed of the nemesis schedule and the clients (default: the time)
#   STATEPACT_CHAOS_CLIENTS       client processes per workload (default 3)
#   STATEPACT_CHAOS_REDIS_FSYNC   appendfsync of the Redis server: always (safe, default), everysec,
#                                 no; or none: no AOF at all (unsafe, to see the checker catch it)
#   STATEPACT_CHAOS_REDIS_PORT    default 56479;  STATEPACT_CHAOS_PG_PORT  default 55532
#   STATEPACT_CHAOS_KEEP=1        keep the histories of a clean run too
#   STATEPACT_CHAOS_BUILD_DIR     a configured build tree to build the programs in (default build/chaos)
#
# Everything runs on loopback, in build/chaos-run; servers and clients it started are stopped on
# exit, also on Ctrl-C. Run as root (PostgreSQL is started through runuser).
set -euo pipefail
STATEPACT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$STATEPACT_ROOT/scripts/lib/packages.sh"

target=${1:-}
duration=${2:-60}
case "$target" in
  postgres | redis | all | memory) ;;
  *)
    echo "usage: bash scripts/chaos.sh postgres|redis|all|memory [SECONDS]" >&2
    exit 2
    ;;
esac
if ! [[ "$duration" =~ ^[0-9]+$ ]] || [ "$duration" -lt 5 ] || [ "$duration" -gt 86400 ]; then
  echo "chaos.sh: SECONDS must be a whole number from 5 to 86400, not '$duration'" >&2
  exit 2
fi
if [ "$target" = memory ]; then
  # Every nemesis here acts on processes and connections: a memory backend lives inside one
  # process, where pausing or killing that process pauses or kills its storage with it.
  echo "chaos.sh: the memory backend has no server process or connection to fault; skipped" \
    "(docs/reliability.md)"
  exit 0
fi
if [ "$target" = all ]; then
  status=0
  bash "$0" postgres "$duration" || status=1
  bash "$0" redis "$duration" || status=1
  exit $status
fi
backend=$target

seed=${STATEPACT_CHAOS_SEED:-$(date +%s)}
clients_per_workload=${STATEPACT_CHAOS_CLIENTS:-3}
fsync=${STATEPACT_CHAOS_REDIS_FSYNC:-always}
# "none" turns persistence off altogether: an unsafe setting the checker must catch.
case "$fsync" in
  always | everysec | no) redis_extra="--appendfsync $fsync" ;;
  none) redis_extra="--appendonly no" ;;
  *)
    echo "chaos.sh: STATEPACT_CHAOS_REDIS_FSYNC must be always, everysec, no or none" >&2
    exit 2
    ;;
esac
export STATEPACT_REDIS_PORT=${STATEPACT_CHAOS_REDIS_PORT:-56479}
export STATEPACT_PG_PORT=${STATEPACT_CHAOS_PG_PORT:-55532}
RANDOM=$seed

ensure_packages "${STATEPACT_BUILD_PACKAGES[@]}" "${STATEPACT_BACKEND_PACKAGES[@]}"

# STATEPACT_CHAOS_BUILD_DIR: an existing build tree to take the programs from (the test command
# passes its normal tree, so nothing is compiled twice); otherwise build/chaos.
build=${STATEPACT_CHAOS_BUILD_DIR:-"$STATEPACT_ROOT/build/chaos"}
echo "==> building the harness in $build"
if [ -z "${STATEPACT_CHAOS_BUILD_DIR:-}" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S "$STATEPACT_ROOT" -B "$build" -G Ninja "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSTATEPACT_BUILD_BENCH=OFF -DSTATEPACT_BUILD_EXAMPLES=OFF -DSTATEPACT_PACKAGING_TESTS=OFF \
    -DSTATEPACT_HEADER_CHECKS=OFF >/dev/null
fi
cmake --build "$build" -j 2 --target statepact_chaos_client statepact_chaos_check >/dev/null
client_bin="$build/tests/chaos/statepact_chaos_client"
check_bin="$build/tests/chaos/statepact_chaos_check"

run_root="$STATEPACT_ROOT/build/chaos-run"
export STATEPACT_RUN_DIR="$run_root/$backend"
history="$run_root/history-$backend-$(date +%Y%m%d-%H%M%S)-seed$seed"
mkdir -p "$history"
nemesis_file="$history/nemesis.jsonl"

# A redis-server that always gets the chosen appendfsync, also when redis_start restarts it.
mkdir -p "$STATEPACT_RUN_DIR/bin"
cat >"$STATEPACT_RUN_DIR/bin/redis-server" <<EOF
#!/bin/sh
exec $(command -v redis-server) "\$@" $redis_extra
EOF
chmod +x "$STATEPACT_RUN_DIR/bin/redis-server"
export PATH="$STATEPACT_RUN_DIR/bin:$PATH"

source "$STATEPACT_ROOT/scripts/servers/$backend.sh"

declare -A client_pid=()      # client id -> pid
declare -A client_workload=() # client id -> workload
next_client=1
stopping=0

cleanup() {
  stopping=1
  local id
  for id in "${!client_pid[@]}"; do
    kill -CONT "${client_pid[$id]}" 2>/dev/null || true
    kill -KILL "${client_pid[$id]}" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  "${backend}_stop" || true
}
trap cleanup EXIT
trap 'echo "chaos.sh: interrupted" >&2; exit 130' INT TERM

# Fresh server data: a previous run's entries would look like writes nobody made.
"${backend}_stop" || true
rm -rf "${STATEPACT_RUN_DIR:?}/redis" "${STATEPACT_RUN_DIR:?}/postgres"
echo "==> starting $backend (port $([ "$backend" = redis ] && echo "$STATEPACT_REDIS_PORT" ||
  echo "$STATEPACT_PG_PORT"))"
"${backend}_start"
if [ "$backend" = redis ]; then
  url=$STATEPACT_TEST_REDIS_URL
else
  url=$STATEPACT_TEST_POSTGRES_URL
fi
case "$url" in *127.0.0.1* | *localhost*) ;; *)
  echo "chaos.sh: refusing a non-loopback server URL" >&2
  exit 2
  ;;
esac

now_s() { date +%s; }
start_s=$(now_s)
end_s=$((start_s + duration))

workloads=(fenced-log bank list-append increments)
resources_of() { # workload -> resources
  case $1 in fenced-log) echo 3 ;; bank) echo 3 ;; list-append) echo 3 ;; increments) echo 1 ;; esac
}
keys_of() {
  case $1 in bank) echo 8 ;; list-append) echo 6 ;; *) echo 1 ;; esac
}

start_client() { # workload
  local w=$1 id=$next_client remaining
  next_client=$((next_client + 1))
  remaining=$((end_s - $(now_s)))
  [ "$remaining" -ge 1 ] || return 0
  "$client_bin" --backend "$backend" --url "$url" --workload "$w" --client "$id" \
    --duration "$remaining" --seed "$seed" --resources "$(resources_of "$w")" --keys "$(keys_of "$w")" \
    --history "$history/client-$id.jsonl" 2>>"$history/clients.log" &
  client_pid[$id]=$!
  client_workload[$id]=$w
}

log_fault() { # kind phase [args-json]
  "$client_bin" nemesis "$nemesis_file" "$@"
}

live_clients() {
  local id
  for id in "${!client_pid[@]}"; do
    kill -0 "${client_pid[$id]}" 2>/dev/null && echo "$id"
  done
}
random_client() {
  local ids
  mapfile -t ids < <(live_clients | sort -n)
  [ ${#ids[@]} -gt 0 ] || return 1
  echo "${ids[$((RANDOM % ${#ids[@]}))]}"
}

sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }

server_kill() {
  if [ "$backend" = redis ]; then
    local pid
    pid=$(cat "$STATEPACT_RUN_DIR/redis/redis.pid" 2>/dev/null || true)
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
    while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.02; done
  else
    # Postmaster and every backend at once, like a crash: restart runs crash recovery.
    local data="$STATEPACT_RUN_DIR/postgres/data" pm children
    pm=$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)
    if [ -n "$pm" ]; then
      children=$(pgrep -P "$pm" || true)
      kill -KILL "$pm" $children 2>/dev/null || true
      local p
      for p in $pm $children; do
        while kill -0 "$p" 2>/dev/null; do sleep 0.02; done
      done
    fi
  fi
}

kill_connections() {
  if [ "$backend" = redis ]; then
    local ids id n=0
    mapfile -t ids < <(redis-cli -p "$STATEPACT_REDIS_PORT" client list 2>/dev/null |
      grep -o 'id=[0-9]* .*name=chaos-[0-9]*' | sed 's/^id=\([0-9]*\) .*/\1/')
    for id in "${ids[@]}"; do
      if [ $((RANDOM % 2)) -eq 0 ]; then
        redis-cli -p "$STATEPACT_REDIS_PORT" client kill id "$id" >/dev/null 2>&1 || true
        n=$((n + 1))
      fi
    done
    echo $n
  else
    _postgres_as "$STATEPACT_PG_BIN/psql" -h "$STATEPACT_RUN_DIR/postgres" -p "$STATEPACT_PG_PORT" \
      -U postgres -d statepact_test -tAc \
      "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
       WHERE application_name LIKE 'chaos-%' AND random() < 0.5" 2>/dev/null || echo 0
  fi
}

nemesis() {
  local kind id pid ms n
  case $((RANDOM % 4)) in
    0)
      kind=pause-client
      id=$(random_client) || return 0
      pid=${client_pid[$id]}
      ms=$((600 + RANDOM % 1400)) # past every lease ttl (at most 500 ms)
      log_fault "$kind" start "{\"client\": $id, \"ms\": $ms}"
      kill -STOP "$pid" 2>/dev/null || true
      sleep_ms $ms
      kill -CONT "$pid" 2>/dev/null || true
      log_fault "$kind" end
      ;;
    1)
      kind=kill-client
      id=$(random_client) || return 0
      log_fault "$kind" start "{\"client\": $id}"
      kill -KILL "${client_pid[$id]}" 2>/dev/null || true
      wait "${client_pid[$id]}" 2>/dev/null || true
      unset "client_pid[$id]"
      start_client "${client_workload[$id]}"
      log_fault "$kind" end
      ;;
    2)
      kind=kill-server
      ms=$((RANDOM % 1000))
      log_fault "$kind" start "{\"down_ms\": $ms}"
      server_kill
      sleep_ms $ms
      "${backend}_start" >/dev/null
      log_fault "$kind" end
      ;;
    3)
      kind=kill-connections
      log_fault "$kind" start
      n=$(kill_connections)
      log_fault "$kind" end "{\"killed\": ${n:-0}}"
      ;;
  esac
}

echo "==> $backend: ${#workloads[@]} workloads x $clients_per_workload clients for ${duration}s," \
  "seed $seed$([ "$backend" = redis ] && echo ", redis $redis_extra")"
for w in "${workloads[@]}"; do
  for _ in $(seq 1 "$clients_per_workload"); do start_client "$w"; done
done

while [ "$(now_s)" -lt "$end_s" ]; do
  sleep_ms $((300 + RANDOM % 1200))
  [ "$(now_s)" -lt "$end_s" ] || break
  nemesis
done

# Clients stop by themselves at the end; one stuck past a grace period is killed (its last
# operation then stays open, an unknown outcome, which the checker allows).
grace_end=$(($(now_s) + 20))
for id in "${!client_pid[@]}"; do
  pid=${client_pid[$id]}
  while kill -0 "$pid" 2>/dev/null && [ "$(now_s)" -lt "$grace_end" ]; do sleep 0.1; done
  kill -CONT "$pid" 2>/dev/null || true
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset "client_pid[$id]"
done

echo "==> final reads"
"${backend}_start" >/dev/null # idempotent: makes sure the server answers
final_id=900000
for w in "${workloads[@]}"; do
  timeout 120 "$client_bin" --backend "$backend" --url "$url" --workload "$w" --client $final_id \
    --seed "$seed" --resources "$(resources_of "$w")" --keys "$(keys_of "$w")" \
    --history "$history/final-$w.jsonl" --final 2>>"$history/clients.log" || true
  final_id=$((final_id + 1))
done

echo "==> checking $(find "$history" -name '*.jsonl' | wc -l) history files ($(cat "$history"/*.jsonl |
  wc -l) lines), $(($(now_s) - start_s))s"
set +e
"$check_bin" "$history"/*.jsonl
status=$?
set -e
if [ $status -eq 0 ] && [ "${STATEPACT_CHAOS_KEEP:-0}" != 1 ]; then
  rm -rf "$history"
  echo "==> $backend: no anomaly"
else
  [ $status -eq 0 ] && echo "==> $backend: no anomaly; histories kept in $history" ||
    echo "==> $backend: ANOMALIES or malformed history (status $status); histories kept in $history"
fi
exit $status
