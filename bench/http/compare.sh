#!/usr/bin/env bash
# Signed HTTP at 64 connections under wrk: `eventfold serve` (Boost.Beast)
# against eventfold-h2o-proto, each on a fresh durable store, same requests.
#   bench/http/compare.sh BUILD_DIR [SECONDS]
set -euo pipefail
build="${1:?build dir}"
seconds="${2:-10}"
here="$(cd "$(dirname "$0")" && pwd)"
secret="bench_secret_0123456789abcdef"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

run() {  # name, command...
  local name="$1"; shift
  local data="$scratch/$name-data" log="$scratch/$name.log"
  "$@" --data "$data" >/dev/null 2>"$log" &
  local pid=$!
  local port=""
  for _ in $(seq 1 200); do
    port="$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$log" | head -1)"
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || { echo "$name did not start: $(cat "$log")"; kill "$pid"; return 1; }
  python3 "$here/signed_requests.py" --dir "$scratch/req-$name" --secret "$secret" --port "$port"
  local out
  out="$(wrk -t2 -c64 -d"${seconds}s" --timeout 10s -s "$scratch/req-$name/send.lua" \
    "http://127.0.0.1:$port/webhooks" | grep RESULT)"
  local rss
  rss="$(awk '/VmHWM/ {print $2}' /proc/$pid/status)"
  kill -TERM "$pid"; wait "$pid" || true
  echo "$name: $out peak_rss_kib=$rss"
}

run beast "$build/tools/eventfold" serve --listen 127.0.0.1:0 --secret "$secret"
run h2o "$build/bench/eventfold-h2o-proto" --secret "$secret"
