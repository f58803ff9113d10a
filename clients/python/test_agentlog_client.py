"""Tests of the synchronous client (agentlog_client.Client) against a real
daemon (`agentlog serve`, started by harness.Daemon).

Run from the repository root after `cargo build --release`:

    python3 -m unittest discover -s clients/python -v

(`cargo test --release --test daemon clients::` runs this too.) Event times
are passed explicitly, so nothing depends on the date the tests run.
"""

import os
import shutil
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agentlog_client as al  # noqa: E402
from harness import REPLICATED, Daemon  # noqa: E402

T0 = "2026-11-30T12:00:"


def at(sec):
    return "%s%02dZ" % (T0, sec)


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

    def test_heartbeat_many_is_one_pipelined_batch(self):
        with self.client() as c:
            c.register("py-many-a", provider="claude", cwd="/w", at=at(40))
            c.register("py-many-b", provider="claude", cwd="/w", at=at(40))
            names = ["py-many-a", "py-many-b"] * 20 + ["py-many-ghost", "py-many-a"]
            out = c.heartbeat_many(names)
            self.assertEqual(len(out), len(names))
            self.assertEqual([r["agent"] for r in out[:40]], names[:40])
            self.assertIsInstance(out[40], al.Refused)
            self.assertEqual(out[41]["agent"], "py-many-a")
            lsns = [r["lsn"] for r in out[:40]] + [out[41]["lsn"]]
            self.assertEqual(lsns, sorted(lsns))
            # Durable and timed heartbeats take the general shape; still in order.
            out = c.heartbeat_many(["py-many-a", "py-many-b"], durable=True, at=at(41))
            self.assertEqual([r["agent"] for r in out], ["py-many-a", "py-many-b"])
            self.assertEqual(c.get("py-many-b")["name"], "py-many-b")

    def test_names_needing_escapes_round_trip(self):
        name = 'py-"quoted"\\-é-\u2603'
        with self.client() as c:
            c.register(name, provider="claude", cwd="/w", at=at(42))
            self.assertEqual(c.heartbeat(name)["agent"], name)
            self.assertEqual(c.heartbeat_many([name, name])[1]["agent"], name)
            with self.assertRaises(TypeError):
                c.heartbeat(42)

    def test_the_timeout_bounds_a_slow_answer(self):
        with self.client() as c:
            c.register("py-slow", provider="claude", cwd="/w", at=at(43))
        with al.Client(self.daemon.store, timeout=0.2) as c:
            started = time.monotonic()
            with self.assertRaises(TimeoutError):
                # A plain call: the client does not widen its timeout.
                c.call("read", name="py-slow", wait=5, at=at(44))
            self.assertLess(time.monotonic() - started, 4)

    def test_raw_request_returns_the_whole_response(self):
        with self.client() as c:
            doc = c.request({"id": "raw-1", "method": "no-such-method"})
            self.assertEqual(doc["id"], "raw-1")
            self.assertEqual(doc["error"]["code"], "unknown_method")
            self.assertEqual(doc["error"]["exit"], 2)
            self.assertEqual(c.hello()["protocol"], 1)

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


class RefusalTest(unittest.TestCase):
    def test_a_reason_sent_before_the_daemon_closed_is_the_error(self):
        """A daemon that refuses goes on writing its reason and closes; the
        client's next write fails (broken pipe) and the reason, unread in
        the socket, is what the caller is told."""
        import json
        import socket

        d = tempfile.mkdtemp(prefix="agentlog-py-")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(os.path.join(d, "agentlog.sock"))
        listener.listen(1)

        def serve():
            conn, _ = listener.accept()
            hello = conn.makefile("rb").readline()
            rid = json.loads(hello)["id"]
            conn.sendall(json.dumps({"id": rid, "result": {"protocol": 1}}).encode() + b"\n")
            reason = {"code": "shutting_down", "message": "the daemon is shutting down",
                      "exit": 1}
            conn.sendall(json.dumps({"id": None, "error": reason}).encode() + b"\n")
            conn.close()

        server = threading.Thread(target=serve)
        server.start()
        try:
            with al.Client(d) as c:
                server.join()
                with self.assertRaises(al.Closed) as e:
                    c.heartbeat("py-a", at=at(1))
                self.assertIn("shutting down", str(e.exception))
        finally:
            listener.close()
            shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main()
