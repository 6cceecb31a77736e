#!/usr/bin/env bash
# Fault injection: runs every workload of tests/chaos against a private server while nemeses pause
# and kill clients, kill and restart the server, cut connections, slow down and partition the
# network (through two TCP relays) and step the server's clock, then checks the recorded history
# (docs/reliability.md). Exits non-zero on any anomaly and keeps that run's histories.
#
#   bash scripts/chaos.sh postgres|redis|all|memory [SECONDS]     (default 60 seconds)
#
# Environment (all optional):
#   STATEPACT_CHAOS_SEED          seed of the nemesis schedule and the clients (default: the time)
#   STATEPACT_CHAOS_CLIENTS       client processes per workload (default 3)
#   STATEPACT_CHAOS_REDIS_FSYNC   appendfsync of the Redis server: always (safe, default), everysec,
#                                 no; or none: no AOF at all (unsafe, to see the checker catch it)
#   STATEPACT_CHAOS_PG_FSYNC      fsync of the PostgreSQL server: on (the documented setting,
#                                 default) or off
#   STATEPACT_CHAOS_REDIS_PORT    default 56479;  STATEPACT_CHAOS_PG_PORT  default 55532
#                                 (the two relays listen on the next two ports)
#   STATEPACT_CHAOS_NEMESES       the faults to inject, comma-separated (default: all of
#                                 pause-client,kill-client,kill-server,kill-connections,net-latency,
#                                 net-drop,net-partition,clock-jump-server;
#                                 clock-jump-server is PostgreSQL only: libfaketime cannot start
#                                 inside redis-server, whose jemalloc reads the clock first;
#                                 memory runs have pause-client,kill-client,clock-jump-server,
#                                 net-latency,net-partition,lose-replies,late-replies)
#   STATEPACT_CHAOS_KEEP=1        keep the histories of a clean run too
#   STATEPACT_CHAOS_BUILD_DIR     a configured build tree to build the programs in (default build/chaos)
#   STATEPACT_CHAOS_CLIENT_WRAPPER  a command the workload clients run under, split at spaces, such
#                                 as "valgrind -q" (the test command runs one that crashes a client,
#                                 to check that a crash fails the run)
#
# Everything runs on loopback, in build/chaos-run; servers and clients it started are stopped on
# exit, also on Ctrl-C. Run as root (PostgreSQL is started through runuser).
set -Eeuo pipefail
trap 'echo "chaos.sh: line $LINENO failed: $BASH_COMMAND" >&2' ERR
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
if [ "$target" = all ]; then
  status=0
  for b in memory postgres redis; do
    rc=0
    bash "$0" "$b" "$duration" || rc=$?
    # An interrupted backend stops the whole run (the child exits 130 on Ctrl-C).
    [ $rc -ne 130 ] || exit 130
    [ $rc -eq 0 ] || status=1
  done
  exit $status
fi
backend=$target

seed=${STATEPACT_CHAOS_SEED:-$(date +%s)}
clients_per_workload=${STATEPACT_CHAOS_CLIENTS:-3}
pg_fsync=${STATEPACT_CHAOS_PG_FSYNC:-on}
case "$pg_fsync" in
  on | off) ;;
  *)
    echo "chaos.sh: STATEPACT_CHAOS_PG_FSYNC must be on or off, not '$pg_fsync'" >&2
    exit 2
    ;;
esac
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

all_nemeses=(pause-client kill-client kill-server kill-connections net-latency net-drop net-partition
  clock-jump-server)
default_nemeses=("${all_nemeses[@]}")
[ "$backend" = redis ] && default_nemeses=("${all_nemeses[@]/clock-jump-server/}")
IFS=, read -r -a nemeses <<<"${STATEPACT_CHAOS_NEMESES:-$(
  IFS=,
  echo "${default_nemeses[*]}"
)}"
nemeses=($(printf '%s\n' "${nemeses[@]}" | grep -v '^$'))
# The memory run's own nemeses are checked by the client program.
for n in "${nemeses[@]}"; do
  [ "$backend" != memory ] || break
  [[ " ${all_nemeses[*]} " == *" $n "* ]] || {
    echo "chaos.sh: unknown nemesis '$n' in STATEPACT_CHAOS_NEMESES (known: ${all_nemeses[*]})" >&2
    exit 2
  }
  if [ "$n" = clock-jump-server ] && [ "$backend" = redis ]; then
    echo "chaos.sh: clock-jump-server needs libfaketime in the server, which redis-server cannot" \
      "start with (its jemalloc reads the clock before libfaketime is ready)" >&2
    exit 2
  fi
