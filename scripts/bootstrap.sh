#!/usr/bin/env bash
# Installs every Debian 12 package eventfold needs to build, test, benchmark
# and fuzz. Idempotent: checks each package with dpkg-query and installs only
# the missing ones (running `apt-get update` first only in that case).
# Meant to run as root (as CI does); falls back to sudo otherwise.
set -euo pipefail

packages=(
  build-essential
  cmake
  ninja-build
  pkg-config
  git
  libleveldb-dev
  libsnappy-dev  # leveldb::leveldb links -lsnappy; libleveldb-dev lacks the dependency
  libflatbuffers-dev
  flatbuffers-compiler
  libsimdjson-dev
  libssl-dev
  openssl
  libgtest-dev
  libgmock-dev
  googletest
  libbenchmark-dev
  libcli11-dev
  libxxhash-dev  # XXH3 (header only, inlined): the recent bodies' table (store/recent_events.cc)
  libboost-dev  # Boost.Beast and Asio: the HTTP front end (http/)
  libh2o-evloop-dev  # the h2o prototype the HTTP front end was measured against (bench/http/)
  libcpp-httplib-dev  # the simulated sender and the serve e2e tests' client
  curl
  wrk
  libsqlite3-dev  # the SQLite pattern baseline of eventfold-bench
  sqlite3
  libpq-dev  # the PostgreSQL pattern baseline of eventfold-bench (libpq)
  postgresql  # its private server (initdb, postgres); the bench skips it when absent
  clang
  clang-format  # scripts/check_format.sh
  libclang-rt-14-dev
  nats-server   # cluster mode's tests start a 3-node JetStream cluster
  libnats-dev   # cluster mode (eventfold_cluster): the nats.c client
)

missing=()
for pkg in "${packages[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
  # "install ok installed" or "hold ok installed"; not "... not-installed".
  case "$status" in
    *" ok installed") ;;
    *) missing+=("$pkg") ;;
  esac
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "bootstrap: all ${#packages[@]} packages present"
  exit 0
fi

echo "bootstrap: installing ${#missing[@]} missing packages: ${missing[*]}"

if ! command -v apt-get >/dev/null 2>&1; then
  echo "bootstrap: apt-get not found; eventfold builds on Debian 12." >&2
  echo "bootstrap: install these packages by hand: ${missing[*]}" >&2
  exit 1
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "bootstrap: not root and sudo is not available; as root, run:" >&2
    echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

log="$(mktemp "${TMPDIR:-/tmp}/eventfold-bootstrap.XXXXXX")"
trap 'rm -f "$log"' EXIT

run_apt() {
  if ! "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
      apt-get -o DPkg::Lock::Timeout=300 "$@" >>"$log" 2>&1; then
    echo "bootstrap: 'apt-get $*' failed; its last output:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
}

run_apt update -q
run_apt install -y -q --no-install-recommends "${missing[@]}"

echo "bootstrap: installed ${missing[*]}"
