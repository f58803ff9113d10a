#!/usr/bin/env bash
# Heartbeats/s through the daemon without and with the operator's view:
# `serve` alone, then `serve --http` with the live page open in headless
# chromium and /metrics scraped every second; alternated ROUNDS times.
# Usage: docs/http_overhead.sh [agentlog] [K in flight] [N heartbeats] [ROUNDS]
set -euo pipefail
bin="${1:-target/release/agentlog}"; k="${2:-64}"; n="${3:-300000}"; rounds="${4:-3}"
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
run() { # $1: plain|http
  local dir="$tmp/$1-$RANDOM"
  "$bin" --dir "$dir" init >/dev/null
  local extra=() ; [ "$1" = http ] && extra=(--http 127.0.0.1:0)
  "$bin" --dir "$dir" serve "${extra[@]}" >"$dir.out" 2>&1 &
  local daemon=$!; pids+=("$daemon")
  until grep -q 'listening on' "$dir.out" 2>/dev/null; do sleep 0.05; done
  local extras=()
  if [ "$1" = http ]; then
    until grep -q '^agentlog serve: http://' "$dir.out"; do sleep 0.05; done
    local url; url="$(sed -n 's/^agentlog serve: \(http:[^ ]*\).*/\1/p' "$dir.out")"
    chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
      --disable-background-networking --disable-component-update --disable-sync \
      --user-data-dir="$dir.profile" "$url" >/dev/null 2>&1 &
    extras+=($!); pids+=($!)
    ( while true; do curl -s "${url}metrics" >/dev/null; sleep 1; done ) &
    extras+=($!); pids+=($!)
    # The page is open once its watch stream counts.
    until curl -s "${url}metrics" | grep -q '^agentlog_watchers 1'; do sleep 0.1; done
  fi
  printf '%-5s ' "$1"; python3 "$here/daemon_heartbeats.py" "$dir" "$k" "$n"
  for p in "${extras[@]}" "$daemon"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
}
for _ in $(seq 1 "$rounds"); do run plain; run http; done
