"""The synchronous client: one blocking connection to `agentlog serve`.

Each method sends one request and waits for its answer, except the
pipelined ones (`heartbeat_many`, `pipeline`), which write every request in
one `sendall` and then read the answers, which come back in request order.
The connection reads into its own buffer and splits lines there, and its
timeout is the kernel's (SO_RCVTIMEO), not a poll before each call, so a
heartbeat costs one `send` and (usually) one `recv`: two system calls. A
heartbeat's success reply, whose shape is fixed, is read off its bytes
without building a JSON tree; any other reply is decoded.
Errors from the daemon raise the `AgentlogError` subclass of their code.
"""

import socket
import struct

from . import _wire
from ._errors import (
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

# Below glibc's mmap threshold (128 KiB): a larger `recv` buffer is mapped
# and unmapped on every call when Python shrinks it to the bytes received,
# which cost a heartbeat ~4x the client's CPU (measured: 16 µs vs 3.8 µs).
_RECV = 64 * 1024


def _set_kernel_timeout(sock, seconds):
    """SO_RCVTIMEO and SO_SNDTIMEO of `seconds` (`None`: none)."""
    if seconds is None:
        sec = usec = 0
    else:
        sec = int(seconds)
        usec = int((seconds - sec) * 1e6)
        if sec == 0 and usec == 0:
            usec = 1
    tv = struct.pack("ll", sec, usec)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)


