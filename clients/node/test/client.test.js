'use strict';
// The Node client against a real daemon (testing/daemon.js): the registry
// methods, pipelining in order, typed errors, watch as an async iterator,
// waiting reads, and a stopped daemon failing calls with Closed.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const al = require('..');
const { Daemon } = require('../testing/daemon.js');

const at = (sec) => `2026-11-30T12:00:${String(sec).padStart(2, '0')}Z`;

test('the client against one daemon', async (t) => {
  const daemon = await Daemon.start();
  t.after(() => daemon.stop());

  await t.test('hello, register, heartbeat, status, list, get', async () => {
    const c = await al.Client.connect(daemon.store);
    try {
      assert.equal(c.server.protocol, 1);
      assert.equal(typeof c.server.last_lsn, 'number');
      await c.register('js-a', { provider: 'claude', cwd: '/w', pid: 4242, at: at(1) });
      const hb = await c.heartbeat('js-a', { pid: 4242, at: at(2) });
      assert.equal(hb.agent, 'js-a');
      await c.status('js-a', 'busy', { message: 'building', at: at(3) });
      const rows = Object.fromEntries((await c.list()).map((r) => [r.name, r]));
      assert.equal(rows['js-a'].status, 'busy');
      assert.equal((await c.get('js-a')).name, 'js-a');
    } finally {
      c.close();
    }
  });

  await t.test('typed errors, the connection usable after them', async () => {
    const c = await al.Client.connect({ socketPath: path.join(daemon.store, al.SOCKET_NAME) });
    try {
      await assert.rejects(c.heartbeat('js-nobody', { at: at(4) }), (e) => e instanceof al.Refused && e.code === 'refused' && e.exitStatus === 1);
      await assert.rejects(c.get('js-nobody'), al.NotFound);
      await assert.rejects(c.call('no-such-method'), (e) => e instanceof al.ProtocolError && e.code === 'unknown_method' && e.exitStatus === 2);
      await assert.rejects(c.call('heartbeat', { name: 'js-x', at: 'yesterday' }), al.UsageError);
      await c.register('js-pid', { provider: 'codex', cwd: '/w', pid: 1, at: at(4) });
      await assert.rejects(c.heartbeat('js-pid', { pid: 2, at: at(5) }), (e) => e instanceof al.Refused && /pid/.test(e.message));
      assert.equal((await c.hello()).protocol, 1);
      const raw = await c.request({ id: 'raw-1', method: 'nope' });
      assert.equal(raw.id, 'raw-1');
      assert.equal(raw.error.code, 'unknown_method');
    } finally {
      c.close();
    }
  });

  await t.test('concurrent calls and heartbeatMany are pipelined in order', async () => {
    const c = await al.Client.connect(daemon.store);
    try {
      await c.register('js-p', { provider: 'gemini', cwd: '/w', at: at(10) });
      const calls = [];
      for (let i = 0; i < 200; i++) calls.push(c.heartbeat('js-p'));
      calls.splice(100, 0, c.heartbeat('js-ghost').catch((e) => e));
      const out = await Promise.all(calls);
      assert.ok(out[100] instanceof al.Refused);
      const lsns = out.filter((_, i) => i !== 100).map((r) => r.lsn);
      assert.deepEqual(lsns, [...lsns].sort((a, b) => a - b));
      assert.equal(new Set(lsns).size, 200);
      const many = await c.heartbeatMany([...Array(50).fill('js-p'), 'js-ghost', 'js-p']);
      assert.equal(many.length, 52);
      assert.ok(many[50] instanceof al.Refused);
      assert.equal(many[51].agent, 'js-p');
      const durable = await c.heartbeatMany(['js-p', 'js-p'], { durable: true, at: at(11) });
      assert.ok(durable[1].lsn > durable[0].lsn);
      // Answered calls leave the pending queue: it stays bounded however
      // many heartbeats one connection sends.
      for (let i = 0; i < 3000; i++) await c.heartbeat('js-p');
      assert.ok(c._waiting.length - c._head === 0 && c._waiting.length <= 2048, `${c._waiting.length}`);
      const mixed = await c.pipeline([['get', { name: 'js-p' }], ['get', { name: 'js-nobody' }], ['hello']]);
      assert.equal(mixed[0].name, 'js-p');
      assert.ok(mixed[1] instanceof al.NotFound);
      assert.equal(mixed[2].protocol, 1);
    } finally {
      c.close();
    }
  });

  await t.test('names needing escapes round-trip', async () => {
    const c = await al.Client.connect(daemon.store);
    try {
      const name = 'js-"q"\\-é-\u2603';
      await c.register(name, { provider: 'claude', cwd: '/w', at: at(12) });
      assert.equal((await c.heartbeat(name)).agent, name);
      assert.equal((await c.heartbeatMany([name, name]))[1].agent, name);
      await assert.rejects(c.heartbeat(42), TypeError);
      assert.equal((await c.heartbeat(name)).agent, name);
    } finally {
      c.close();
    }
  });

  await t.test('post, paged read, show, presence', async () => {
    const c = await al.Client.connect(daemon.store);
    try {
      await c.register('js-pager', { provider: 'claude', cwd: '/w', at: at(20) });
      await c.register('js-sender', { provider: 'claude', cwd: '/w', at: at(20) });
      const posted = [];
      for (let i = 0; i < 3; i++) posted.push(await c.post('js-sender', `note ${i}`, { to: 'js-pager', at: at(21 + i) }));
      const page = await c.read('js-pager', { limit: 1, at: at(25) });
      assert.deepEqual(page.messages.map((m) => m.body), ['note 0']);
      assert.equal(page.messages[0].id, posted[0].id);
      assert.equal(page.left, 2);
      assert.match(JSON.stringify(await c.show('js-pager', { at: at(26) })), /js-pager/);
      assert.equal(await c.presence('js-pager'), false);
      await assert.rejects(c.show('js-nobody', { at: at(26) }), al.AgentlogError);
    } finally {
      c.close();
    }
  });

  await t.test('a waiting read is woken by a post on another connection', async () => {
    const c = await al.Client.connect(daemon.store);
    const waiter = await al.Client.connect(daemon.store);
    try {
      await c.register('js-waiter', { provider: 'claude', cwd: '/w', at: at(30) });
      await c.register('js-poster', { provider: 'claude', cwd: '/w', at: at(30) });
      const page = waiter.read('js-waiter', { wait: 60, at: at(32) });
      const deadline = Date.now() + 20000;
      while ((await c.hello()).reads_waiting !== 1) {
        assert.ok(Date.now() < deadline, 'the read never waited');
        await new Promise((r) => setTimeout(r, 10));
      }
      const posted = await c.post('js-poster', 'wake up', { to: 'js-waiter', at: at(31) });
      const got = await page;
      assert.equal(got.timed_out, false);
      assert.deepEqual(got.messages.map((m) => m.id), [posted.id]);
    } finally {
      c.close();
      waiter.close();
    }
  });

  await t.test('watch: history then live events, as an async iterator', async () => {
    const c = await al.Client.connect(daemon.store);
    try {
      const first = (await c.register('js-watch', { provider: 'claude', cwd: '/w', at: at(40) })).lsn;
      const w = c.watch({ fromLsn: first, agent: 'js-watch' });
      await w.open();
      assert.equal(w.start, first);
      await c.heartbeat('js-watch', { at: at(41) });
      await c.status('js-watch', 'ready', { at: at(42) });
      const seen = [];
      for await (const ev of w) {
        seen.push(ev);
        if (seen.length === 3) break;
      }
      assert.deepEqual(seen.map((e) => e.kind), ['AgentRegistered', 'Heartbeat', 'StatusChanged']);
      assert.equal(seen[0].lsn, first);
    } finally {
      c.close();
    }
  });
});

test('no socket is NoDaemon', async () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'agentlog-node-'));
  try {
    await assert.rejects(al.Client.connect(d), al.NoDaemon);
  } finally {
    fs.rmSync(d, { recursive: true, force: true });
  }
});

test('a stopped daemon fails calls in flight and later with Closed', async () => {
  const daemon = await Daemon.start();
  const c = await al.Client.connect(daemon.store);
  try {
    await daemon.stop();
    await assert.rejects(c.heartbeat('js-gone'), al.Closed);
    await assert.rejects(c.hello(), al.Closed);
  } finally {
    c.close();
    await daemon.stop();
  }
});
