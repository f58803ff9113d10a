#!/usr/bin/env bash
# The browser's own CPU with the live page open: a daemon with N agents
# registered, heartbeating (each agent every ~50 ms, from one pipelined
# Python client) when HB=1, or quiet when HB=0; headless chromium on the
# page, given 6 s to load; then chromium's CPU (all its processes) and the
# daemon's over 6 s, in clock ticks (CLK_TCK, usually 100 a second).
# Usage: docs/http_page_cpu.sh [agentlog] [N agents] [HB 0|1]
set -euo pipefail
B="${1:-target/release/agentlog}"; N="${2:-1000}"; HB="${3:-1}"
d=$(mktemp -d); $B --dir $d/s init >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
$B --dir $d/s serve --http 127.0.0.1:$port >$d/out 2>&1 & dm=$!
until grep -q 'listening on' $d/out 2>/dev/null; do sleep 0.05; done
python3 - $d/s $N <<'PY'
import socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]+'/agentlog.sock'); f=s.makefile('rb')
n=int(sys.argv[2])
for i in range(n):
    s.sendall(b'{"method":"register","params":{"name":"agent-%d","provider":"claude","cwd":"/w"}}\n' % i)
for i in range(n): f.readline()
PY
if [ "$HB" = 1 ]; then
python3 - $d/s $N <<'PY' &
import socket,sys,time
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]+'/agentlog.sock'); f=s.makefile('rb')
n=int(sys.argv[2]); end=time.time()+20
while time.time()<end:
    s.sendall(b''.join(b'{"method":"heartbeat","params":{"name":"agent-%d"}}\n' % i for i in range(n)))
    for i in range(n): f.readline()
    time.sleep(0.05)
PY
hb=$!
fi
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking --disable-component-update --disable-sync --user-data-dir=$d/prof http://127.0.0.1:$port/ >/dev/null 2>&1 & br=$!
sleep 6
desc() { echo $1; for c in $(ps -o pid= --ppid $1); do desc $c; done; }
cpu() { local t=0; for p in $(desc $br); do [ -r /proc/$p/stat ] && t=$((t + $(awk '{print $14+$15}' /proc/$p/stat))); done; echo $t; }
c0=$(cpu); d0=$(awk '{print $14+$15}' /proc/$dm/stat); sleep 6; c1=$(cpu); d1=$(awk '{print $14+$15}' /proc/$dm/stat)
echo "N=$N HB=$HB: chromium $((c1-c0)) ticks / 6 s; daemon $((d1-d0))"
kill $br ${hb:-} 2>/dev/null || true; wait $br 2>/dev/null || true; kill $dm; wait $dm 2>/dev/null || true; rm -rf "$d" || true
