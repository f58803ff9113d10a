"""The conformance cases (tests/conformance/cases/*.json, format in
tests/conformance/README.md) as the Python clients run them: the case
files, the pattern matcher, and the answer rebuilt from a typed outcome.
Not part of the installed package."""

import glob
import json
import os

import agentlog_client as al

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CASES = os.path.join(ROOT, "tests", "conformance", "cases")
NOW = "2030-01-01T00:00:00Z"  # the CLI-side clock; the daemon reads its own
SERVE_ARGS = ("--sweep-every", "0")

_TYPES = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def case_files():
    files = sorted(glob.glob(os.path.join(CASES, "*.json")))
    if not files:
        raise RuntimeError("no conformance cases in %s" % CASES)
    return files


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def mismatch(pattern, actual, where="$"):
    """None if `actual` matches `pattern`, else where and why it does not."""
    if isinstance(pattern, dict):
        if set(pattern) == {"$type"}:
            ok = _TYPES[pattern["$type"]](actual)
            return None if ok else "%s: %r is not of type %s" % (where, actual, pattern["$type"])
        if set(pattern) == {"$contains"}:
            if isinstance(actual, str) and pattern["$contains"] in actual:
                return None
            return "%s: %r does not contain %r" % (where, actual, pattern["$contains"])
        if not isinstance(actual, dict):
            return "%s: expected an object, got %r" % (where, actual)
        for key, sub in pattern.items():
            if sub == {"$absent": True}:
                if key in actual:
                    return "%s.%s: present (%r), expected absent" % (where, key, actual[key])
                continue
            if key not in actual:
                return "%s.%s: missing" % (where, key)
            m = mismatch(sub, actual[key], "%s.%s" % (where, key))
            if m:
                return m
        return None
    if isinstance(pattern, list):
        if not isinstance(actual, list) or len(actual) != len(pattern):
            return "%s: expected %d items, got %r" % (where, len(pattern), actual)
        for i, (p, a) in enumerate(zip(pattern, actual)):
            m = mismatch(p, a, "%s[%d]" % (where, i))
            if m:
                return m
        return None
    if isinstance(pattern, bool) or isinstance(actual, bool) or pattern is None or actual is None:
        same = pattern is actual or (pattern == actual and type(pattern) is type(actual))
    else:
        same = pattern == actual
    return None if same else "%s: expected %r, got %r" % (where, pattern, actual)


def without_id(pattern):
    return {k: v for k, v in pattern.items() if k != "id"}


def answer_of(outcome, exit_status=0):
    """The response a typed outcome stands for: a result (with the exit
    status beside it when not 0) or an exception of this client."""
    if isinstance(outcome, al.AgentlogError):
        expected_class = al._errors.ERRORS_BY_CODE.get(outcome.code, al.AgentlogError)
        if type(outcome) is not expected_class:
            raise AssertionError("code %r raised %s, not %s" % (
                outcome.code, type(outcome).__name__, expected_class.__name__))
        return {"error": {"code": outcome.code, "message": outcome.message,
                          "exit": outcome.exit_status}}
    doc = {"result": outcome}
    if exit_status:
        doc["exit"] = exit_status
    return doc
