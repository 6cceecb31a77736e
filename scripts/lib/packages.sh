# Installs Debian packages that are missing; does nothing (and asks no mirror) when all are there.
# Usage: ensure_packages pkg...
ensure_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "==> installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# What building the library, its demo and its tests needs.
STATEPACT_BUILD_PACKAGES=(g++ cmake ninja-build ccache pkg-config libasio-dev libfmt-dev
  nlohmann-json3-dev catch2)
STATEPACT_BACKEND_PACKAGES=(libpqxx-dev libhiredis-dev postgresql redis-server libcli11-dev)
# Optional integrations the test command builds and tests: statepact::prometheus and its example.
STATEPACT_OPTIONAL_PACKAGES=(prometheus-cpp-dev)
# What only the test command needs: the source checks run Doxygen and luacheck.
STATEPACT_TEST_PACKAGES=(doxygen lua-check)

# Configures and builds a build tree. Usage: build_tree DIR [cmake args...]
build_tree() {
  local dir=$1
  shift
  local launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Configure every time (seconds when nothing changed), so changed options reach old build trees.
  cmake -S "$STATEPACT_ROOT" -B "$dir" -G Ninja "${launcher[@]}" "$@" >/dev/null
  cmake --build "$dir" -j "$(nproc)"
}
