#!/usr/bin/env bash
# Heartbeats/s through the daemon, and the daemon's CPU per heartbeat,
# without and with the operator's view, alternated ROUNDS times:
#   plain   `serve`
#   scrape  `serve --http`, /metrics scraped every second
#   page    `serve --http`, /metrics scraped every second and the live page
#           open in headless chromium (its watch stream counted in /metrics)
# Usage: docs/http_overhead_cpu.sh [agentlog] [K in flight] [N heartbeats] [ROUNDS]
set -euo pipefail
bin="${1:-target/release/agentlog}"; k="${2:-64}"; n="${3:-300000}"; rounds="${4:-3}"
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime
run() { # $1: plain|scrape|page
  local dir="$tmp/$1-$RANDOM"
  "$bin" --dir "$dir" init >/dev/null
  local extra=(); [ "$1" != plain ] && extra=(--http 127.0.0.1:0)
  "$bin" --dir "$dir" serve "${extra[@]}" >"$dir.out" 2>&1 &
  local daemon=$!; pids+=("$daemon")
  until grep -q 'listening on' "$dir.out" 2>/dev/null; do sleep 0.05; done
  local extras=()
  if [ "$1" != plain ]; then
    until grep -q '^agentlog serve: http://' "$dir.out"; do sleep 0.05; done
    local url; url="$(sed -n 's/^agentlog serve: \(http:[^ ]*\).*/\1/p' "$dir.out")"
    ( while true; do curl -s "${url}metrics" >/dev/null; sleep 1; done ) &
    extras+=($!); pids+=($!)
    if [ "$1" = page ]; then
      chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$dir.profile" "$url" >/dev/null 2>&1 &
      extras+=($!); pids+=($!)
      until curl -s "${url}metrics" | grep -q '^agentlog_watchers 1'; do sleep 0.1; done
      sleep 3 # let the browser finish starting
    fi
  fi
  local t0; t0=$(ticks "$daemon")
  local line; line=$(python3 "$here/daemon_heartbeats.py" "$dir" "$k" "$n")
  local t1; t1=$(ticks "$daemon")
  local tck; tck=$(getconf CLK_TCK)
  printf '%-6s %s; daemon CPU %.2f us/heartbeat\n' "$1" "$line" \
    "$(echo "($t1 - $t0) * 1000000 / $tck / $n" | bc -l)"
  for p in "${extras[@]}" "$daemon"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
}
for _ in $(seq 1 "$rounds"); do run plain; run scrape; run page; done
