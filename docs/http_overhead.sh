#!/usr/bin/env bash
# What the operator's view costs the writer: `agentlog bench clients`
# without and with it, alternated ROUNDS times, in one run:
#   plain   the daemon as `bench clients` starts it
#   scrape  the same daemon with `--http`, /metrics scraped every second
#   page    the same, plus the live page open in headless chromium for the
#           whole run (chromium started SETTLE seconds before, default 6)
# Usage: docs/http_overhead.sh [agentlog] [ROUNDS] [extra bench clients args…]
# Prints one JSON line per run: mode, ops/s, p50/p99 µs, refused.
set -euo pipefail
bin="${1:-target/release/agentlog}"; rounds="${2:-2}"; shift 2 || true
args=(--procs 8 --agents 1000 --seconds 5 "$@")
tmp="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
summary() { # $1: mode, stdin: the bench's JSON
  python3 -c 'import json,sys; d=json.load(sys.stdin)["main"]; l=d["latency"]
print(json.dumps({"mode": sys.argv[1], "ops_per_s": round(d["ops_per_s"]), "p50_us": l["p50_us"], "p99_us": l["p99_us"], "refused": d["refused"]}))' "$1"
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
run() { # $1: plain|scrape|page
  if [ "$1" = plain ]; then
    "$bin" --json bench clients "${args[@]}" | summary plain
    return
  fi
  local port; port="$(free_port)"; local url="http://127.0.0.1:$port/"
  browser=
  if [ "$1" = page ]; then
    # The browser is started first and given time to settle: what is
    # measured is an open page, not chromium starting up. The page retries
    # until the daemon answers (within a second of it starting).
    chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
      --disable-background-networking --disable-component-update --disable-sync \
      --user-data-dir="$tmp/profile-$RANDOM" "$url" >/dev/null 2>&1 &
    browser=$!; pids+=("$browser")
    sleep "${SETTLE:-6}"
  fi
  "$bin" --json bench clients "${args[@]}" --http "127.0.0.1:$port" >"$tmp/page.json" &
  local bench=$!
  until curl -sf "${url}healthz" >/dev/null; do sleep 0.02; done
  ( while true; do curl -s "${url}metrics" >/dev/null; sleep 1; done ) &
  local scraper=$!; pids+=("$scraper")
  local watched=0
  while kill -0 "$bench" 2>/dev/null; do
    curl -s "${url}metrics" | grep -q '^agentlog_watchers 1' && watched=1
    sleep 0.5
  done
  wait "$bench"
  kill "$scraper" ${browser:+"$browser"} 2>/dev/null || true
  if [ "$1" = page ] && [ "$watched" != 1 ]; then
    echo "the page never opened its watch stream" >&2; exit 1
  fi
  summary "$1" <"$tmp/page.json"
}
for _ in $(seq 1 "$rounds"); do run plain; run scrape; run page; done
