"""Tests of the asyncio client (agentlog_client.AsyncClient) against a real
daemon (`agentlog serve`, started by harness.Daemon): concurrent calls are
pipelined on one connection and answered in order, errors are typed, a
watch is an async iterator, and a daemon that goes away fails the calls in
flight with `Closed` instead of hanging them."""

import asyncio
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agentlog_client as al  # noqa: E402
from harness import REPLICATED, Daemon  # noqa: E402


def at(sec):
    return "2026-11-30T12:01:%02dZ" % sec


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


class AsyncClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def test_hello_register_heartbeat_get(self):
        async def go():
            async with al.AsyncClient(self.daemon.store) as c:
                self.assertEqual(c.server["protocol"], 1)
                await c.register("aio-a", provider="claude", cwd="/w", pid=77, at=at(1))
                hb = await c.heartbeat("aio-a", pid=77, at=at(2))
                self.assertEqual(hb["agent"], "aio-a")
                await c.status("aio-a", "busy", message="x", at=at(3))
                row = await c.get("aio-a")
                self.assertEqual(row["status"], "busy")
                self.assertIn("aio-a", [r["name"] for r in await c.list()])
        run(go())

    def test_concurrent_calls_are_pipelined_in_order(self):
        async def go():
            c = await al.AsyncClient.connect(self.daemon.store)
            try:
                await c.register("aio-p", provider="claude", cwd="/w", at=at(4))
                calls = [c.heartbeat("aio-p") for _ in range(200)]
                calls.insert(100, c.heartbeat("aio-ghost"))
                out = await asyncio.gather(*calls, return_exceptions=True)
                self.assertIsInstance(out[100], al.Refused)
                lsns = [r["lsn"] for i, r in enumerate(out) if i != 100]
                self.assertEqual(lsns, sorted(lsns))
                if not REPLICATED:
                    self.assertEqual(len(set(lsns)), 200)
                many = await c.heartbeat_many(["aio-p"] * 50 + ["aio-ghost"])
                self.assertEqual([r["agent"] for r in many[:50]], ["aio-p"] * 50)
                self.assertIsInstance(many[50], al.Refused)
                mixed = await c.pipeline([("get", {"name": "aio-p"}),
                                          ("get", {"name": "aio-nobody"}),
                                          ("hello", {})])
                self.assertEqual(mixed[0]["name"], "aio-p")
                self.assertIsInstance(mixed[1], al.NotFound)
                self.assertEqual(mixed[2]["protocol"], 1)
            finally:
                await c.close()
        run(go())

    def test_typed_errors(self):
        async def go():
            async with al.AsyncClient(self.daemon.store) as c:
                with self.assertRaises(al.NotFound):
                    await c.get("aio-nobody")
                with self.assertRaises(al.ProtocolError) as e:
                    await c.call("no-such-method")
                self.assertEqual(e.exception.code, "unknown_method")
                with self.assertRaises(al.UsageError):
                    await c.call("heartbeat", name="aio-x", at="yesterday")
                # Still usable after errors.
                self.assertEqual((await c.hello())["protocol"], 1)
        run(go())

    def test_watch_is_an_async_iterator(self):
        async def go():
            async with al.AsyncClient(self.daemon.store) as c:
                first = (await c.register("aio-w", provider="claude", cwd="/w",
                                          at=at(10)))["lsn"]
                async with c.watch(from_lsn=first, agent="aio-w") as w:
                    self.assertEqual(w.start, first)
                    await c.heartbeat("aio-w", at=at(11))
                    await c.status("aio-w", "ready", at=at(12))
                    kinds = []
                    async for ev in w:
                        kinds.append(ev["kind"])
                        if len(kinds) == 3:
                            break
                self.assertEqual(kinds, ["AgentRegistered", "Heartbeat", "StatusChanged"])
        run(go())

    def test_waiting_read_is_woken(self):
        async def go():
            async with al.AsyncClient(self.daemon.store) as c, \
                    al.AsyncClient(self.daemon.store) as waiter:
                await c.register("aio-r", provider="claude", cwd="/w", at=at(20))
                await c.register("aio-s", provider="claude", cwd="/w", at=at(20))
                page = asyncio.ensure_future(waiter.read("aio-r", wait=60, at=at(22)))
                while (await c.hello())["reads_waiting"] != 1:
                    await asyncio.sleep(0.01)
                # The other connection is not blocked by the waiting read.
                posted = await c.post("aio-s", "wake", to="aio-r", at=at(21))
                got = await page
                self.assertFalse(got["timed_out"])
                self.assertEqual([m["id"] for m in got["messages"]], [posted["id"]])
        run(go())


class AsyncLifecycleTest(unittest.TestCase):
    def test_no_socket_is_no_daemon(self):
        d = tempfile.mkdtemp(prefix="agentlog-py-")
        try:
            with self.assertRaises(al.NoDaemon):
                run(al.AsyncClient.connect(d))
        finally:
            shutil.rmtree(d)

    def test_a_stopped_daemon_fails_calls_with_closed(self):
        daemon = Daemon()

        async def go():
            c = await al.AsyncClient.connect(daemon.store)
            try:
                daemon.stop()
                with self.assertRaises(al.Closed):
                    await c.heartbeat("aio-gone")
                with self.assertRaises(al.Closed):
                    await c.hello()
            finally:
                await c.close()
        try:
            run(go())
        finally:
            daemon.stop()
