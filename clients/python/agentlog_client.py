"""A client for the agentlog daemon (`agentlog serve`), standard library only.

One file, no dependencies, Python 3.8+. It speaks the newline-delimited JSON
protocol of PROTOCOL.md over the store's Unix socket, so a Python agent can
heartbeat without starting a process:

    from agentlog_client import Client

    with Client("/home/me/.agentlog") as c:
        c.register("coder-1", provider="codex", cwd="/work/repo", pid=os.getpid())
        c.heartbeat("coder-1", pid=os.getpid())
        c.post("coder-1", "rebase on main", to="planner")
        for event in c.watch(from_lsn=1, agent="coder-1"):
            print(event)

Every method sends one request and waits for its response. Errors from the
daemon raise a subclass of `AgentlogError` chosen by the protocol's stable
error code; `NoDaemon` says nobody serves the store (no socket, or connection
refused), which is different from a daemon that is slow to answer.
"""

import itertools
import json
import os
import socket

__all__ = [
    "Client",
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
]

SOCKET_NAME = "agentlog.sock"
PROTOCOL_VERSION = 1


class AgentlogError(Exception):
    """An error the daemon answered with, or a failure to talk to it."""

    def __init__(self, message, code=None, exit_status=1):
        super().__init__(message)
        self.message = message
        self.code = code
        self.exit_status = exit_status


class NoDaemon(AgentlogError):
    """No daemon serves the store: no socket file, or the connection was refused."""


class ProtocolError(AgentlogError):
    """The request was not understood (parse_error, bad_request, unknown_method,
    line_too_long), or the response was not valid protocol."""


class UsageError(AgentlogError):
    """Parameters the CLI would reject too (code `usage`)."""


class Refused(AgentlogError):
    """The registry refused the command: unknown agent, wrong pid, finished agent…"""


class NotFound(AgentlogError):
    """`get` of an agent that does not exist."""


class Forbidden(AgentlogError):
    """A write from a peer that may only observe."""


class Failed(AgentlogError):
    """Anything else the daemon reports as failed (I/O, damage found)."""


class Closed(AgentlogError):
    """The daemon closed the connection (idle timeout, shutdown, too many connections)."""


class Lagged(AgentlogError):
    """A watch fell behind its buffer; resume with `watch(from_lsn=e.resume_from)`."""

    def __init__(self, resume_from):
        super().__init__(
            "watch lagged behind; resume from lsn %d" % resume_from, code="lagged"
        )
        self.resume_from = resume_from


_ERRORS = {
    "parse_error": ProtocolError,
    "bad_request": ProtocolError,
    "unknown_method": ProtocolError,
    "line_too_long": ProtocolError,
    "usage": UsageError,
    "refused": Refused,
    "not_found": NotFound,
    "forbidden": Forbidden,
    "failed": Failed,
    "too_many_connections": Closed,
    "idle_timeout": Closed,
    "shutting_down": Closed,
}


def _error_from(doc):
    err = doc.get("error") or {}
    code = err.get("code")
    cls = _ERRORS.get(code, AgentlogError)
    return cls(err.get("message", "unknown error"), code, err.get("exit", 1))


def _params(**kwargs):
    """Drops arguments left at None, so the daemon applies its defaults."""
    return {k: v for k, v in kwargs.items() if v is not None}