class Client:
    """A connection to the daemon serving `store_dir` (or an explicit socket
    path). `timeout` (seconds, `None` for none) bounds each wait for the
    daemon; the connection's first request is `hello`, kept in `server`."""

    def __init__(self, store_dir=None, socket_path=None, timeout=30.0):
        self.socket_path = _wire.socket_path_of(store_dir, socket_path)
        self._next_id = 1
        self._buf = bytearray()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        self._timeout = timeout
        try:
            sock.connect(self.socket_path)
            # A Python-level timeout polls before every send and recv (two
            # more system calls per request): the kernel keeps the timeout
            # instead, and a blocking call that runs out raises EAGAIN.
            sock.settimeout(None)
            _set_kernel_timeout(sock, timeout)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            sock.close()
            raise NoDaemon(
                "no agentlog daemon at %s: %s" % (self.socket_path, e.strerror), "no_daemon"
            ) from None
        except OSError:
            sock.close()
            raise
        self._sock = sock
        try:
            self.server = _wire.check_hello(self.call("hello"))
        except BaseException:
            sock.close()
            raise

    # -- plumbing ---------------------------------------------------------

    def close(self):
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _take_id(self):
        rid = self._next_id
        self._next_id = rid + 1
        return rid

    def _sendall(self, data):
        try:
            self._sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError) as e:
            # A daemon that refuses a connection (too many of its class,
            # shutting down) writes its reason and closes, perhaps before
            # this write: the reason waits unread and is the real error.
            reason = self._refusal()
            if reason is not None:
                raise reason from None
            raise Closed("the daemon closed the connection: %s" % e, "closed") from None
        except BlockingIOError:
            raise TimeoutError("the daemon took no request within %s s" % self._timeout) \
                from None

    def _refusal(self):
        """The error line a closing daemon left unread, if any."""
        try:
            doc = _wire.decode_response(self._read_line())
        except Exception:
            return None
        if isinstance(doc, dict) and "error" in doc:
            return error_from_reply(doc)
        return None

    def _read_line(self):
        buf = self._buf
        end = buf.find(b"\n")
        while end < 0:
            start = len(buf)
            try:
                chunk = self._sock.recv(_RECV)
            except ConnectionResetError as e:
                raise Closed("the daemon closed the connection: %s" % e, "closed") from None
            except BlockingIOError:
                raise TimeoutError("no answer from the daemon within %s s" % self._timeout) \
                    from None
            if not chunk:
                raise Closed("the daemon closed the connection", "closed")
            buf += chunk
            end = buf.find(b"\n", start)
        line = bytes(buf[:end])
        del buf[: end + 1]
        return line

    def _recv(self):
        return _wire.decode_response(self._read_line())

    def _answer(self, rid):
        doc = self._recv()
        if doc.get("id") != rid:
            if "error" in doc and doc.get("id") is None:
                # Sent before the daemon closed the connection (PROTOCOL.md).
                raise error_from_reply(doc)
            raise ProtocolError(
                "response id %r for request %r" % (doc.get("id"), rid), "bad_response"
            )
        return doc

    def call(self, method, **params):
        """Sends one request and returns its `result`, or raises its error."""
        return self.call_with_exit(method, **params)[0]

    def call_with_exit(self, method, **params):
        """Like `call`, returning `(result, exit)`: `exit` is the CLI's exit
        status for a successful answer (1 for a `verify` that found damage, or
        a `presence` that is not live), else 0."""
        rid = self._take_id()
        self._sendall(_wire.encode_request(rid, method, params))
        doc = self._answer(rid)
        if "error" in doc:
            raise error_from_reply(doc)
        return doc.get("result"), doc.get("exit", 0)

    def request(self, doc):
        """Sends `doc` (a whole request object, `id` included, used as is; or
        a line as `str`/`bytes`, sent byte for byte) and returns the whole
        response object, errors included: the raw protocol, for tools and
        conformance tests."""
        self._sendall(_wire.raw_line(doc))
        return self._recv()

    def pipeline(self, requests):
        """Sends many `(method, params)` at once, then reads their responses in
        order. Returns a list holding each result, or the exception it raised."""
        ids = []
        lines = []
        for method, params in requests:
            rid = self._take_id()
            ids.append(rid)
            lines.append(_wire.encode_request(rid, method, params))
        self._sendall(b"".join(lines))
        out = []
        for rid in ids:
            doc = self._answer(rid)
            out.append(error_from_reply(doc) if "error" in doc else doc.get("result"))
        return out

    # -- the registry -----------------------------------------------------

    def hello(self):
        """The daemon's `hello`: protocol, store, last LSN, who you are."""
        return self.call("hello")

    def register(self, name, provider, cwd, pid=None, pid_start_time=None, role=None,
                 parent=None, project_root=None, log_path=None, host_mode=None,
                 short_id=None, at=None):
        return self.call("register", **_wire.params_of(
            name=name, provider=provider, cwd=cwd, pid=pid,
            pid_start_time=pid_start_time, role=role, parent=parent,
            project_root=project_root, log_path=log_path, host_mode=host_mode,
            short_id=short_id, at=at))

    def heartbeat(self, name, pid=None, durable=None, at=None):
        """One heartbeat; returns `{"agent", "lsn"}`. Lazy (answered once
        appended) unless `durable=True` (answered after its fsync)."""
        rid = self._next_id
        self._next_id = rid + 1
        self._sendall(_wire.encode_heartbeat(rid, name, pid, durable, at))
        return self._heartbeat_answer(rid, name)

    def _heartbeat_answer(self, rid, name):
        line = self._read_line()
        # The daemon's success reply has one shape: read its LSN off the
        # bytes instead of building a JSON tree (anything else is decoded).
        prefix = _wire.heartbeat_reply_prefix(rid, name)
        if prefix is not None and line.startswith(prefix) and line.endswith(b"}}"):
            try:
                return {"agent": name, "lsn": int(line[len(prefix):-2])}
            except ValueError:
                pass
        doc = _wire.decode_response(line)
        if doc.get("id") != rid:
            if "error" in doc and doc.get("id") is None:
                raise error_from_reply(doc)
            raise ProtocolError(
                "response id %r for request %r" % (doc.get("id"), rid), "bad_response"
            )
        if "error" in doc:
            raise error_from_reply(doc)
        return doc["result"]

    def heartbeat_many(self, names, pid=None, durable=None, at=None):
        """Heartbeats every name of `names` in one pipelined write; returns,
        in order, each one's `{"agent", "lsn"}` or the exception it got."""
        first = self._next_id
        lines = [_wire.encode_heartbeat(first + i, n, pid, durable, at)
                 for i, n in enumerate(names)]
        self._next_id = first + len(lines)
        self._sendall(b"".join(lines))
        out = []
        for i, name in enumerate(names):
            try:
                out.append(self._heartbeat_answer(first + i, name))
            except (Refused, UsageError, NotFound, Forbidden, Failed) as e:
                out.append(e)
            except ProtocolError as e:
                if e.code == "bad_response":
                    raise
                out.append(e)
        return out

    def status(self, name, status, message=None, at=None):
        return self.call("status", **_wire.params_of(
            name=name, status=status, message=message, at=at))

    def remove(self, name, at=None):
        """Removes the agent from the registry (its history stays)."""
        return self.call("remove", **_wire.params_of(name=name, at=at))

    def post(self, sender, text, to=None, category=None, priority=None, privacy=None,
             project_root=None, ttl_hours=None, request_id=None, at=None):
        """Posts a message; `to=None` broadcasts. Returns the daemon's result
        (the message id is `result["id"]`)."""
        return self.call("post", **_wire.params_of(
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
        params = _wire.params_of(name=name, project_root=project_root, budget=budget,
                                 limit=limit, at=at, wait=wait)
        if wait is None:
            return self.call("read", **params)
        # The answer may take the whole wait: the socket's timeout must not
        # fire first.
        saved = self._timeout
        if saved is not None:
            self._timeout = saved + float(wait)
            _set_kernel_timeout(self._sock, self._timeout)
        try:
            return self.call("read", **params)
        finally:
            self._timeout = saved
            _set_kernel_timeout(self._sock, saved)

    def show(self, name, at=None):
        """One agent described: every field, its life, unread and sent counts,
        the LSN of its last event. Raises `Refused` for an unknown name."""
        return self.call("show", **_wire.params_of(name=name, at=at))

    def presence(self, name):
        """Whether the agent's transport is live (not finished, same process).
        Returns True or False."""
        return self.call_with_exit("presence", name=name)[1] == 0

    def list(self, all=False):
        """The registry's rows (`all=True` includes finished agents)."""
        result = self.call("list", **_wire.params_of(all=True if all else None))
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
        return Watch(self.socket_path, _wire.params_of(
            **{"from": from_lsn}, agent=agent, kinds=kinds,
            changes=True if changes else None))


def watch_item(doc):
    """The item a watch line carries: an event, a change, `present`, or a
    per-item error as `{"error": …}`; `None` for a line that is none of
    these. `Lagged` is raised."""
    if "event" in doc:
        return doc["event"]
    if "change" in doc:
        return doc["change"]
    if "present" in doc:
        return {"present": doc["present"]}
    if "compacted" in doc:
        # The watch began inside a compacted range: the rows to restart
        # from (PROTOCOL.md, "Watch").
        return {"compacted": doc["compacted"]}
    if "lagged" in doc:
        raise Lagged(doc["lagged"]["resume_from"])
    if "error" in doc:
        # An item that failed to decode: reported, the stream goes on.
        return {"error": doc["error"]}
    return None


class Watch:
    """An iterator over one watch stream, on its own connection. `start` is
    the first LSN the daemon will send."""

    def __init__(self, socket_path, params):
        self._client = Client(socket_path=socket_path, timeout=None)
        rid = self._client._take_id()
        self._client._sendall(_wire.encode_request(rid, "watch", params))
        first = self._client._recv()
        if "error" in first:
            self._client.close()
            raise error_from_reply(first)
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
            try:
                item = watch_item(doc)
            except Lagged:
                self.close()
                raise
            if item is not None:
                return item

    def close(self):
        self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
