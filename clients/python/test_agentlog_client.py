"""Tests of agentlog_client.py against a real daemon (`agentlog serve`).

Run from the repository root after `cargo build --release`:

    python3 -m unittest discover -s clients/python -v

The binary is $AGENTLOG_BIN, else target/release/agentlog; words of
$AGENTLOG_SERVE_ARGS are added to `serve` (tests/cluster/daemon.rs runs this
suite against a replicated daemon with `--nats URLS --stream FLEET`). Each test class
starts its own daemon on a fresh store in a temporary directory and stops it
(SIGTERM, then SIGKILL) whatever happens. Event times are passed explicitly,
so nothing depends on the date the tests run.
"""

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agentlog_client as al  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# A replica (`serve --nats`) answers a lazy heartbeat with its batch's lsn
# (docs/scaling.md §5).
REPLICATED = "--nats" in os.environ.get("AGENTLOG_SERVE_ARGS", "")
BIN = os.environ.get("AGENTLOG_BIN") or os.path.join(ROOT, "target", "release", "agentlog")
T0 = "2026-11-30T12:00:"


def at(sec):
    return "%s%02dZ" % (T0, sec)


class Daemon:
    """A real `agentlog serve` on a fresh store."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="agentlog-py-")
        self.store = os.path.join(self.dir, "store")
        env = dict(os.environ, AGENTLOG_NOW=at(0))
        env.pop("AGENTLOG_DIR", None)
        subprocess.run([BIN, "--dir", self.store, "init"], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        extra = shlex.split(os.environ.get("AGENTLOG_SERVE_ARGS", ""))
        self.proc = subprocess.Popen([BIN, "--dir", self.store, "serve"] + extra, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while True:
            try:
                al.Client(self.store).close()
                return
            except al.NoDaemon:
                if self.proc.poll() is not None:
                    raise RuntimeError("daemon exited: %s" % self.proc.stderr.read().decode())
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("daemon did not answer within 20 s")
                time.sleep(0.02)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@unittest.skipIf(not os.path.exists(BIN), "build first: %s is missing" % BIN)
class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def client(self):
        return al.Client(self.daemon.store)

    def test_hello_names_the_protocol(self):
        with self.client() as c:
            self.assertEqual(c.server["protocol"], 1)
            self.assertIn("last_lsn", c.server)

    def test_register_heartbeat_status_list_get(self):
        with self.client() as c:
            c.register("py-a", provider="claude", cwd="/w", pid=4242, at=at(1))
            c.heartbeat("py-a", pid=4242, at=at(2))
            c.status("py-a", "busy", message="building", at=at(3))
            rows = {r["name"]: r for r in c.list()}
            self.assertEqual(rows["py-a"]["status"], "busy")
            self.assertEqual(c.get("py-a")["name"], "py-a")

    def test_typed_errors(self):
        with self.client() as c:
            with self.assertRaises(al.Refused) as e:
                c.heartbeat("py-nobody", at=at(4))
            self.assertIn("not found", e.exception.message)
            with self.assertRaises(al.NotFound):
                c.get("py-nobody")
            with self.assertRaises(al.ProtocolError):
                c.call("no-such-method")
            c.register("py-pid", provider="codex", cwd="/w", pid=1, at=at(4))
            with self.assertRaises(al.Refused) as e:
                c.heartbeat("py-pid", pid=2, at=at(5))
            self.assertIn("pid", e.exception.message)
            # The connection is still usable after errors.
            self.assertEqual(c.call("hello")["protocol"], 1)

    def test_post_and_read(self):
        with self.client() as c:
            c.register("py-from", provider="claude", cwd="/w", at=at(6))
            c.register("py-to", provider="claude", cwd="/w", at=at(6))
            posted = c.post("py-from", "hello from python", to="py-to", at=at(7))
            got = c.read("py-to", at=at(8))
            bodies = [m["body"] for m in got["messages"]]
            self.assertEqual(bodies, ["hello from python"])
            self.assertEqual(got["messages"][0]["id"], posted["id"])
            self.assertEqual(c.read("py-to", at=at(9))["messages"], [])

    def test_paged_read_show_and_presence(self):
        with self.client() as c:
            c.register("py-pager", provider="claude", cwd="/w", at=at(20))
            c.register("py-sender", provider="claude", cwd="/w", at=at(20))
            for i in range(3):
                c.post("py-sender", "note %d" % i, to="py-pager", at=at(21 + i))
            page = c.read("py-pager", limit=1, at=at(25))
            self.assertEqual([m["body"] for m in page["messages"]], ["note 0"])
            self.assertEqual(page["left"], 2)
            shown = c.show("py-pager", at=at(26))
            self.assertIn("py-pager", str(shown))
            self.assertFalse(c.presence("py-pager"))  # no process identity recorded
            with self.assertRaises(al.AgentlogError):
                c.show("py-nobody", at=at(26))

    def test_waiting_read_is_woken_by_a_post_or_times_out(self):
        with self.client() as c:
            c.register("py-waiter", provider="claude", cwd="/w", at=at(30))
            c.register("py-poster", provider="claude", cwd="/w", at=at(30))
            got = {}

            def wait():
                with self.client() as w:
                    got["page"] = w.read("py-waiter", wait=60, at=at(32))

            t = threading.Thread(target=wait, daemon=True)
            t.start()
            # Post only once the daemon holds the read waiting.
            deadline = time.monotonic() + 20
            while c.call("hello")["reads_waiting"] != 1:
                self.assertLess(time.monotonic(), deadline, "the read never waited")
                time.sleep(0.01)
            posted = c.post("py-poster", "wake up", to="py-waiter", at=at(31))
            t.join(30)
            self.assertFalse(t.is_alive(), "the waiting read was not woken")
            page = got["page"]
            self.assertFalse(page["timed_out"])
            self.assertEqual([m["id"] for m in page["messages"]], [posted["id"]])
            empty = c.read("py-waiter", wait=0.2, at=at(33))
            self.assertTrue(empty["timed_out"])
            self.assertEqual(empty["messages"], [])

    def test_pipeline_answers_in_order(self):
        with self.client() as c:
            c.register("py-pipe", provider="gemini", cwd="/w", at=at(10))
            results = c.pipeline(
                [("heartbeat", {"name": "py-pipe", "at": at(11)})] * 50
                + [("heartbeat", {"name": "py-missing", "at": at(11)})]
            )
            lsns = [r["lsn"] for r in results[:50]]
            self.assertEqual(lsns, sorted(lsns))
            if REPLICATED:
                # A replica answers each lazy heartbeat with the sequence of
                # the batch that carried it (PROTOCOL.md, replicas).
                self.assertLess(len(set(lsns)), 50)
            else:
                self.assertEqual(len(set(lsns)), 50)
            self.assertIsInstance(results[50], al.Refused)

    def test_watch_sees_history_then_live_events(self):
        with self.client() as c:
            first = c.register("py-watch", provider="claude", cwd="/w", at=at(12))["lsn"]
            seen = []
            done = threading.Event()

            def follow():
                with c.watch(from_lsn=first, agent="py-watch") as w:
                    for ev in w:
                        seen.append(ev)
                        if len(seen) == 3:
                            done.set()
                            return

            t = threading.Thread(target=follow, daemon=True)
            t.start()
            with self.client() as writer:
                writer.heartbeat("py-watch", at=at(13))
                writer.status("py-watch", "ready", at=at(14))
            self.assertTrue(done.wait(20), "watch saw %r" % seen)
            lsns = [e["lsn"] for e in seen]
            self.assertEqual(lsns[0], first)
            self.assertEqual(lsns, sorted(set(lsns)))
            kinds = [e["kind"] for e in seen]
            self.assertEqual(kinds, ["AgentRegistered", "Heartbeat", "StatusChanged"])


class NoDaemonTest(unittest.TestCase):
    def test_no_socket_is_no_daemon(self):
        d = tempfile.mkdtemp(prefix="agentlog-py-")
        try:
            with self.assertRaises(al.NoDaemon):
                al.Client(d)
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main()
