#!/usr/bin/env python3
# Usage: agentlog --dir D init; agentlog --dir D serve &
#        python3 docs/daemon_heartbeats.py D K N   (K in flight, N heartbeats)
# Lazy heartbeats through the daemon from one connection, pipelined K deep.
import socket,sys,time
D,K,N=sys.argv[1],int(sys.argv[2]),int(sys.argv[3])
s=socket.socket(socket.AF_UNIX); s.connect(D+'/agentlog.sock'); f=s.makefile('rb')
s.sendall(b'{"id":0,"method":"register","params":{"name":"w1","provider":"c","cwd":"/"}}\n'); f.readline()
req=b'{"method":"heartbeat","params":{"name":"w1"}}\n'*K
t=time.time()
for _ in range(N//K):
    s.sendall(req)
    for _ in range(K): f.readline()
dt=time.time()-t
print(f"K={K}: {N} heartbeats in {dt:.2f}s = {N/dt:.0f}/s")
