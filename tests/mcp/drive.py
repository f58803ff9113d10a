"""Drives `agentlog mcp` with the official Python MCP SDK (PyPI `mcp`).

Run by tests/cli/mcp.rs (which installs the SDK into a venv under
target/tmp): `python drive.py AGENTLOG STORE_DIR`. The clock is the
caller's `AGENTLOG_NOW`. Two sessions, A and B, each a real
`agentlog --dir STORE_DIR mcp` child over stdio, as an MCP host starts it:

- initialize (clientInfo names the transport client), tools/list with the
  schemas checked, then every tool called;
- A and B register two agents; A posts to B while B's waiting read blocks:
  the read returns the post, and the time from the post's answer to the
  read's answer is reported (the Rust test asserts the bound);
- a waiting read cancelled by the client (notifications/cancelled) takes
  nothing: the mail posted after it stays unread for the next read;
- A subscribes to B's agent resource; B's status change reaches A as
  notifications/resources/updated;
- refused calls come back as isError results with the CLI's message;
- closing B's stdin ends B's presence: `sweep` then `show` say idle with
  the session-ended message, and `presence --any-transport` no longer
  counts it while A's agent is still live.

Every check is an assert; the last line on stdout is a JSON summary.
"""

import json
import os
import subprocess
import sys
import time

import warnings

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client, types

# resources/subscribe is the handshake-era (2025-11-25) way, which the
# server and this client negotiate; the SDK warns that a later revision
# replaces it.
warnings.filterwarnings("ignore", message="resources/(un)?subscribe is removed")

AGENTLOG, STORE = sys.argv[1], sys.argv[2]
TOOLS = ["register", "heartbeat", "set_status", "post", "read", "list", "show", "audit", "replay"]
SESSION_ENDED = "disconnected: the MCP session ended"


def cli(*args):
    """`agentlog --dir STORE --json ARGS…` as a user would run it."""
    out = subprocess.run(
        [AGENTLOG, "--dir", STORE, "--json", *args], capture_output=True, text=True
    )
    return out.returncode, (json.loads(out.stdout) if out.stdout.strip() else None), out.stderr


def server():
    return StdioServerParameters(command=AGENTLOG, args=["--dir", STORE, "mcp"], env=dict(os.environ))


class Updates:
    """The resources/updated notifications a session received."""

    def __init__(self):
        self.uris = []
        self.event = anyio.Event()

    async def __call__(self, message):
        if getattr(message, "method", None) == "notifications/resources/updated":
            self.uris.append(str(message.params.uri))
            self.event.set()

    async def wait_for(self, uri, seconds):
        with anyio.fail_after(seconds):
            while uri not in self.uris:
                self.event = anyio.Event()
                await self.event.wait()


async def call(session, name, args, ok=True):
    result = await session.call_tool(name, args)
    if ok:
        assert not result.is_error, f"{name} {args}: {result.content}"
        assert isinstance(result.structured_content, dict), f"{name}: {result}"
    return result


def error_text(result):
    assert result.is_error, f"expected a refusal: {result}"
    return " ".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def check_tools(session):
    listed = (await session.list_tools()).tools
    by_name = {t.name: t for t in listed}
    assert sorted(by_name) == sorted(TOOLS), sorted(by_name)
    for t in listed:
        schema = t.input_schema
        assert schema["type"] == "object", t.name
        assert t.output_schema and t.output_schema["type"] == "object", t.name
    assert set(by_name["register"].input_schema["required"]) == {"name", "provider"}
    read = by_name["read"].input_schema["properties"]
    assert {"budget", "limit", "wait"} <= set(read), read
    assert by_name["set_status"].input_schema["properties"]["status"]["enum"][0] == "spawning"
    assert "pid" not in by_name["register"].input_schema["properties"]


