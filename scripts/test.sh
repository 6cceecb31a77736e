#!/usr/bin/env bash
# Every test: installs what it needs, builds a normal and an AddressSanitizer+UBSan configuration,
# starts a private PostgreSQL, Redis and Redis Cluster (scripts/servers/), runs all tests of both
# through ctest, stops the servers, and runs a short fault-injection check on the normal build.
# Exits non-zero on any failure. Run as root (PostgreSQL is started through runuser).
set -euo pipefail
STATEPACT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$STATEPACT_ROOT/scripts/lib/packages.sh"

ensure_packages "${STATEPACT_BUILD_PACKAGES[@]}" "${STATEPACT_BACKEND_PACKAGES[@]}" \
  "${STATEPACT_OPTIONAL_PACKAGES[@]}" "${STATEPACT_TEST_PACKAGES[@]}"

export STATEPACT_RUN_DIR="$STATEPACT_ROOT/build/run"
mkdir -p "$STATEPACT_RUN_DIR"
servers=()
for s in "$STATEPACT_ROOT"/scripts/servers/*.sh; do
  [ -f "$s" ] || continue
  source "$s"
  servers+=("$(basename "$s" .sh)")
done
stop_servers() {
  for s in "${servers[@]}"; do "${s}_stop" || true; done
}
trap stop_servers EXIT
for s in "${servers[@]}"; do
  echo "==> starting $s"
  "${s}_start"
done

status=0
run_config() {
  local name=$1
  shift
  echo "==> building $name"
  build_tree "$STATEPACT_ROOT/build/test-$name" "$@"
  echo "==> testing $name"
  (cd "$STATEPACT_ROOT/build/test-$name" && ctest --output-on-failure -j 2 --timeout 600) || status=1
}
run_config normal -DCMAKE_BUILD_TYPE=RelWithDebInfo
# A short fault-injection run per backend on the normal build (every nemesis that applies), then
# the history checker (scripts/chaos.sh; docs/reliability.md has the long runs).
echo "==> fault injection (short)"
STATEPACT_CHAOS_BUILD_DIR="$STATEPACT_ROOT/build/test-normal" \
  bash "$STATEPACT_ROOT/scripts/chaos.sh" all 60 || status=1
# The harness itself: a client that crashes must fail a run whose history is clean.
STATEPACT_CHAOS_BUILD_DIR="$STATEPACT_ROOT/build/test-normal" \
  bash "$STATEPACT_ROOT/tests/chaos/crash_check.sh" || status=1
run_config asan -DCMAKE_BUILD_TYPE=Debug -DSTATEPACT_BUILD_BENCH=OFF \
  "-DCMAKE_CXX_FLAGS=-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
  -DSTATEPACT_PACKAGING_TESTS=OFF -DSTATEPACT_HEADER_CHECKS=OFF -DSTATEPACT_SOURCE_CHECKS=OFF \
  -DSTATEPACT_BUILD_CHAOS=OFF

if [ $status -eq 0 ]; then echo "==> all tests passed (normal and asan)"; else echo "==> TESTS FAILED"; fi
exit $status
