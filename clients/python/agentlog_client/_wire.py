"""What the synchronous and the asyncio client share: where the socket is,
how a request line is encoded and a response line decoded.

The protocol is newline-delimited JSON (PROTOCOL.md): one request object per
line, one response per line, in request order. A plain heartbeat, the
request an agent fleet sends most, is encoded from a byte template with the
agent's name JSON-encoded once and cached, in exactly the shape the daemon's
hot path decodes without building a JSON tree.
"""

import json
import os

from ._errors import ProtocolError

SOCKET_NAME = "agentlog.sock"
PROTOCOL_VERSION = 1

# Names are few (one per agent a process drives) and encoding one costs
# more than the rest of the line; a bounded cache keeps a process that
# heartbeats many names from growing without end.
_NAME_CACHE_MAX = 65536
_name_cache = {}

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_loads = json.loads


def socket_path_of(store_dir=None, socket_path=None):
    """The daemon's socket: `socket_path`, else `<store_dir>/agentlog.sock`,
    the store being `store_dir`, `$AGENTLOG_DIR` or `~/.agentlog`."""
    if socket_path is not None:
        return os.fspath(socket_path)
    if store_dir is None:
        store_dir = os.environ.get("AGENTLOG_DIR") or os.path.expanduser("~/.agentlog")
    return os.path.join(os.fspath(store_dir), SOCKET_NAME)


def params_of(**kwargs):
    """Drops arguments left at None, so the daemon applies its defaults."""
    return {k: v for k, v in kwargs.items() if v is not None}


def encode_request(rid, method, params):
    """One request line (bytes, ending in a newline)."""
    doc = {"id": rid, "method": method, "params": params or {}}
    return (_dumps(doc) + "\n").encode("utf-8")


def raw_line(doc):
    """A request given whole: an object (encoded, a newline added) or a line
    (`str` or `bytes`, sent as is)."""
    if isinstance(doc, bytes):
        return doc
    if isinstance(doc, str):
        return doc.encode("utf-8")
    return (_dumps(doc) + "\n").encode("utf-8")


def _name_json(name):
    enc = _name_cache.get(name)
    if enc is None:
        if not isinstance(name, str):
            raise TypeError("an agent name is a str, not %s" % type(name).__name__)
        enc = _dumps(name).encode("utf-8")
        if len(_name_cache) >= _NAME_CACHE_MAX:
            _name_cache.clear()
        _name_cache[name] = enc
    return enc


def encode_heartbeat(rid, name, pid=None, durable=None, at=None):
    """A heartbeat request line; the plain one (name only) from a template."""
    if pid is None and durable is None and at is None:
        return b'{"id":%d,"method":"heartbeat","params":{"name":%s}}\n' % (
            rid,
            _name_json(name),
        )
    return encode_request(rid, "heartbeat", params_of(name=name, pid=pid, durable=durable, at=at))


def heartbeat_reply_prefix(rid, name):
    """What a heartbeat's success reply starts with, byte for byte, up to
    its LSN: `{"id":RID,"result":{"agent":NAME,"lsn":` (the daemon writes
    the keys in this order, PROTOCOL.md; `None` when this client's encoding
    of the name may differ from the daemon's, i.e. it needs escapes)."""
    enc = _name_json(name)
    if b"\\" in enc:
        return None
    return b'{"id":%d,"result":{"agent":%s,"lsn":' % (rid, enc)


def decode_response(line):
    """A response line as a dict; anything else is a `ProtocolError`."""
    try:
        doc = _loads(line)
    except ValueError as e:
        raise ProtocolError("bad response line: %s" % e, "bad_response") from None
    if not isinstance(doc, dict):
        raise ProtocolError("bad response: not an object", "bad_response")
    return doc


def check_hello(server):
    """Refuses a daemon speaking another protocol version."""
    if not isinstance(server, dict) or server.get("protocol") != PROTOCOL_VERSION:
        got = server.get("protocol") if isinstance(server, dict) else server
        raise ProtocolError(
            "daemon speaks protocol %r, this client %d" % (got, PROTOCOL_VERSION),
            "protocol_version",
        )
    return server