async def main():
    summary = {}
    updates_a = Updates()
    async with stdio_client(server()) as (ra, wa), ClientSession(
        ra, wa, client_info=types.Implementation(name="drive-a", version="1.0"),
        message_handler=updates_a,
    ) as a:
        init = await a.initialize()
        assert init.server_info.name == "agentlog", init
        caps = init.capabilities
        assert caps.tools is not None and caps.resources is not None and caps.resources.subscribe
        await check_tools(a)

        reg = await call(a, "register", {"name": "alpha", "provider": "claude", "cwd": "/work"})
        assert reg.structured_content["registration"] == "new", reg
        code, alpha, _ = cli("show", "alpha")
        assert alpha["transport_client"] == "drive-a/1.0", alpha
        assert alpha["pid"] == os.getpid(), (alpha, os.getpid())
        summary["alpha_pid"] = alpha["pid"]

        async with stdio_client(server()) as (rb, wb), ClientSession(
            rb, wb, client_info=types.Implementation(name="drive-b", version="2.0")
        ) as b:
            await b.initialize()
            await call(b, "register", {"name": "beta", "provider": "codex", "cwd": "/work",
                                       "project_root": "/work"})

            # Every other tool once.
            await call(a, "heartbeat", {"name": "alpha"})
            await call(a, "set_status", {"name": "alpha", "status": "busy", "message": "reviewing"})
            posted = await call(a, "post", {"from": "alpha", "to": "beta", "body": "hello beta"})
            first_id = posted.structured_content["id"]
            page = await call(b, "read", {"name": "beta", "limit": 5, "budget": 1000})
            assert [m["id"] for m in page.structured_content["messages"]] == [first_id], page
            listed = await call(a, "list", {"provider": "codex"})
            assert [r["name"] for r in listed.structured_content["agents"]] == ["beta"], listed
            shown = await call(b, "show", {"name": "alpha"})
            assert shown.structured_content["status"] == "busy", shown
            audit = await call(b, "audit", {"name": "beta"})
            assert audit.structured_content["agent"] == "beta" and audit.structured_content["events"]
            replay = await call(a, "replay", {"lsn": 1})
            assert replay.structured_content["events"] == 1, replay

            # B waits for mail; A posts; B's read returns the post. Three
            # rounds: the time from the post's answer to the read's answer
            # (the commit is before the former) and from the post's request
            # (an upper bound of the wake-up, client overheads included).
            summary["wake_after_post_answer_ms"] = []
            summary["wake_after_post_sent_ms"] = []
            for round_no in range(3):
                got = {}

                async def wait_read():
                    got["page"] = await call(b, "read", {"name": "beta", "wait": 20})
                    got["at"] = time.monotonic()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(wait_read)
                    await anyio.sleep(0.5)  # the read is waiting by now
                    assert "page" not in got, "the read returned before any mail"
                    posted_at = time.monotonic()
                    body = f"wake up {round_no}"
                    post = await call(a, "post", {"from": "alpha", "to": "beta", "body": body})
                    answered_at = time.monotonic()
                msgs = got["page"].structured_content["messages"]
                assert [m["body"] for m in msgs] == [body], msgs
                assert msgs[0]["id"] == post.structured_content["id"]
                assert got["page"].structured_content["timed_out"] is False
                summary["wake_after_post_answer_ms"].append((got["at"] - answered_at) * 1000)
                summary["wake_after_post_sent_ms"].append((got["at"] - posted_at) * 1000)

            # A waiting read that times out: empty, timed_out.
            empty = await call(b, "read", {"name": "beta", "wait": 0.2})
            assert empty.structured_content["messages"] == [] and empty.structured_content["timed_out"]

            # Cancellation: the client gives up on a waiting read (the SDK
            # sends notifications/cancelled); mail posted after it stays
            # unread for the next read.
            cancel_started = time.monotonic()
            with anyio.move_on_after(0.5) as scope:
                await b.call_tool("read", {"name": "beta", "wait": 30})
            assert scope.cancelled_caught, "the waiting read was not cancelled"
            await anyio.sleep(0.3)  # the server has seen the cancellation
            late = await call(a, "post", {"from": "alpha", "to": "beta", "body": "after cancel"})
            page = await call(b, "read", {"name": "beta"})
            assert [m["id"] for m in page.structured_content["messages"]] == [
                late.structured_content["id"]
            ], page
            summary["cancel_round_trip_ms"] = (time.monotonic() - cancel_started) * 1000

            # Subscriptions: A hears of B's status change.
            resources = await a.list_resources()
            assert "agentlog://agents" in [str(r.uri) for r in resources.resources]
            templates = await a.list_resource_templates()
            uris = [t.uri_template for t in templates.resource_templates]
            assert uris == ["agentlog://agents/{name}", "agentlog://agents/{name}/audit"], uris
            registry = await a.read_resource("agentlog://agents")
            names = [r["name"] for r in json.loads(registry.contents[0].text)["agents"]]
            assert names == ["alpha", "beta"], names
            beta_doc = json.loads((await a.read_resource("agentlog://agents/beta")).contents[0].text)
            assert beta_doc["name"] == "beta"
            beta_audit = json.loads(
                (await a.read_resource("agentlog://agents/beta/audit")).contents[0].text
            )
            assert beta_audit["agent"] == "beta"
            await a.subscribe_resource("agentlog://agents/beta")
            await a.subscribe_resource("agentlog://agents")
            changed_at = time.monotonic()
            await call(b, "set_status", {"name": "beta", "status": "busy", "message": "compiling"})
            await updates_a.wait_for("agentlog://agents/beta", 5)
            summary["update_after_status_ms"] = (time.monotonic() - changed_at) * 1000
            await updates_a.wait_for("agentlog://agents", 5)
            await a.unsubscribe_resource("agentlog://agents/beta")

            # Refusals: isError results with the CLI's message.
            summary["refusals"] = [
                error_text(await call(a, "heartbeat", {"name": "ghost"}, ok=False)),
                error_text(await call(a, "set_status", {"name": "alpha", "status": "sleepy"}, ok=False)),
                error_text(await call(a, "replay", {}, ok=False)),
                error_text(await call(a, "read", {"name": "alpha", "wait": -1}, ok=False)),
                error_text(await call(a, "post", {"from": "nobody", "body": "x"}, ok=False)),
            ]
            assert "agent `ghost` not found" in summary["refusals"][0], summary["refusals"]
            try:
                await a.read_resource("agentlog://agents/ghost")
                raise AssertionError("reading an unknown agent's resource succeeded")
            except Exception as e:  # a protocol error, naming the agent
                assert "ghost" in str(e), e

            code, presence, _ = cli("presence", "--any-transport")
            assert code == 0 and all(p["live"] for p in presence["agents"]), presence
        # B's stdin is closed: its server ends the session.

        code, swept, err = cli("sweep")
        assert code == 0, err
        code, beta, _ = cli("show", "beta")
        assert beta["status"] == "idle", beta
        assert beta["status_message"] == SESSION_ENDED, beta
        code, presence, _ = cli("presence", "--any-transport")
        live = {p["agent"]: p["live"] for p in presence["agents"]}
        assert live == {"alpha": True, "beta": False}, presence
        assert code == 0, presence  # alpha's session is still open
        summary["presence_after_b"] = presence

        # A tool call renews the session's heartbeats (alpha's last event).
        before = cli("show", "alpha")[1]["last_event_lsn"]
        await call(a, "list", {})
        after = cli("show", "alpha")[1]["last_event_lsn"]
        assert after > before, (before, after)

    code, presence, _ = cli("presence", "--any-transport")
    assert code == 1 and not any(p["live"] for p in presence["agents"]), presence
    code, alpha, _ = cli("show", "alpha")
    assert alpha["status"] == "idle" and alpha["status_message"] == SESSION_ENDED, alpha
    print(json.dumps(summary))


anyio.run(main)
