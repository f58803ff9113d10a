"""A client for the agentlog daemon (`agentlog serve`), standard library only.

Python 3.8+, no dependencies. It speaks the newline-delimited JSON protocol
of PROTOCOL.md over the store's Unix socket, so a Python agent heartbeats
without starting a process. Two clients with the same methods:

    from agentlog_client import Client

    with Client("/home/me/.agentlog") as c:
        c.register("coder-1", provider="codex", cwd="/work/repo", pid=os.getpid())
        c.heartbeat("coder-1", pid=os.getpid())
        c.heartbeat_many(["coder-1", "coder-2"])      # one pipelined write
        c.post("coder-1", "rebase on main", to="planner")
        for event in c.watch(from_lsn=1, agent="coder-1"):
            print(event)

    from agentlog_client import AsyncClient

    async with AsyncClient("/home/me/.agentlog") as c:
        await asyncio.gather(*(c.heartbeat(n) for n in names))  # pipelined

Errors from the daemon raise the subclass of `AgentlogError` chosen by the
protocol's stable error code; `NoDaemon` says nobody serves the store (no
socket, or connection refused), which differs from a daemon slow to answer.
"""

from ._errors import (
    AgentlogError,
    Closed,
    Failed,
    Forbidden,
    Lagged,
    NoDaemon,
    NotFound,
    ProtocolError,
    Refused,
    UsageError,
    error_from_reply,
)
from ._wire import PROTOCOL_VERSION, SOCKET_NAME, socket_path_of
from ._sync import Client, Watch
from ._aio import AsyncClient, AsyncWatch

__version__ = "0.1.0"

__all__ = [
    "Client",
    "Watch",
    "AsyncClient",
    "AsyncWatch",
    "AgentlogError",
    "NoDaemon",
    "ProtocolError",
    "UsageError",
    "Refused",
    "NotFound",
    "Forbidden",
    "Failed",
    "Closed",
    "Lagged",
    "error_from_reply",
    "PROTOCOL_VERSION",
    "SOCKET_NAME",
    "socket_path_of",
]
