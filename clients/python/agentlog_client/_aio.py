"""The asyncio client: one connection shared by any number of tasks.

Requests are written as they are made and their answers come back in
request order (PROTOCOL.md), so the connection keeps a queue of futures:
one reader task takes each response line and resolves the oldest waiting
future with it. Calls made concurrently (`asyncio.gather` of heartbeats, or
many tasks of one agent host) are therefore pipelined on one socket with no
extra code, and `heartbeat_many` writes a whole batch in one go. A lost
connection fails every waiting call with `Closed`.
"""

import asyncio
import collections

from . import _wire
from ._errors import Closed, NoDaemon, ProtocolError, Lagged, error_from_reply
from ._sync import watch_item

# The id a raw request accepts in its answer: whatever the line carried.
_ANY_ID = object()

# A response line may be large (`list` of a big fleet, `audit`); the
# daemon's own request limit is 1 MiB, replies have none.
_LIMIT = 1 << 30


async def _all_answers(futs):
    """Every future's response, each one retrieved; the connection's error
    (the first) is raised once all have settled."""
    docs = await asyncio.gather(*futs, return_exceptions=True)
    for d in docs:
        if isinstance(d, BaseException):
            raise d
    return docs


class AsyncClient:
    """`await AsyncClient.connect(store_dir)`, or `async with AsyncClient(...)`."""

    def __init__(self, store_dir=None, socket_path=None):
        self.socket_path = _wire.socket_path_of(store_dir, socket_path)
        self.server = None
        self._next_id = 1
        self._waiting = collections.deque()
        self._reader = self._writer = self._task = None
        self._closed_error = None

    @classmethod
    async def connect(cls, store_dir=None, socket_path=None):
        c = cls(store_dir, socket_path)
        await c.open()
        return c

    async def open(self):
        """Connects and says `hello` (kept in `server`)."""
        try:
            self._reader, self._writer = await asyncio.open_unix_connection(
                self.socket_path, limit=_LIMIT
            )
        except (FileNotFoundError, ConnectionRefusedError) as e:
            raise NoDaemon(
                "no agentlog daemon at %s: %s" % (self.socket_path, e.strerror), "no_daemon"
            ) from None
        self._task = asyncio.ensure_future(self._read_loop())
        try:
            self.server = _wire.check_hello(await self.call("hello"))
        except BaseException:
            await self.close()
            raise
        return self

    async def close(self):
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except (ConnectionError, OSError):
                pass
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        self._fail_all(Closed("the client closed the connection", "closed"))

    async def __aenter__(self):
        if self._writer is None:
            await self.open()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    def _fail_all(self, error):
        self._closed_error = self._closed_error or error
        while self._waiting:
            _, fut = self._waiting.popleft()
            if not fut.done():
                fut.set_exception(self._closed_error)

    async def _read_loop(self):
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    self._fail_all(Closed("the daemon closed the connection", "closed"))
                    return
                if line.strip() == b"":
                    continue
                doc = _wire.decode_response(line)
                if not self._waiting:
                    if "error" in doc and doc.get("id") is None:
                        # The daemon's word before it closes (idle timeout,
                        # shutdown): every later call gets it.
                        self._fail_all(error_from_reply(doc))
                        continue
                    self._fail_all(ProtocolError("a response nobody asked for: %r" % doc,
                                                 "bad_response"))
                    return
                rid, fut = self._waiting.popleft()
                if (rid is not _ANY_ID and doc.get("id") != rid
                        and not ("error" in doc and doc.get("id") is None)):
                    fut.set_exception(ProtocolError(
                        "response id %r for request %r" % (doc.get("id"), rid), "bad_response"))
                elif not fut.done():
                    fut.set_result(doc)
        except (ConnectionError, OSError) as e:
            self._fail_all(Closed("connection lost: %s" % e, "closed"))
        except ProtocolError as e:
            self._fail_all(e)

    def _send(self, line, rid):
        if self._closed_error is not None:
            raise self._closed_error
        fut = asyncio.get_event_loop().create_future()
        self._waiting.append((rid, fut))
        self._writer.write(line)
        return fut

    async def _drain(self):
        # Only waits when the socket's buffer is above its high-water mark.
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as e:
            # Every waiting call (this one's included) now fails with it.
            self._fail_all(Closed("connection lost: %s" % e, "closed"))

    def _take_id(self):
        rid = self._next_id
        self._next_id = rid + 1
        return rid

    async def call_with_exit(self, method, **params):
        """Like `call`, returning `(result, exit)` (see the synchronous client)."""
        rid = self._take_id()
        fut = self._send(_wire.encode_request(rid, method, params), rid)
        await self._drain()
        doc = await fut
        if "error" in doc:
            raise error_from_reply(doc)
        return doc.get("result"), doc.get("exit", 0)

    async def call(self, method, **params):
        """Sends one request and returns its `result`, or raises its error."""
        return (await self.call_with_exit(method, **params))[0]

    async def request(self, doc):
        """The raw protocol: `doc` (an object, its `id` used as is, or a
        line as `str`/`bytes`) sent in order with the other calls; returns
        the whole response object, errors included."""
        fut = self._send(_wire.raw_line(doc), _ANY_ID)
        await self._drain()
        return await fut

    async def pipeline(self, requests):
        """`(method, params)` pairs sent at once; returns each result or the
        exception it raised, in order."""
        futs = []
        for method, params in requests:
            rid = self._take_id()
            futs.append(self._send(_wire.encode_request(rid, method, params), rid))
        await self._drain()
        return [error_from_reply(doc) if "error" in doc else doc.get("result")
                for doc in await _all_answers(futs)]

    # -- the registry -----------------------------------------------------

    async def hello(self):
        return await self.call("hello")

    async def register(self, name, provider, cwd, pid=None, pid_start_time=None, role=None,
                       parent=None, project_root=None, log_path=None, host_mode=None,
                       short_id=None, at=None):
        return await self.call("register", **_wire.params_of(
            name=name, provider=provider, cwd=cwd, pid=pid,
            pid_start_time=pid_start_time, role=role, parent=parent,
            project_root=project_root, log_path=log_path, host_mode=host_mode,
            short_id=short_id, at=at))

    async def heartbeat(self, name, pid=None, durable=None, at=None):
        """One heartbeat; returns `{"agent", "lsn"}`."""
        rid = self._take_id()
        fut = self._send(_wire.encode_heartbeat(rid, name, pid, durable, at), rid)
        await self._drain()
        doc = await fut
        if "error" in doc:
            raise error_from_reply(doc)
        return doc["result"]

    async def heartbeat_many(self, names, pid=None, durable=None, at=None):
        """Every name's heartbeat in one write; each result or exception, in order."""
        futs = []
        lines = []
        for name in names:
            rid = self._take_id()
            lines.append(_wire.encode_heartbeat(rid, name, pid, durable, at))
            futs.append(self._send(b"", rid))
        if self._closed_error is None:
            self._writer.write(b"".join(lines))
        await self._drain()
        return [error_from_reply(doc) if "error" in doc else doc["result"]
                for doc in await _all_answers(futs)]

    async def status(self, name, status, message=None, at=None):
        return await self.call("status", **_wire.params_of(
            name=name, status=status, message=message, at=at))

    async def remove(self, name, at=None):
        return await self.call("remove", **_wire.params_of(name=name, at=at))

    async def post(self, sender, text, to=None, category=None, priority=None, privacy=None,
                   project_root=None, ttl_hours=None, request_id=None, at=None):
        return await self.call("post", **_wire.params_of(
            **{"from": sender}, text=text, to=to, category=category,
            priority=priority, privacy=privacy, project_root=project_root,
            ttl_hours=ttl_hours, request_id=request_id, at=at))

    async def read(self, name, project_root=None, budget=None, limit=None, at=None, wait=None):
        """Unread messages of `name`, marked read; `wait` blocks (no timeout
        here: wrap in `asyncio.wait_for` to bound it)."""
        return await self.call("read", **_wire.params_of(
            name=name, project_root=project_root, budget=budget, limit=limit, at=at,
            wait=wait))

    async def show(self, name, at=None):
        return await self.call("show", **_wire.params_of(name=name, at=at))

    async def presence(self, name):
        return (await self.call_with_exit("presence", name=name))[1] == 0

    async def list(self, all=False):
        result = await self.call("list", **_wire.params_of(all=True if all else None))
        if isinstance(result, dict) and "agents" in result:
            return result["agents"]
        return result

    async def get(self, name):
        return await self.call("get", name=name)

    async def audit(self, name):
        return await self.call("audit", name=name)

    def watch(self, from_lsn=None, agent=None, kinds=None, changes=False):
        """An async iterator over events (or changes), on its own connection:
        `async with client.watch(...) as w: async for item in w: ...`."""
        return AsyncWatch(self.socket_path, _wire.params_of(
            **{"from": from_lsn}, agent=agent, kinds=kinds,
            changes=True if changes else None))


