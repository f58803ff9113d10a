"""The protocol's conformance cases (tests/conformance/cases) run through
the synchronous and the asyncio client, each case file against its own
fresh daemon (harness.Daemon with the cases' clock)."""

import asyncio
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agentlog_client as al  # noqa: E402
import conformance as cf  # noqa: E402
from harness import Daemon  # noqa: E402


class ConformanceTest(unittest.TestCase):
    def check(self, name, i, pattern, answer):
        m = cf.mismatch(pattern, answer)
        self.assertIsNone(m, "%s step %d: %s\nanswer: %r" % (name, i, m, answer))

    def run_sync(self, name, case, store):
        with al.Client(store) as c:
            for i, step in enumerate(case["steps"]):
                if "raw" in step:
                    self.check(name, i, step["expect"], c.request(step["raw"]))
                elif "send" in step:
                    req = step["send"]
                    try:
                        result, exit_status = c.call_with_exit(req["method"],
                                                               **req.get("params", {}))
                        answer = cf.answer_of(result, exit_status)
                    except al.AgentlogError as e:
                        answer = cf.answer_of(e)
                    self.check(name, i, cf.without_id(step["expect"]), answer)
                else:
                    reqs = [(r["method"], r.get("params", {})) for r in step["pipeline"]]
                    for j, (out, pattern) in enumerate(zip(c.pipeline(reqs), step["expect"])):
                        self.check("%s[%d]" % (name, j), i, cf.without_id(pattern),
                                   cf.answer_of(out))

    async def run_async(self, name, case, store):
        async with al.AsyncClient(store) as c:
            for i, step in enumerate(case["steps"]):
                if "raw" in step:
                    self.check(name, i, step["expect"], await c.request(step["raw"]))
                elif "send" in step:
                    req = step["send"]
                    try:
                        result, exit_status = await c.call_with_exit(
                            req["method"], **req.get("params", {}))
                        answer = cf.answer_of(result, exit_status)
                    except al.AgentlogError as e:
                        answer = cf.answer_of(e)
                    self.check(name, i, cf.without_id(step["expect"]), answer)
                else:
                    reqs = [(r["method"], r.get("params", {})) for r in step["pipeline"]]
                    outs = await c.pipeline(reqs)
                    for j, (out, pattern) in enumerate(zip(outs, step["expect"])):
                        self.check("%s[%d]" % (name, j), i, cf.without_id(pattern),
                                   cf.answer_of(out))

    def test_every_case_through_both_clients(self):
        files = cf.case_files()
        for path in files:
            name = os.path.basename(path)
            case = cf.load(path)
            for flavour in ("sync", "asyncio"):
                with self.subTest(case=name, client=flavour):
                    daemon = Daemon(now=cf.NOW, serve_args=cf.SERVE_ARGS, local=True)
                    try:
                        if flavour == "sync":
                            self.run_sync(name, case, daemon.store)
                        else:
                            asyncio.run(asyncio.wait_for(
                                self.run_async(name, case, daemon.store), 60))
                    finally:
                        daemon.stop()

    def test_the_matcher_fails_what_it_should(self):
        self.assertIsNone(cf.mismatch({"a": 1}, {"a": 1, "b": 2}))
        self.assertIsNotNone(cf.mismatch({"a": 1}, {"a": 2}))
        self.assertIsNotNone(cf.mismatch({"a": {"$absent": True}}, {"a": None}))
        self.assertIsNotNone(cf.mismatch({"a": {"$type": "integer"}}, {"a": True}))
        self.assertIsNotNone(cf.mismatch([1], [1, 2]))
        self.assertIsNotNone(cf.mismatch(True, 1))
        self.assertIsNotNone(cf.mismatch({"$contains": "x"}, "abc"))
        self.assertIsNone(cf.mismatch({"$contains": "b"}, "abc"))
