"""One client process of `agentlog bench clients --client python` (run as
`python3 bench_worker.py`; not part of the installed package).

It speaks the Rust worker's pipe protocol (src/bench/clients_worker.rs):
one JSON spec line on stdin, `ready` on stdout once its connections are
open, `go` on stdin, then one result line: acknowledged operations, refused
and failed counts, the measured seconds, the first error, and a latency
histogram in the Rust bench's log-linear buckets (src/bench/latency.rs), so
the parent merges it with the other processes'. Targets:

- `daemon`: heartbeats through agentlog_client.Client (`heartbeat`, or
  `heartbeat_many` with `pipeline` > 1), each agent of this process's share
  in turn;
- `sqlite`: Python's own sqlite3 on the bench's database: WAL,
  `synchronous=NORMAL` (FULL with `durable`), one autocommitted
  `UPDATE agents SET last_active = ? WHERE name = ?` per heartbeat — the
  baseline a Python agent host would otherwise write.
"""

import json
import os
import sqlite3
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agentlog_client as al  # noqa: E402

SUB_BITS = 6
SUB = 1 << SUB_BITS


def bucket_of(v):
    """src/bench/latency.rs `index_of`."""
    if v < SUB:
        return v
    shift = v.bit_length() - 1 - SUB_BITS
    return (shift + 1) * SUB + ((v >> shift) - SUB)


def agent_name(i):
    return "agent-%06d" % i


def agents_of(g, total, agents):
    mine = list(range(g, agents, total))
    return mine or [g % agents]


class Tally:
    def __init__(self):
        self.buckets = {}
        self.ops = self.refused = self.failed = 0
        self.min = None
        self.max = 0
        self.sum = 0
        self.first_error = None

    def ok(self, ns):
        self.ops += 1
        b = bucket_of(ns)
        self.buckets[b] = self.buckets.get(b, 0) + 1
        self.sum += ns
        if self.min is None or ns < self.min:
            self.min = ns
        if ns > self.max:
            self.max = ns

    def error(self, refused, what):
        if refused:
            self.refused += 1
        else:
            self.failed += 1
        if self.first_error is None:
            self.first_error = what

    def merge(self, o):
        for b, c in o.buckets.items():
            self.buckets[b] = self.buckets.get(b, 0) + c
        self.ops += o.ops
        self.refused += o.refused
        self.failed += o.failed
        self.sum += o.sum
        self.max = max(self.max, o.max)
        if o.min is not None and (self.min is None or o.min < self.min):
            self.min = o.min
        self.first_error = self.first_error or o.first_error


class DaemonSession:
    def __init__(self, spec):
        self.client = al.Client(spec["target"]["dir"])
        self.durable = True if spec["durable"] else None

    def run(self, names, k, seconds, tally):
        c, durable = self.client, self.durable
        clock = time.perf_counter_ns
        n = len(names)
        i = 0
        end = clock() + int(seconds * 1e9)
        if k == 1:
            while True:
                start = clock()
                if start >= end:
                    return
                try:
                    c.heartbeat(names[i], durable=durable)
                    tally.ok(clock() - start)
                except al.AgentlogError as e:
                    tally.error(isinstance(e, al.Closed), "%s: %s" % (e.code, e.message))
                    if isinstance(e, al.Closed):
                        return
                i = (i + 1) % n
        while True:
            start = clock()
            if start >= end:
                return
            batch = [names[(i + j) % n] for j in range(k)]
            i = (i + k) % n
            outs = c.heartbeat_many(batch, durable=durable)
            took = clock() - start
            for o in outs:
                if isinstance(o, al.AgentlogError):
                    tally.error(isinstance(o, al.Closed), "%s: %s" % (o.code, o.message))
                else:
                    tally.ok(took)


class SqliteSession:
    def __init__(self, spec):
        path = spec["target"]["path"]
        self.db = sqlite3.connect(path, timeout=30, isolation_level=None,
                                  check_same_thread=False)
        mode = self.db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode != "wal":
            raise RuntimeError("sqlite refused WAL mode at %s (journal_mode is %s)" % (path, mode))
        self.db.execute("PRAGMA synchronous=%s" % ("FULL" if spec["durable"] else "NORMAL"))

    def run(self, names, k, seconds, tally):
        db = self.db
        clock = time.perf_counter_ns
        n = len(names)
        i = 0
        end = clock() + int(seconds * 1e9)
        update = "UPDATE agents SET last_active = ? WHERE name = ?"
        while True:
            start = clock()
            if start >= end:
                return
            try:
                changed = db.execute(update, (int(time.time() * 1000), names[i])).rowcount
                if changed == 1:
                    tally.ok(clock() - start)
                else:
                    tally.error(False, "sqlite: %d rows changed, not 1" % changed)
            except sqlite3.OperationalError as e:
                tally.error("locked" in str(e) or "busy" in str(e), "sqlite: %s" % e)
            i = (i + 1) % n


SESSIONS = {"daemon": DaemonSession, "sqlite": SqliteSession}


def main():
    line = sys.stdin.readline()
    try:
        spec = json.loads(line)
        kind = spec["target"]["kind"]
        session_of = SESSIONS[kind]
    except (ValueError, KeyError) as e:
        sys.exit("bad worker spec %r: %s" % (line, e))
    procs, conns, agents = spec["procs"], spec["conns"], spec["agents"]
    k = spec["pipeline"] if kind == "daemon" else 1
    sessions = [session_of(spec) for _ in range(conns)]
    go = threading.Barrier(conns + 1)
    results = [None] * conns

    def run(c, session):
        g = spec["worker"] * conns + c
        names = [agent_name(a) for a in agents_of(g, procs * conns, agents)]
        tally = Tally()
        go.wait()
        start = time.perf_counter()
        session.run(names, k, spec["seconds"], tally)
        results[c] = (tally, time.perf_counter() - start)

    threads = [threading.Thread(target=run, args=(c, s)) for c, s in enumerate(sessions)]
    for t in threads:
        t.start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    if sys.stdin.readline().strip() != "go":
        sys.exit("worker %d: expected `go`" % spec["worker"])
    go.wait()
    for t in threads:
        t.join()
    total = Tally()
    elapsed = 0.0
    for tally, took in results:
        total.merge(tally)
        elapsed = max(elapsed, took)
    out = {
        "ops": total.ops,
        "refused": total.refused,
        "failed": total.failed,
        "seconds": elapsed,
        "first_error": total.first_error,
        "latency": {
            "buckets": sorted(total.buckets.items()),
            "min": total.min or 0,
            "max": total.max,
            "sum": total.sum,
        },
    }
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