class Client:
    """A connection to the daemon serving `store_dir` (or an explicit socket path)."""

    def __init__(self, store_dir=None, socket_path=None, timeout=30.0):
        if socket_path is None:
            if store_dir is None:
                store_dir = os.environ.get("AGENTLOG_DIR") or os.path.expanduser(
                    "~/.agentlog"
                )
            socket_path = os.path.join(store_dir, SOCKET_NAME)
        self.socket_path = socket_path
        self._ids = itertools.count(1)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(socket_path)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            sock.close()
            raise NoDaemon(
                "no agentlog daemon at %s: %s" % (socket_path, e.strerror), "no_daemon"
            ) from None
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self._file = sock.makefile("rwb", buffering=64 * 1024)
        self.server = self.call("hello")
        if self.server.get("protocol") != PROTOCOL_VERSION:
            raise ProtocolError(
                "daemon speaks protocol %r, this client %d"
                % (self.server.get("protocol"), PROTOCOL_VERSION)
            )

    # -- plumbing ---------------------------------------------------------

    def close(self):
        try:
            self._file.close()
        finally:
            self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _send(self, method, params):
        rid = next(self._ids)
        line = json.dumps({"id": rid, "method": method, "params": params or {}})
        self._file.write(line.encode("utf-8") + b"\n")
        return rid

    def _recv(self):
        line = self._file.readline()
        if not line:
            raise Closed("the daemon closed the connection", "closed")
        try:
            doc = json.loads(line)
        except ValueError as e:
            raise ProtocolError("bad response line: %s" % e) from None
        if not isinstance(doc, dict):
            raise ProtocolError("bad response: not an object")
        return doc

    def call(self, method, **params):
        """Sends one request and returns its `result`, or raises its error."""
        return self.call_with_exit(method, **params)[0]

    def call_with_exit(self, method, **params):
        """Like `call`, returning `(result, exit)`: `exit` is the CLI's exit
        status for a successful answer (1 for a `verify` that found damage, or
        a `presence` that is not live), else 0."""
        rid = self._send(method, params)
        self._file.flush()
        doc = self._recv()
        if "error" in doc:
            raise _error_from(doc)
        if doc.get("id") != rid:
            raise ProtocolError("response id %r for request %r" % (doc.get("id"), rid))
        return doc.get("result"), doc.get("exit", 0)

    def pipeline(self, requests):
        """Sends many `(method, params)` at once, then reads their responses in
        order. Returns a list holding each result, or the exception it raised."""
        ids = [self._send(m, p) for m, p in requests]
        self._file.flush()
        out = []
        for rid in ids:
            doc = self._recv()
            if doc.get("id") != rid:
                raise ProtocolError("response id %r for request %r" % (doc.get("id"), rid))
            out.append(_error_from(doc) if "error" in doc else doc.get("result"))
        return out

    # -- the registry -----------------------------------------------------

    def register(self, name, provider, cwd, pid=None, pid_start_time=None, role=None,
                 parent=None, project_root=None, log_path=None, host_mode=None,
                 short_id=None, at=None):
        return self.call("register", **_params(
            name=name, provider=provider, cwd=cwd, pid=pid,
            pid_start_time=pid_start_time, role=role, parent=parent,
            project_root=project_root, log_path=log_path, host_mode=host_mode,
            short_id=short_id, at=at))

    def heartbeat(self, name, pid=None, durable=None, at=None):
        return self.call("heartbeat", **_params(name=name, pid=pid, durable=durable, at=at))

    def status(self, name, status, message=None, at=None):
        return self.call("status", **_params(name=name, status=status, message=message, at=at))

    def post(self, sender, text, to=None, category=None, priority=None, privacy=None,
             project_root=None, ttl_hours=None, request_id=None, at=None):
        """Posts a message; `to=None` broadcasts. Returns the daemon's result
        (the message id is `result["id"]`)."""
        return self.call("post", **_params(
            **{"from": sender}, text=text, to=to, category=category,
            priority=priority, privacy=privacy, project_root=project_root,
            ttl_hours=ttl_hours, request_id=request_id, at=at))

    def read(self, name, project_root=None, budget=None, limit=None, at=None, wait=None):
        """Returns the unread messages of `name` and marks them read. With
        `budget` (bytes) or `limit` (count) it returns a page, oldest first
        (always at least one message), and `result["left"]` counts the rest.
        With `wait` (seconds) it first blocks until `name` has unread mail or
        the time is up; then `result["timed_out"]` is true and the page empty.
        The daemon wakes it on the commit that brings the mail (no polling)."""
        params = _params(name=name, project_root=project_root, budget=budget,
                         limit=limit, at=at, wait=wait)
        if wait is None:
            return self.call("read", **params)
        # The answer may take the whole wait: the socket's timeout must not
        # fire first.
        saved = self._sock.gettimeout()
        if saved is not None:
            self._sock.settimeout(saved + float(wait))
        try:
            return self.call("read", **params)
        finally:
            self._sock.settimeout(saved)

    def show(self, name, at=None):
        """One agent described: every field, its life, unread and sent counts,
        the LSN of its last event. Raises `Refused` for an unknown name."""
        return self.call("show", **_params(name=name, at=at))

    def presence(self, name):
        """Whether the agent's transport is live (not finished, same process).
        Returns True or False."""
        return self.call_with_exit("presence", name=name)[1] == 0

    def list(self, all=False):
        """The registry's rows (`all=True` includes finished agents)."""
        result = self.call("list", **_params(all=True if all else None))
        if isinstance(result, dict) and "agents" in result:
            return result["agents"]
        return result

    def get(self, name):
        """One agent's row; raises `NotFound` for an unknown name."""
        return self.call("get", name=name)

    def audit(self, name):
        return self.call("audit", name=name)

    def watch(self, from_lsn=None, agent=None, kinds=None, changes=False):
        """Iterates over events (or registry changes with `changes=True`), the
        history from `from_lsn` first, then live ones as they commit. Raises
        `Lagged` (with `resume_from`) if the watch fell behind. The watch takes
        a connection of its own, so this client stays usable."""
        return _Watch(self.socket_path, _params(
            **{"from": from_lsn}, agent=agent, kinds=kinds,
            changes=True if changes else None))


class _Watch:
    """An iterator over one watch stream, on its own connection."""

    def __init__(self, socket_path, params):
        self._client = Client(socket_path=socket_path, timeout=None)
        self._rid = self._client._send("watch", params)
        self._client._file.flush()
        first = self._client._recv()
        if "error" in first:
            self._client.close()
            raise _error_from(first)
        self.start = (first.get("result") or {}).get("from")

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            try:
                doc = self._client._recv()
            except Closed:
                self.close()
                raise StopIteration from None
            if "lagged" in doc:
                self.close()
                raise Lagged(doc["lagged"]["resume_from"])
            if "event" in doc:
                return doc["event"]
            if "change" in doc:
                return doc["change"]
            if "error" in doc:
                # An item that failed to decode: reported, the stream goes on.
                return {"error": doc["error"]}

    def close(self):
        self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
