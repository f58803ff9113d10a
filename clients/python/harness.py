"""The test suites' daemon: a real `agentlog serve` on a fresh store in a
temporary directory, stopped (SIGTERM, then SIGKILL) whatever happens.

The binary is $AGENTLOG_BIN, else target/release/agentlog of this checkout;
words of $AGENTLOG_SERVE_ARGS are added to `serve` (tests/cluster/daemon.rs
runs the suites against a replicated daemon with `--nats URLS --stream
FLEET`). The clock is fixed with AGENTLOG_NOW, so nothing depends on the
date the tests run. Not part of the installed package.
"""

import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time

import agentlog_client as al

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("AGENTLOG_BIN") or os.path.join(ROOT, "target", "release", "agentlog")
# A replica (`serve --nats`) answers a lazy heartbeat with its batch's lsn
# (docs/scaling.md §5).
REPLICATED = "--nats" in os.environ.get("AGENTLOG_SERVE_ARGS", "")


class Daemon:
    """A real `agentlog serve` on a fresh store, its clock at `now`."""

    def __init__(self, now="2026-11-30T12:00:00Z", serve_args=(), local=False):
        """`local`: a local daemon even when $AGENTLOG_SERVE_ARGS asks for
        a replica (the conformance cases are the local protocol's)."""
        if not os.path.exists(BIN):
            raise RuntimeError("no agentlog binary at %s: build it first "
                               "(cargo build --release) or set AGENTLOG_BIN" % BIN)
        self.dir = tempfile.mkdtemp(prefix="agentlog-py-")
        self.store = os.path.join(self.dir, "store")
        env = dict(os.environ, AGENTLOG_NOW=now)
        env.pop("AGENTLOG_DIR", None)
        subprocess.run([BIN, "--dir", self.store, "init"], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        extra = [] if local else shlex.split(os.environ.get("AGENTLOG_SERVE_ARGS", ""))
        extra += list(serve_args)
        self.proc = subprocess.Popen([BIN, "--dir", self.store, "serve"] + extra, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while True:
            try:
                al.Client(self.store).close()
                return
            except al.NoDaemon:
                if self.proc.poll() is not None:
                    err = self.proc.stderr.read().decode()
                    shutil.rmtree(self.dir, ignore_errors=True)
                    raise RuntimeError("daemon exited: %s" % err)
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("daemon did not answer within 20 s")
                time.sleep(0.02)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)
