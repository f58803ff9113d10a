#!/usr/bin/env python3
"""A foreign registry.json writer for the coexistence race test, following
upstream fno's two writers (docs/upstream.md, "Locks"; the files in
fixtures/upstream/ are theirs):

--mode python  flock LOCK_EX on <dir>/locks/_registry.lock across
               read-modify-write; writes every one of the 35 schema-16 keys
               (None as null, short_id/project_root ""), 2-space indent, to
               registry.json.tmp, no fsync, os.replace.
--mode rust    flock LOCK_EX on <dir>/registry.json.lock; omits empty keys
               (Rust's serde skips), writes .registry.json.tmp.<pid>,
               fsync, rename.

Both rewrite the whole file as schema 16 keeping every row they read. Every
`--every`-th write also marks one of its own earlier rows busy (a status
change). Upstream's two writers lock different files and can lose each
other's updates; `--serialize FILE` makes the test's writers also take a
test-only lock with each other, so every loss the test can see is agentlog's.
Prints the names it wrote, one per line.
"""
import argparse
import fcntl
import json
import os
import time

V16 = ["name", "cwd", "log_path", "harness", "provider", "model", "effort",
       "created_at", "status", "last_message_at", "mcp_channel_id", "host_mode",
       "harness_session_id", "spawned_by_session", "spawned_by_harness",
       "spawned_by_cwd", "spawn_trigger", "origin", "short_id", "project_root",
       "messaging_socket_path", "cc_session_id", "pid", "pid_start_time",
       "last_reconciled_at", "inside_leg", "exited_at", "mux", "screen_state",
       "crown_level", "crown_scope", "crown_grantor", "route_settings_path",
       "fno_id", "delivery_policy"]
NEVER_NULL = {"short_id": "", "project_root": ""}


def locked(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    f = open(path, "a")
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


LEGACY_IDS = {"claude": "claude_session_uuid", "codex": "codex_session_id",
              "gemini": "gemini_session_id"}


def migrated(row, version):
    """Upstream HEAD's read of an older row (UPSTREAM-SCHEMAS §7)."""
    row = dict(row)
    if version < 15:
        row["harness"] = row.get("harness") or row.get("provider")
        row["provider"] = None
    legacy = LEGACY_IDS.get(row.get("harness"))
    if legacy and not row.get("harness_session_id") and row.get(legacy) not in (None, "null"):
        row["harness_session_id"] = row[legacy]
    for key in LEGACY_IDS.values():
        row.pop(key, None)
    short = row.pop("claude_short_id", None)
    if short and not row.get("short_id"):
        row["short_id"] = short
    row.pop("session_id", None)
    return row


def load(path):
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read())
    except FileNotFoundError:
        return []
    rows = doc.get("agents", doc.get("entries", []))
    return [migrated(r, doc.get("schema_version", 1)) for r in rows]


def shaped(row, mode):
    if mode == "python":
        out = {k: row.get(k, NEVER_NULL.get(k)) for k in V16}
        # Keys the file had that schema 16 does not list are kept after.
        out.update({k: v for k, v in row.items() if k not in out})
        return out
    # Rust never models spawned_by_* (its writes erase them, as upstream's).
    return {k: v for k, v in row.items() if (v not in (None, "") or k in
            ("log_path", "mcp_channel_id", "last_message_at"))
            and not k.startswith("spawned_by_")}


def write(path, rows, mode):
    doc = {"schema_version": 16, "agents": [shaped(r, mode) for r in rows]}
    if mode == "python":
        text = json.dumps(doc, indent=2)
        tmp = os.path.join(os.path.dirname(path), "registry.json.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    else:
        text = json.dumps(doc, indent=2, ensure_ascii=False)
        tmp = os.path.join(os.path.dirname(path), ".registry.json.tmp.%d" % os.getpid())
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["python", "rust"], required=True)
    ap.add_argument("--registry", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--serialize")
    a = ap.parse_args()
    d = os.path.dirname(os.path.abspath(a.registry))
    lock = (os.path.join(d, "locks", "_registry.lock") if a.mode == "python"
            else a.registry + ".lock")
    start = time.monotonic()
    for i in range(a.count):
        due = start + a.seconds * i / a.count
        time.sleep(max(0.0, due - time.monotonic()))
        held = [locked(a.serialize)] if a.serialize else []
        held.append(locked(lock))
        try:
            rows = load(a.registry)
            name = "%s-%d" % (a.prefix, i)
            rows.append({
                "name": name, "cwd": "/home/dev/src/app", "log_path": None,
                "harness": "claude", "provider": "anthropic",
                "created_at": "2030-01-01T00:00:%02dZ" % (i % 60),
                "status": "live", "host_mode": "exec",
                "harness_session_id": "%08x-0000-4000-8000-%012x" % (i, os.getpid()),
                "origin": "spawn", "short_id": "%08x" % (i + (1 << 28) * (a.mode == "rust")),
                "spawned_by_session": "parent-%s" % a.prefix,
            })
            if i % a.every == a.every - 1:
                mine = "%s-%d" % (a.prefix, i - 1)
                for r in rows:
                    if r.get("name") == mine:
                        r["status"] = "busy"
            write(a.registry, rows, a.mode)
            print(name, flush=True)
        finally:
            for f in reversed(held):
                f.close()


if __name__ == "__main__":
    main()