class AsyncWatch:
    """One watch stream on its own connection. `start` is the first LSN."""

    def __init__(self, socket_path, params):
        self.socket_path = socket_path
        self._params = params
        self._reader = self._writer = None
        self.start = None

    async def open(self):
        try:
            self._reader, self._writer = await asyncio.open_unix_connection(
                self.socket_path, limit=_LIMIT)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            raise NoDaemon("no agentlog daemon at %s: %s" % (self.socket_path, e.strerror),
                           "no_daemon") from None
        self._writer.write(_wire.encode_request(1, "hello", {})
                           + _wire.encode_request(2, "watch", self._params))
        _wire.check_hello((await self._next_doc()).get("result"))
        first = await self._next_doc()
        if "error" in first:
            await self.close()
            raise error_from_reply(first)
        self.start = (first.get("result") or {}).get("from")
        return self

    async def _next_doc(self):
        line = await self._reader.readline()
        if not line:
            raise Closed("the daemon closed the connection", "closed")
        return _wire.decode_response(line)

    async def close(self):
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except (ConnectionError, OSError):
                pass

    async def __aenter__(self):
        if self._writer is None:
            await self.open()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self._writer is None:
            await self.open()
        while True:
            try:
                doc = await self._next_doc()
            except Closed:
                await self.close()
                raise StopAsyncIteration from None
            try:
                item = watch_item(doc)
            except Lagged:
                await self.close()
                raise
            if item is not None:
                return item
