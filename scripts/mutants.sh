#!/usr/bin/env bash
# Breaks one safety rule at a time on purpose and reports which tests and which fault-harness
# checker rules notice. Each mutant is a one-line change to a copy of the source tree (the memory
# backend, its lease rules, or hold()'s renewal); the unit tests and the memory conformance suite
# run against it, then `scripts/chaos.sh memory SECONDS` once per seed. A mutant that nothing
# catches, or a baseline (unmutated) run that fails, makes the script exit non-zero.
#
#   bash scripts/mutants.sh [SECONDS] [SEED...]     (default: 30 seconds, seeds 1 2 3)
#
# Environment: STATEPACT_MUTANTS=name,name runs only those mutants (names: see the table below);
# STATEPACT_MUTANTS_SKIP_CHAOS=1 runs the suites only. Too slow for every CI run (one rebuild of
# the memory tests per mutant); docs/reliability.md shows its last table.
# Work happens in build/mutants (a copy of the tree, its build, and the logs).
set -Eeuo pipefail
STATEPACT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$STATEPACT_ROOT/scripts/lib/packages.sh"

seconds=${1:-30}
shift || true
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3)

work="$STATEPACT_ROOT/build/mutants"
tree="$work/tree"
build="$work/build"
logs="$work/logs"
mkdir -p "$work" "$logs"

# name | file | text to find (exactly once) | what replaces it
mutants=(
  "fence-skipped|include/statepact/backends/memory.hpp|if (detail::check_fence(high_water, f.token) != detail::FenceVerdict::ok)|if (detail::check_fence(high_water, f.token) == detail::FenceVerdict::never_issued)"
  "token-reissued|include/statepact/detail/lease_rules.hpp|state.current = LeaseRecord{owner, state.high_water + 1, now + ttl, ttl};|state.current = LeaseRecord{owner, state.current ? state.current->token : state.high_water + 1, now + ttl, ttl};"
  "read-checks-skipped|include/statepact/backends/memory.hpp|if (found != c.expected_version)|if (false \&\& found != c.expected_version)"
  "replay-applied-again|include/statepact/backends/memory.hpp|if (!result.replayed) {|if (true) {"
  "live-lease-taken|include/statepact/detail/lease_rules.hpp|if (state.current->owner != owner)|if (false \&\& state.current->owner != owner)"
  "renew-at-0.9-ttl|include/statepact/detail/hold_deadline.hpp|return ttl / 3;|return ttl * 9 / 10;"
)

selected() {
  [ -z "${STATEPACT_MUTANTS:-}" ] && return 0
  [[ ",$STATEPACT_MUTANTS," == *",$1,"* ]]
}

# A fresh copy of the tree as it is now (tracked and untracked files, not ignored ones).
rm -rf "$tree"
mkdir -p "$tree"
(cd "$STATEPACT_ROOT" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) |
  tar -xf - -C "$tree"

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$tree" -B "$build" -G Ninja "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSTATEPACT_BUILD_BENCH=OFF -DSTATEPACT_PACKAGING_TESTS=OFF -DSTATEPACT_HEADER_CHECKS=OFF \
  -DSTATEPACT_SOURCE_CHECKS=OFF >"$logs/configure.log"
targets=(statepact_unit statepact_conformance_memory statepact_chaos_client statepact_chaos_check
  statepact_chaos_relay)

# Builds and runs everything on the tree as it is; prints "tests: ..." and "rules: ..." lines.
run_all() {
  local name=$1
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >"$logs/$name.build.log" 2>&1 || {
    echo "tests: BUILD FAILED (see $logs/$name.build.log)"
    echo "rules: -"
    return
  }
  local failed
  (cd "$build" && ctest -R '^(unit|memory): ' -j 2 --timeout 300 >"$logs/$name.ctest.log" 2>&1) || true
  failed=$(sed -n '/The following tests FAILED:/,$p' "$logs/$name.ctest.log" |
    sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (\(Failed\|Timeout\|SEGFAULT\|Subprocess aborted\|Exception\)).*$/\1/p' |
    paste -sd ';' -)
  echo "tests: ${failed:-none}"
  if [ -n "${STATEPACT_MUTANTS_SKIP_CHAOS:-}" ]; then
    echo "rules: (not run)"
    return
  fi
  local rules="" seed
  for seed in "${seeds[@]}"; do
    local out="$logs/$name.chaos-$seed.log"
    local rc=0
    STATEPACT_CHAOS_SEED=$seed STATEPACT_CHAOS_BUILD_DIR="$build" \
      bash "$tree/scripts/chaos.sh" memory "$seconds" >"$out" 2>&1 || rc=$?
    # The checker's table: "anomaly  found", then one "kind  count" line per anomaly kind. A run
    # that failed without naming one (a client died, a final read gave up) counts as caught too.
    local kinds
    kinds=$(awk '/^anomaly[[:space:]]+found/ {t=1; next} t && NF==0 {t=0} t && $1 != "(none)" {print $1}' "$out" |
      sort -u | paste -sd ',' -)
    [ $rc -eq 0 ] || [ -n "$kinds" ] || kinds="run-failed"
    rules="$rules seed $seed: ${kinds:-none};"
  done
  echo "rules:$rules"
}

# Whether a "rules:" line names any anomaly (or a failed run) for some seed.
harness_caught() {
  grep -Eq ": [a-z][a-z,-]*;" <<<"$(sed 's/: none;//g' <<<"$1")"
}

status=0
echo "==> baseline (no mutant)"
baseline=$(run_all baseline)
echo "$baseline"
if ! grep -q "^tests: none$" <<<"$baseline" || harness_caught "$(grep '^rules' <<<"$baseline")"; then
  echo "mutants.sh: the unmutated tree already fails; fix that first" >&2
  exit 1
fi

table="| mutant | failing tests (unit, memory conformance) | harness anomalies per seed |\n|---|---|---|\n"
for m in "${mutants[@]}"; do
  IFS='|' read -r name file from to <<<"$m"
  selected "$name" || continue
  echo "==> mutant $name ($file)"
  cp "$STATEPACT_ROOT/$file" "$tree/$file"
  python3 - "$tree/$file" "$from" "$to" <<'EOF'
import sys
path, old, new = sys.argv[1], sys.argv[2].replace("\\&", "&"), sys.argv[3].replace("\\&", "&")
text = open(path).read()
if text.count(old) != 1:
    sys.exit(f"mutant no longer applies: {old!r} occurs {text.count(old)} times in {path}")
open(path, "w").write(text.replace(old, new))
EOF
  result=$(run_all "$name")
  cp "$STATEPACT_ROOT/$file" "$tree/$file"
  echo "$result"
  tests=$(sed -n 's/^tests: //p' <<<"$result")
  rules=$(sed -n 's/^rules: *//p' <<<"$result")
  table="$table| $name | ${tests//;/; } | $rules |\n"
  if [ "$tests" = "none" ]; then
    echo "mutants.sh: no test caught $name" >&2
    status=1
  fi
  if [ -z "${STATEPACT_MUTANTS_SKIP_CHAOS:-}" ] && ! harness_caught "$rules"; then
    echo "mutants.sh: the fault harness did not catch $name" >&2
    status=1
  fi
done
echo
printf "%b" "$table"
exit $status
