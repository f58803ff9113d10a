#!/usr/bin/env bash
# Makes docs/live_page.png: a small demo fleet on a daemon with --http, and
# a headless chromium screenshot of its live page (through chromedriver, so
# the page's live requests have finished: docs/webdriver_screenshot.py).
# Usage: docs/live_page.sh [path/to/agentlog] (default: target/release/agentlog)
set -euo pipefail
bin="${1:-target/release/agentlog}"
out="$(cd "$(dirname "$0")" && pwd)/live_page.png"
tmp="$(mktemp -d)"
trap 'kill "$daemon" "${beats:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
dir="$tmp/store"
"$bin" --dir "$dir" init >/dev/null
"$bin" --dir "$dir" serve --http 127.0.0.1:0 >"$tmp/serve.out" &
daemon=$!
until grep -q '^agentlog serve: http://' "$tmp/serve.out"; do sleep 0.1; done
url="$(sed -n 's/^agentlog serve: \(http:[^ ]*\).*/\1/p' "$tmp/serve.out")"
a() { "$bin" --dir "$dir" "$@" >/dev/null; }
a register planner --provider claude --cwd /src/app
a register coder-1 --provider claude --cwd /src/app --parent planner
a register coder-2 --provider codex --cwd /src/app --parent planner
a register reviewer --provider gemini --cwd /src/app
a register docs-writer --provider claude --cwd /src/docs
a register '<script>alert(1)</script>' --provider codex --cwd /tmp
a register flaky --provider codex --cwd /src/app
a status planner busy --message "splitting issue #42 into tasks"
a status coder-1 busy --message "implementing the parser"
a status coder-2 idle --message "waiting for review"
a status reviewer busy --message "reviewing PR 17"
a status flaky failed --message "exited 137 (OOM)"
a status docs-writer ready
# A steady trickle of heartbeats for the chart.
( for i in $(seq 1 400); do
    for n in planner coder-1 coder-2 reviewer docs-writer; do a heartbeat "$n"; done
  done ) &
beats=$!
sleep 8
a status coder-1 busy --message "running the test suite"
python3 "$(dirname "$0")/webdriver_screenshot.py" "$url" "$out" 4
echo "wrote $out"
