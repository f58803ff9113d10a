'use strict';
// The protocol's conformance cases (tests/conformance/cases) through the
// Node client, each case file against its own fresh daemon.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const al = require('..');
const { Daemon } = require('../testing/daemon.js');
const cf = require('../testing/conformance.js');

function check(name, i, pattern, answer) {
  const m = cf.mismatch(pattern, answer);
  assert.equal(m, null, `${name} step ${i}: ${m}\nanswer: ${JSON.stringify(answer)}`);
}

for (const file of cf.caseFiles()) {
  const name = path.basename(file);
  const kase = JSON.parse(fs.readFileSync(file, 'utf8'));
  test(`conformance ${name}`, async () => {
    const daemon = await Daemon.start(cf.NOW);
    const c = await al.Client.connect(daemon.store).catch(async (e) => { await daemon.stop(); throw e; });
    try {
      for (const [i, step] of kase.steps.entries()) {
        if ('raw' in step) {
          check(name, i, step.expect, await c.request(step.raw));
        } else if ('send' in step) {
          let answer;
          try {
            const { result, exit } = await c.callWithExit(step.send.method, step.send.params);
            answer = cf.answerOf(result, exit);
          } catch (e) {
            if (!(e instanceof al.AgentlogError)) throw e;
            answer = cf.answerOf(e);
          }
          check(name, i, cf.withoutId(step.expect), answer);
        } else {
          const outs = await c.pipeline(step.pipeline.map((r) => [r.method, r.params]));
          assert.equal(outs.length, step.expect.length);
          outs.forEach((out, j) => check(`${name}[${j}]`, i, cf.withoutId(step.expect[j]), cf.answerOf(out)));
        }
      }
    } finally {
      c.close();
      await daemon.stop();
    }
  });
}

test('the matcher fails what it should', () => {
  assert.equal(cf.mismatch({ a: 1 }, { a: 1, b: 2 }), null);
  assert.notEqual(cf.mismatch({ a: 1 }, { a: 2 }), null);
  assert.notEqual(cf.mismatch({ a: { $absent: true } }, { a: null }), null);
  assert.notEqual(cf.mismatch({ a: { $type: 'integer' } }, { a: 1.5 }), null);
  assert.notEqual(cf.mismatch([1], [1, 2]), null);
  assert.notEqual(cf.mismatch(true, 1), null);
  assert.equal(cf.mismatch({ $contains: 'b' }, 'abc'), null);
});
