#!/usr/bin/env bash
# The main job: installs what it needs, builds, and runs the fencing demo on the memory backend.
set -euo pipefail
STATEPACT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$STATEPACT_ROOT/scripts/lib/packages.sh"

ensure_packages "${STATEPACT_BUILD_PACKAGES[@]}"
dir="$STATEPACT_ROOT/build/demo"
if [ ! -f "$dir/build.ninja" ]; then
  cmake -S "$STATEPACT_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSTATEPACT_BUILD_TESTS=OFF -DSTATEPACT_BUILD_BENCH=OFF \
    -DSTATEPACT_WITH_POSTGRES=OFF -DSTATEPACT_WITH_REDIS=OFF \
    $(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache) >/dev/null
fi
cmake --build "$dir" --target statepact_demo -j "$(nproc)" >/dev/null
exec "$dir/examples/statepact_demo" "$@"