done

ensure_packages "${STATEPACT_BUILD_PACKAGES[@]}" "${STATEPACT_BACKEND_PACKAGES[@]}" faketime

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
cmake --build "$build" -j 2 --target statepact_chaos_client statepact_chaos_check statepact_chaos_relay >/dev/null
client_bin="$build/tests/chaos/statepact_chaos_client"
check_bin="$build/tests/chaos/statepact_chaos_check"
relay_bin="$build/tests/chaos/statepact_chaos_relay"
libfaketime=$(dpkg -L libfaketime | grep '/libfaketime\.so\.1$' | head -n 1)

run_root="$STATEPACT_ROOT/build/chaos-run"
export STATEPACT_RUN_DIR="$run_root/$backend"
# One run per backend at a time: two runs would share one server and its keys, and each would see
# the other's writes as anomalies (or wipe its data).
mkdir -p "$run_root"
exec 9>"$run_root/$backend.lock"
if ! flock -n 9; then
  echo "chaos.sh: another chaos run of $backend is using $STATEPACT_RUN_DIR; wait for it to end" >&2
  exit 2
fi
history="$run_root/history-$backend-$(date +%Y%m%d-%H%M%S)-seed$seed"
mkdir -p "$history"
nemesis_file="$history/nemesis.jsonl"

harness_failures=0 # clients that crashed, final reads that failed
read -r -a client_wrapper <<<"${STATEPACT_CHAOS_CLIENT_WRAPPER:-}"

