#!/usr/bin/env bash
# Instructions per one-key commit cycle on the memory backend with no observer, a no-op observer
# and the Prometheus observer, counted by callgrind in one run, with each row's ratio to "none".
# Usage: bench/observer_cost.sh BUILD_DIR   (a Release or RelWithDebInfo tree; needs valgrind)
set -euo pipefail
bin=${1:?usage: observer_cost.sh BUILD_DIR}/bench/statepact_bench_observer
command -v valgrind >/dev/null || { echo "observer_cost.sh needs valgrind" >&2; exit 2; }
[ -x "$bin" ] || { echo "no $bin: build the bench target first" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
short=1000
long=5000
instructions() {  # mode cycles -> total instructions of the run
  valgrind --tool=callgrind --callgrind-out-file="$out/cg" "$bin" "$1" "$2" 2>"$out/log" >/dev/null
  grep -m1 '^summary:' "$out/cg" | awk '{print $2}'
}
modes=(none noop)
"$bin" prometheus 1 >/dev/null 2>&1 && modes+=(prometheus)
printf '| observer | instructions per cycle | ratio to none |\n|---|---|---|\n'
base=
for m in "${modes[@]}"; do
  a=$(instructions "$m" $short)
  b=$(instructions "$m" $long)
  per=$(((b - a) / (long - short)))
  [ -n "$base" ] || base=$per
  printf '| %s | %d | %s |\n' "$m" "$per" "$(awk -v p="$per" -v b="$base" 'BEGIN{printf "%.3f", p/b}')"
done
