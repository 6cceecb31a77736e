#!/usr/bin/env bash
# Checks that scripts/chaos.sh fails a run whose client crashed, even when the history it left
# holds no anomaly: every client of a short Redis run is crashed by tests/chaos/crash_client.sh.
#
#   bash tests/chaos/crash_check.sh      (STATEPACT_CHAOS_BUILD_DIR as for chaos.sh)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
STATEPACT_CHAOS_CLIENT_WRAPPER="bash $root/tests/chaos/crash_client.sh" STATEPACT_CHAOS_CLIENTS=1 \
  STATEPACT_CHAOS_NEMESES=net-latency STATEPACT_CHAOS_SEED=1 \
  bash "$root/scripts/chaos.sh" redis 5 >"$out" 2>&1
status=$?
fail() {
  cat "$out"
  echo "crash_check: $1" >&2
  exit 1
}
[ $status -ne 0 ] || fail "chaos.sh passed a run whose clients crashed"
grep -q 'exited with status 139' "$out" || fail "chaos.sh did not name the crashed client"
grep -q 'no anomaly, but the run failed' "$out" || fail "the crash was not the (only) reason the run failed"
rm -rf "$(grep -o 'histories kept in .*' "$out" | head -n 1 | sed 's/^histories kept in //')"
echo "crash_check: a crashed client fails the run (status $status)"
