"""The typed errors of the agentlog protocol (PROTOCOL.md, "Errors").

Every error the daemon answers with becomes one subclass of `AgentlogError`,
chosen by the protocol's stable `code`; the daemon's `message` and the CLI's
exit status for it are kept on the exception. `NoDaemon` is raised before
any request: nobody serves the store (no socket, or connection refused),
which a caller treats differently from a daemon that is slow or failing.
"""

__all__ = [
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
]


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


ERRORS_BY_CODE = {
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


def error_from_reply(doc):
    """The exception for a response object carrying `error`. A code this
    client does not know (a newer daemon's) is a plain `AgentlogError`
    carrying that code."""
    err = doc.get("error")
    if not isinstance(err, dict):
        err = {}
    code = err.get("code")
    cls = ERRORS_BY_CODE.get(code, AgentlogError)
    return cls(err.get("message", "unknown error"), code, err.get("exit", 1))
