'use strict';
// One client process of `agentlog bench clients --client node` (run as
// `node bench/worker.js`; not part of the package). It speaks the Rust
// worker's pipe protocol (src/bench/clients_worker.rs): one JSON spec line
// on stdin, `ready` once its connections are open, `go`, then one result
// line with a latency histogram in the Rust bench's log-linear buckets
// (src/bench/latency.rs). Target: `daemon`, heartbeats through this
// package's Client (`heartbeat`, or `heartbeatMany` with pipeline > 1),
// each agent of this process's share in turn; `conns` connections run
// concurrently on the one event loop.

const readline = require('node:readline');
const al = require('..');

const SUB_BITS = 6n;
const SUB = 1n << SUB_BITS;

function bucketOf(ns) {
  if (ns < 64) return ns;
  const v = BigInt(ns);
  const msb = BigInt(v.toString(2).length - 1);
  const shift = msb - SUB_BITS;
  return Number((shift + 1n) * SUB + ((v >> shift) - SUB));
}

const agentName = (i) => `agent-${String(i).padStart(6, '0')}`;

function agentsOf(g, total, agents) {
  const mine = [];
  for (let a = g; a < agents; a += total) mine.push(a);
  return mine.length ? mine : [g % agents];
}

class Tally {
  constructor() {
    this.buckets = new Map();
    this.ops = 0; this.refused = 0; this.failed = 0;
    this.min = null; this.max = 0; this.sum = 0n;
    this.firstError = null;
  }
  ok(ns) {
    this.ops++;
    const b = bucketOf(ns);
    this.buckets.set(b, (this.buckets.get(b) || 0) + 1);
    this.sum += BigInt(ns);
    if (this.min === null || ns < this.min) this.min = ns;
    if (ns > this.max) this.max = ns;
  }
  error(refused, what) {
    if (refused) this.refused++; else this.failed++;
    if (this.firstError === null) this.firstError = what;
  }
  merge(o) {
    for (const [b, c] of o.buckets) this.buckets.set(b, (this.buckets.get(b) || 0) + c);
    this.ops += o.ops; this.refused += o.refused; this.failed += o.failed;
    this.sum += o.sum; this.max = Math.max(this.max, o.max);
    if (o.min !== null && (this.min === null || o.min < this.min)) this.min = o.min;
    this.firstError = this.firstError || o.firstError;
  }
}

const now = () => process.hrtime.bigint();

async function runConn(client, names, k, seconds, durable, tally) {
  const opts = durable ? { durable: true } : undefined;
  const end = now() + BigInt(Math.round(seconds * 1e9));
  let i = 0;
  const n = names.length;
  for (;;) {
    const start = now();
    if (start >= end) return;
    if (k === 1) {
      try {
        await client.heartbeat(names[i], opts);
        tally.ok(Number(now() - start));
      } catch (e) {
        if (!(e instanceof al.AgentlogError)) throw e;
        tally.error(e instanceof al.Closed, `${e.code}: ${e.message}`);
        if (e instanceof al.Closed) return;
      }
      i = (i + 1) % n;
    } else {
      const batch = new Array(k);
      for (let j = 0; j < k; j++) batch[j] = names[(i + j) % n];
      i = (i + k) % n;
      const outs = await client.heartbeatMany(batch, opts);
      const took = Number(now() - start);
      for (const o of outs) {
        if (o instanceof al.AgentlogError) tally.error(o instanceof al.Closed, `${o.code}: ${o.message}`);
        else tally.ok(took);
      }
    }
  }
}

async function main() {
  const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const specLine = (await lines.next()).value;
  let spec;
  try {
    spec = JSON.parse(specLine);
    if (spec.target.kind !== 'daemon') throw new Error(`target ${spec.target.kind} is not supported by the Node worker`);
  } catch (e) {
    process.stderr.write(`bad worker spec ${JSON.stringify(specLine)}: ${e.message}\n`);
    process.exit(2);
  }
  const { procs, conns, agents, pipeline: k, seconds, durable } = spec;
  const clients = [];
  for (let c = 0; c < conns; c++) clients.push(await al.Client.connect(spec.target.dir));
  process.stdout.write('ready\n');
  const go = (await lines.next()).value;
  if (!go || go.trim() !== 'go') {
    process.stderr.write(`worker ${spec.worker}: expected \`go\`\n`);
    process.exit(2);
  }
  const started = process.hrtime.bigint();
  const runs = clients.map(async (client, c) => {
    const g = spec.worker * conns + c;
    const names = agentsOf(g, procs * conns, agents).map(agentName);
    const tally = new Tally();
    await runConn(client, names, k, seconds, durable, tally);
    return { tally, took: Number(process.hrtime.bigint() - started) / 1e9 };
  });
  const results = await Promise.all(runs);
  const total = new Tally();
  let elapsed = 0;
  for (const r of results) { total.merge(r.tally); elapsed = Math.max(elapsed, r.took); }
  for (const c of clients) c.close();
  const buckets = [...total.buckets.entries()].sort((a, b) => a[0] - b[0]);
  // `sum` may pass 2^53: written as a bare JSON integer.
  const out = `{"ops":${total.ops},"refused":${total.refused},"failed":${total.failed},"seconds":${elapsed},` +
    `"first_error":${JSON.stringify(total.firstError)},"latency":{"buckets":${JSON.stringify(buckets)},` +
    `"min":${total.min ?? 0},"max":${total.max},"sum":${total.sum.toString()}}}\n`;
  // Pipes are written synchronously on Linux: the line is out before exit
  // (stdin, still open, would otherwise keep the process alive).
  process.stdout.write(out);
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`${e.stack || e}\n`);
  process.exit(1);
});