# Prints the checker's table; keeps the histories of a failed run. Exits non-zero when the checker
# found an anomaly or a malformed history, or when a client crashed or a final read failed.
check_and_exit() {
  echo "==> checking $(find "$history" -name '*.jsonl' | wc -l) history files ($(cat "$history"/*.jsonl |
    wc -l) lines), $(($(date +%s) - start_s))s"
  local checker=0 status
  "$check_bin" "$history"/*.jsonl || checker=$?
  status=$checker
  if [ "$harness_failures" -ne 0 ]; then
    echo "==> $backend: $harness_failures client exits or final reads failed" >&2
    [ $status -ne 0 ] || status=1
  fi
  if [ $status -eq 0 ] && [ "${STATEPACT_CHAOS_KEEP:-0}" != 1 ]; then
    rm -rf "$history"
    echo "==> $backend: no anomaly"
    exit 0
  fi
  if [ $checker -eq 0 ]; then
    echo "==> $backend: no anomaly$([ $status -eq 0 ] || echo ", but the run failed"); histories kept in $history"
  else
    echo "==> $backend: ANOMALIES or malformed history (checker status $checker); histories kept in $history"
  fi
  exit $status
}

if [ "$backend" = memory ]; then
  # Storage lives in the client process: one process runs every client on its own thread, and its
  # nemesis pauses and kills clients, steps the backend's clock, and slows, stalls and loses
  # replies on the clients' links (docs/reliability.md).
  start_s=$(date +%s)
  echo "==> memory: 5 workloads x $clients_per_workload clients for ${duration}s, seed $seed"
  memory_status=0
  memory_nemeses=()
  [ -z "${STATEPACT_CHAOS_NEMESES:-}" ] || memory_nemeses=(--nemeses "$STATEPACT_CHAOS_NEMESES")
  timeout $((duration + 180)) "${client_wrapper[@]}" "$client_bin" memory --dir "$history" \
    --duration "$duration" --seed "$seed" --clients "$clients_per_workload" "${memory_nemeses[@]}" \
    2>>"$history/clients.log" || memory_status=$?
  if [ $memory_status -ne 0 ]; then
    echo "==> memory: the client process exited with status $memory_status (see $history/clients.log)" >&2
    harness_failures=$((harness_failures + 1))
  fi
  check_and_exit
fi

# The server's clock: libfaketime reads this offset (seconds) at most a second after it changes; the
# clock-jump-server nemesis steps it forward (leases expire early) or back (an NTP step: storage's
# clock reads an earlier time again).
# CLOCK_MONOTONIC stays real everywhere: the history's order is measured on it.
server_clock="$history/server-clock"
server_offset=0
echo "+0" >"$server_clock"
server_env=()
[ "$backend" = postgres ] && server_env=(LD_PRELOAD="$libfaketime" FAKETIME_TIMESTAMP_FILE="$server_clock"
  FAKETIME_CACHE_DURATION=1 FAKETIME_DONT_FAKE_MONOTONIC=1 STATEPACT_PG_FSYNC="$pg_fsync")

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
relay_pid=()
next_client=1
stopping=0

cleanup() {
  stopping=1
  local id
  for id in "${!client_pid[@]}"; do
    kill -CONT "${client_pid[$id]}" 2>/dev/null || true
    kill -KILL "${client_pid[$id]}" 2>/dev/null || true
  done
  for pid in "${relay_pid[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "${backend}_stop" || true
}
trap cleanup EXIT
trap 'echo "chaos.sh: interrupted" >&2; exit 130' INT TERM

# Fresh server data: a previous run's entries would look like writes nobody made.
"${backend}_stop" || true
rm -rf "${STATEPACT_RUN_DIR:?}/redis" "${STATEPACT_RUN_DIR:?}/postgres"
# PostgreSQL is started by pg_ctl, which passes its environment on to the server.
server_start() { env "${server_env[@]}" bash -c "source '$STATEPACT_ROOT/scripts/servers/$backend.sh'; ${backend}_start" >/dev/null; }
server_port=$([ "$backend" = redis ] && echo "$STATEPACT_REDIS_PORT" || echo "$STATEPACT_PG_PORT")
echo "==> starting $backend (port $server_port)"
server_start
"${backend}_start" >/dev/null # exports the URL here (the server is up: it only checks)
if [ "$backend" = redis ]; then
  url=$STATEPACT_TEST_REDIS_URL
else
  url=$STATEPACT_TEST_POSTGRES_URL
fi
# Loopback only, judged by the URL's host (not by text anywhere in it, such as a password); the
# client program holds the rule.
if ! "$client_bin" loopback-url "$url"; then
  echo "chaos.sh: refusing a server URL whose host is not a loopback address" >&2
  exit 2
fi

# Two relays, each carrying half of the clients, so a network fault can cut off some clients while
# the others go on (and take over their leases).
relay_url=()
for r in 0 1; do
  port=$((server_port + 1 + r))
  echo "normal 0 0" >"$history/relay-$r.control"
  "$relay_bin" --listen "$port" --to "$server_port" --control "$history/relay-$r.control" \
    2>>"$history/clients.log" &
  relay_pid[$r]=$!
  relay_url[$r]=${url/:$server_port\//:$port\/}
done
relay_state=("normal 0 0" "normal 0 0")
relay_drops=(0 0)
set_relay() { # relay mode latency_ms [drop]
  local r=$1
  [ "${4:-}" = drop ] && relay_drops[$r]=$((relay_drops[$r] + 1))
  relay_state[$r]="$2 $3 ${relay_drops[$r]}"
  echo "${relay_state[$r]}" >"$history/relay-$r.control.tmp"
  mv "$history/relay-$r.control.tmp" "$history/relay-$r.control"
}

now_s() { date +%s; }
start_s=$(now_s)
end_s=$((start_s + duration))

workloads=(fenced-log bank list-append increments holds)
resources_of() { # workload -> resources
  case $1 in fenced-log) echo 3 ;; bank) echo 3 ;; list-append) echo 3 ;; increments) echo 1 ;; holds) echo 2 ;; esac
}
keys_of() {
  case $1 in bank) echo 8 ;; list-append) echo 6 ;; *) echo 1 ;; esac
}

start_client() { # workload
  local w=$1 id=$next_client remaining
  next_client=$((next_client + 1))
  remaining=$((end_s - $(now_s)))
  [ "$remaining" -ge 1 ] || return 0
  "${client_wrapper[@]}" "$client_bin" --backend "$backend" --url "${relay_url[$((id % 2))]}" \
    --workload "$w" --client "$id" --duration "$remaining" --seed "$seed" --resources "$(resources_of "$w")" \
    --keys "$(keys_of "$w")" --history "$history/client-$id.jsonl" 2>>"$history/clients.log" &
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
  local kind id pid ms n r mode
  kind=${nemeses[$((RANDOM % ${#nemeses[@]}))]}
  case $kind in
    pause-client)
      id=$(random_client) || return 0
      pid=${client_pid[$id]}
      ms=$((600 + RANDOM % 1400)) # past every lease ttl (at most 500 ms)
      log_fault "$kind" start "{\"client\": $id, \"ms\": $ms}"
      kill -STOP "$pid" 2>/dev/null || true
      sleep_ms $ms
      kill -CONT "$pid" 2>/dev/null || true
      log_fault "$kind" end
      ;;
    kill-client)
      id=$(random_client) || return 0
      log_fault "$kind" start "{\"client\": $id}"
      kill -KILL "${client_pid[$id]}" 2>/dev/null || true
      wait "${client_pid[$id]}" 2>/dev/null || true
      unset "client_pid[$id]"
      start_client "${client_workload[$id]}"
      log_fault "$kind" end
      ;;
    kill-server)
      ms=$((RANDOM % 1000))
      log_fault "$kind" start "{\"down_ms\": $ms}"
      server_kill
      sleep_ms $ms
      server_start
      log_fault "$kind" end
      ;;
    kill-connections)
      log_fault "$kind" start
      n=$(kill_connections)
      log_fault "$kind" end "{\"killed\": ${n:-0}}"
      ;;
    net-latency)
      r=$((RANDOM % 2)) n=$((20 + RANDOM % 400)) ms=$((500 + RANDOM % 2500))
      log_fault "$kind" start "{\"relay\": $r, \"latency_ms\": $n, \"ms\": $ms}"
      set_relay $r normal $n
      sleep_ms $ms
      set_relay $r normal 0
      log_fault "$kind" end
      ;;
    net-drop)
      r=$((RANDOM % 2))
      log_fault "$kind" start "{\"relay\": $r}"
      set_relay $r normal 0 drop
      sleep_ms 50
      log_fault "$kind" end
      ;;
    net-partition)
      r=$((RANDOM % 2)) ms=$((300 + RANDOM % 2700))
      mode=$(echo partition-up partition-down partition-both | cut -d' ' -f$((1 + RANDOM % 3)))
      log_fault "$kind" start "{\"relay\": $r, \"mode\": \"$mode\", \"ms\": $ms}"
      set_relay $r "$mode" 0
      sleep_ms $ms
      set_relay $r normal 0
      log_fault "$kind" end
      ;;
    clock-jump-server)
      # 1-5 s, past every fenced-log ttl, forward or back: forward, leases expire early and stale
      # writers must still fail; back, storage's clock reads earlier times again, and a token must
      # still never be issued twice nor a live lease taken.
      n=$((1 + RANDOM % 5))
      [ $((RANDOM % 2)) -eq 0 ] || n=$((-n))
      server_offset=$((server_offset + n))
      log_fault "$kind" start "{\"seconds\": $n, \"offset\": $server_offset}"
      if [ "$server_offset" -lt 0 ]; then
        echo "$server_offset" >"$server_clock.tmp"
      else
        echo "+$server_offset" >"$server_clock.tmp"
      fi
      mv "$server_clock.tmp" "$server_clock"
      sleep_ms 1100 # libfaketime rereads the offset within a second
      log_fault "$kind" end
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
# A client that ended by itself with a non-zero status crashed or met an error it does not record
# (an exception from outside the library, a bad argument): the run fails, whatever the histories
# say. A nemesis's own kills are not counted: those clients left client_pid when they were killed.
grace_end=$(($(now_s) + 20))
for id in "${!client_pid[@]}"; do
  pid=${client_pid[$id]}
  while kill -0 "$pid" 2>/dev/null && [ "$(now_s)" -lt "$grace_end" ]; do sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -CONT "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  else
    client_status=0
    wait "$pid" 2>/dev/null || client_status=$?
    if [ "$client_status" -ne 0 ]; then
      echo "==> $backend: client $id (${client_workload[$id]}) exited with status $client_status" \
        "(see $history/clients.log)" >&2
      harness_failures=$((harness_failures + 1))
    fi
  fi
  unset "client_pid[$id]"
done

echo "==> final reads"
server_start # idempotent: makes sure the server answers
final_id=900000
for w in "${workloads[@]}"; do
  [ "$w" != holds ] || continue # its checks need no final state
  timeout 120 "$client_bin" --backend "$backend" --url "$url" --workload "$w" --client $final_id \
    --seed "$seed" --resources "$(resources_of "$w")" --keys "$(keys_of "$w")" \
    --history "$history/final-$w.jsonl" --final 2>>"$history/clients.log" || {
    # Without the final state the checker cannot look for lost or repeated writes.
    echo "==> $backend: the final read of $w failed (see $history/clients.log)" >&2
    harness_failures=$((harness_failures + 1))
  }
  final_id=$((final_id + 1))
done

check_and_exit
