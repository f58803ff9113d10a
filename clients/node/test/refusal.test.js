'use strict';
// A daemon that refuses a connection writes its reason and closes before
// reading anything: the client's first write then fails (EPIPE), and the
// client must still report the daemon's reason, not "write EPIPE". The
// daemon here is a raw socket server doing just that.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const al = require('..');

test('a refusal written before the first request is the error reported', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentlog-refusal-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const socketPath = path.join(dir, al.SOCKET_NAME);
  const reason = 'too many writer connections (3 open): try again later';
  const line = JSON.stringify({ id: null, error: { code: 'too_many_connections', message: reason }, exit: 1 }) + '\n';
  // Paused: nothing the client sends is ever read, as the daemon's refusal.
  const server = net.createServer({ pauseOnConnect: true }, (s) => {
    s.end(line);
    s.destroy();
  });
  await new Promise((resolve) => server.listen(socketPath, resolve));
  t.after(() => server.close());
  // The race is the client's write against the server's close: many tries.
  for (let i = 0; i < 40; i++) {
    await assert.rejects(
      al.Client.connect({ socketPath }),
      (e) => e instanceof al.Closed && e.code === 'too_many_connections' && e.message === reason,
    );
  }
});
