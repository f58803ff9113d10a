'use strict';
// The test suites' daemon: a real `agentlog serve` on a fresh store in a
// temporary directory, stopped (SIGTERM, then SIGKILL) whatever happens.
// The binary is $AGENTLOG_BIN, else target/release/agentlog of this
// checkout; the clock is fixed with AGENTLOG_NOW. Not part of the package.

const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Client, NoDaemon } = require('..');

const ROOT = path.resolve(__dirname, '..', '..', '..');
const BIN = process.env.AGENTLOG_BIN || path.join(ROOT, 'target', 'release', 'agentlog');

class Daemon {
  static async start(now = '2026-11-30T12:00:00Z') {
    if (!fs.existsSync(BIN)) {
      throw new Error(`no agentlog binary at ${BIN}: build it first (cargo build --release) or set AGENTLOG_BIN`);
    }
    const d = new Daemon();
    d.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentlog-node-'));
    d.store = path.join(d.dir, 'store');
    const env = { ...process.env, AGENTLOG_NOW: now };
    delete env.AGENTLOG_DIR;
    execFileSync(BIN, ['--dir', d.store, 'init'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    d.stderr = '';
    d.proc = spawn(BIN, ['--dir', d.store, 'serve', '--sweep-every', '0'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    d.proc.stderr.on('data', (b) => { d.stderr += b; });
    d.exited = new Promise((resolve) => d.proc.once('exit', (code, sig) => resolve({ code, sig })));
    const deadline = Date.now() + 20000;
    for (;;) {
      try {
        (await Client.connect(d.store)).close();
        return d;
      } catch (e) {
        if (!(e instanceof NoDaemon)) throw e;
        if (d.proc.exitCode !== null) throw new Error(`daemon exited: ${d.stderr}`);
        if (Date.now() > deadline) {
          await d.stop();
          throw new Error('daemon did not answer within 20 s');
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  }

  async stop() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill('SIGTERM');
      const timer = setTimeout(() => this.proc.kill('SIGKILL'), 20000);
      await this.exited;
      clearTimeout(timer);
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

module.exports = { Daemon, BIN, ROOT };
