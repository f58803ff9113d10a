'use strict';
/**
 * A client for the agentlog daemon (`agentlog serve`), Node's standard
 * library only (node:net). It speaks the newline-delimited JSON protocol of
 * PROTOCOL.md over the store's Unix socket.
 *
 * One connection is shared by every call made on it: requests are written as
 * they are made and the daemon answers in request order, so the client keeps
 * a FIFO of pending calls and resolves the oldest with each response line.
 * Calls made without awaiting each other (Promise.all of heartbeats) are
 * therefore pipelined on one socket; `heartbeatMany` writes a whole batch in
 * one write. A plain heartbeat is encoded from a template with the agent's
 * name JSON-encoded once and cached, in the shape the daemon's hot path
 * decodes without building a JSON tree. Errors the daemon answers with are
 * rejected as the `AgentlogError` subclass of their stable code; a lost
 * connection rejects every pending call with `Closed`.
 */

const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const SOCKET_NAME = 'agentlog.sock';
const PROTOCOL_VERSION = 1;

class AgentlogError extends Error {
  constructor(message, code = null, exitStatus = 1) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.exitStatus = exitStatus;
  }
}
/** No daemon serves the store: no socket file, or the connection was refused. */
class NoDaemon extends AgentlogError {}
/** parse_error, bad_request, unknown_method, line_too_long, or a bad response. */
class ProtocolError extends AgentlogError {}
/** Parameters the CLI would reject too (code `usage`). */
class UsageError extends AgentlogError {}
/** The registry refused the command: unknown agent, wrong pid, … */
class Refused extends AgentlogError {}
/** `get` of an agent that does not exist. */
class NotFound extends AgentlogError {}
/** A write from a peer that may only observe. */
class Forbidden extends AgentlogError {}
/** Anything else the daemon reports as failed. */
class Failed extends AgentlogError {}
/** The connection is closed (idle timeout, shutdown, too many connections, lost). */
class Closed extends AgentlogError {}
/** A watch fell behind its buffer; resume from `resumeFrom`. */
class Lagged extends AgentlogError {
  constructor(resumeFrom) {
    super(`watch lagged behind; resume from lsn ${resumeFrom}`, 'lagged');
    this.resumeFrom = resumeFrom;
  }
}

const ERRORS_BY_CODE = {
  parse_error: ProtocolError,
  bad_request: ProtocolError,
  unknown_method: ProtocolError,
  line_too_long: ProtocolError,
  usage: UsageError,
  refused: Refused,
  not_found: NotFound,
  forbidden: Forbidden,
  failed: Failed,
  too_many_connections: Closed,
  idle_timeout: Closed,
  shutting_down: Closed,
};

/** The error for a response object carrying `error`. */
function errorFromReply(doc) {
  const err = doc && typeof doc.error === 'object' && doc.error !== null ? doc.error : {};
  const Cls = ERRORS_BY_CODE[err.code] || AgentlogError;
  return new Cls(err.message || 'unknown error', err.code ?? null, err.exit ?? 1);
}

/** `socketPath`, else `<storeDir>/agentlog.sock` ($AGENTLOG_DIR, ~/.agentlog). */
function socketPathOf(storeDir, socketPath) {
  if (socketPath) return socketPath;
  const dir = storeDir || process.env.AGENTLOG_DIR || path.join(os.homedir(), '.agentlog');
  return path.join(dir, SOCKET_NAME);
}

/** Protocol parameter names are snake_case; camelCase options are accepted too. */
function paramsOf(obj) {
  const out = {};
  for (const [k, v] of Object.entries(obj || {})) {
    if (v === undefined || v === null) continue;
    out[k.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase())] = v;
  }
  return out;
}

// The id a raw request accepts in its answer: whatever the line carried.
const ANY_ID = Symbol('any id');

const NAME_CACHE_MAX = 65536;
const nameCache = new Map();
function nameJson(name) {
  let enc = nameCache.get(name);
  if (enc === undefined) {
    if (typeof name !== 'string') throw new TypeError(`an agent name is a string, not ${typeof name}`);
    enc = JSON.stringify(name);
    if (nameCache.size >= NAME_CACHE_MAX) nameCache.clear();
    nameCache.set(name, enc);
  }
  return enc;
}

/** `name` when this client encodes it as the daemon does (no escapes). */
function plainName(name) {
  return nameJson(name).includes('\\') ? undefined : name;
}

function encodeRequest(id, method, params) {
  return JSON.stringify({ id, method, params: params || {} }) + '\n';
}

function encodeHeartbeat(id, name, opts) {
  if (!opts || (opts.pid == null && opts.durable == null && opts.at == null)) {
    return `{"id":${id},"method":"heartbeat","params":{"name":${nameJson(name)}}}\n`;
  }
  return encodeRequest(id, 'heartbeat', paramsOf({ name, pid: opts.pid, durable: opts.durable, at: opts.at }));
}

function decodeResponse(line) {
  let doc;
  try {
    doc = JSON.parse(line);
  } catch (e) {
    throw new ProtocolError(`bad response line: ${e.message}`, 'bad_response');
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
    throw new ProtocolError('bad response: not an object', 'bad_response');
  }
  return doc;
}

function checkHello(server) {
  if (!server || server.protocol !== PROTOCOL_VERSION) {
    const got = server && server.protocol;
    throw new ProtocolError(`daemon speaks protocol ${JSON.stringify(got)}, this client ${PROTOCOL_VERSION}`, 'protocol_version');
  }
  return server;
}

/** A socket split into response lines, each handed to `onLine`. */
function connectLines(socketPath, onLine, onEnd) {
  return new Promise((resolve, reject) => {
    const sock = net.createConnection({ path: socketPath });
    let pending = null; // a partial line (Buffer)
    const onConnectError = (e) => {
      if (e.code === 'ENOENT' || e.code === 'ECONNREFUSED') {
        reject(new NoDaemon(`no agentlog daemon at ${socketPath}: ${e.message}`, 'no_daemon'));
      } else {
        reject(e);
      }
    };
    sock.once('error', onConnectError);
    keepRefusal(sock, (chunk) => feed(chunk));
    sock.once('connect', () => {
      sock.removeListener('error', onConnectError);
      sock.on('error', (e) => onEnd(new Closed(`connection lost: ${e.message}`, 'closed')));
      sock.on('close', () => onEnd(new Closed('the daemon closed the connection', 'closed')));
      resolve(sock);
    });
    const feed = (chunk) => {
      let buf = pending ? Buffer.concat([pending, chunk]) : chunk;
      let start = 0;
      let nl;
      while ((nl = buf.indexOf(10, start)) >= 0) {
        if (nl > start) onLine(buf.toString('utf8', start, nl));
        start = nl + 1;
      }
      pending = start < buf.length ? buf.subarray(start) : null;
    };
    sock.on('data', feed);
  });
}

/**
 * A daemon that refuses a connection (too many of its class, shutting
 * down) writes its reason and closes, perhaps before this client's first
 * write: that write then fails with EPIPE (or the read with ECONNRESET)
 * and Node closes the socket with the reason still unread. Before it
 * does, what the socket holds is read (non-blocking) and handed to
 * `feed`, so the caller gets the daemon's error, not "write EPIPE" (as
 * the Rust and Python clients do). Node offers no public hook there:
 * this wraps the socket's `_destroy` and reads its descriptor.
 */
function keepRefusal(sock, feed) {
  const destroy = sock._destroy;
  sock._destroy = function (err, cb) {
    const fd = this._handle && this._handle.fd;
    if (err && (err.code === 'EPIPE' || err.code === 'ECONNRESET') && Number.isInteger(fd) && fd >= 0) {
      const buf = Buffer.alloc(64 * 1024);
      try {
        const n = fs.readSync(fd, buf, 0, buf.length, null);
        if (n > 0) feed(buf.subarray(0, n));
      } catch (_) {
        // Nothing left to read (EAGAIN) or the read failed: the error stands.
      }
    }
    return destroy.call(this, err, cb);
  };
}

class Client {
  /** Use `await Client.connect(storeDir)` (or `{ socketPath }`). */
  constructor(socketPath) {
    this.socketPath = socketPath;
    this.server = null;
    this._nextId = 1;
    this._waiting = [];
    this._head = 0;
    this._sock = null;
    this._closedError = null;
  }

  static async connect(storeDir, options = {}) {
    if (storeDir && typeof storeDir === 'object') {
      options = storeDir;
      storeDir = undefined;
    }
    const c = new Client(socketPathOf(storeDir, options.socketPath));
    c._sock = await connectLines(c.socketPath, (line) => c._onLine(line), (e) => c._failAll(e));
    try {
      c.server = checkHello(await c.call('hello'));
    } catch (e) {
      c.close();
      throw e;
    }
    return c;
  }

  close() {
    if (this._sock) this._sock.destroy();
    this._failAll(new Closed('the client closed the connection', 'closed'));
  }

  _failAll(error) {
    if (!this._closedError) this._closedError = error;
    while (this._head < this._waiting.length) {
      const w = this._waiting[this._head];
      this._waiting[this._head++] = undefined;
      w.reject(this._closedError);
    }
    this._waiting = [];
    this._head = 0;
  }

  _onLine(line) {
    const head = this._head < this._waiting.length ? this._waiting[this._head] : undefined;
    if (head !== undefined && head.hbName !== undefined) {
      // A heartbeat's success reply has one shape, byte for byte up to its
      // LSN: read the LSN off the line instead of parsing it (anything
      // else, an error included, is parsed below).
      const prefix = `{"id":${head.id},"result":{"agent":${nameJson(head.hbName)},"lsn":`;
      if (line.length > prefix.length + 2 && line.startsWith(prefix) && line.endsWith('}}')) {
        const lsn = Number(line.slice(prefix.length, -2));
        if (Number.isSafeInteger(lsn) && lsn >= 0) {
          this._takeHead();
          head.resolve({ agent: head.hbName, lsn });
          return;
        }
      }
    }
    let doc;
    try {
      doc = decodeResponse(line);
    } catch (e) {
      this._failAll(e);
      this._sock.destroy();
      return;
    }
    if (this._head >= this._waiting.length) {
      if (doc.error && doc.id == null) {
        // The daemon's word before it closes (idle timeout, shutdown).
        this._failAll(errorFromReply(doc));
      } else {
        this._failAll(new ProtocolError(`a response nobody asked for: ${line}`, 'bad_response'));
        this._sock.destroy();
      }
      return;
    }
    const w = this._takeHead();
    if (w.id !== ANY_ID && doc.id !== w.id && !(doc.error && doc.id == null)) {
      w.reject(new ProtocolError(`response id ${JSON.stringify(doc.id)} for request ${JSON.stringify(w.id)}`, 'bad_response'));
    } else if (!w.resultOnly) {
      w.resolve(doc);
    } else if ('error' in doc) {
      w.reject(errorFromReply(doc));
    } else {
      w.resolve(doc.result);
    }
  }

  // `resultOnly`: the promise resolves to the answer's `result` and rejects
  // with its typed error (one promise per call, none wrapped around it);
  // otherwise it resolves to the whole response object.
  /** The oldest waiting call, taken off the queue (kept compact). */
  _takeHead() {
    const w = this._waiting[this._head];
    this._waiting[this._head++] = undefined;
    if (this._head > 1024 && this._head * 2 > this._waiting.length) {
      this._waiting = this._waiting.slice(this._head);
      this._head = 0;
    }
    return w;
  }

  // `hbName`: a heartbeat of that agent, whose success reply may be read
  // without parsing it.
  _expect(id, resultOnly = false, hbName = undefined) {
    return new Promise((resolve, reject) => this._waiting.push({ id, resolve, reject, resultOnly, hbName }));
  }

  _send(line, id, resultOnly = false, hbName = undefined) {
    if (this._closedError) return Promise.reject(this._closedError);
    const p = this._expect(id, resultOnly, hbName);
    this._sock.write(line);
    return p;
  }

  /** The raw protocol: `doc` (an object, its `id` used as is, or a line sent
   * byte for byte) in order with the other calls; resolves to the whole
   * response, errors included. */
  request(doc) {
    const line = typeof doc === 'string' ? doc : JSON.stringify(doc) + '\n';
    return this._send(line, ANY_ID);
  }

  /** Resolves to `{ result, exit }` (exit: the CLI's status for a successful answer). */
  async callWithExit(method, params) {
    const id = this._nextId++;
    const doc = await this._send(encodeRequest(id, method, paramsOf(params)), id);
    if ('error' in doc) throw errorFromReply(doc);
    return { result: doc.result, exit: doc.exit ?? 0 };
  }

  /** Sends one request and resolves to its `result`, or rejects with its error. */
  call(method, params) {
    const id = this._nextId++;
    return this._send(encodeRequest(id, method, paramsOf(params)), id, true);
  }

  /** `[method, params]` pairs sent in one write; each result or error, in order. */
  async pipeline(requests) {
    const lines = [];
    const answers = [];
    for (const [method, params] of requests) {
      const id = this._nextId++;
      lines.push(encodeRequest(id, method, paramsOf(params)));
      answers.push(this._closedError ? Promise.reject(this._closedError) : this._expect(id));
    }
    if (this._closedError) throw this._closedError;
    this._sock.write(lines.join(''));
    const docs = await Promise.all(answers);
    return docs.map((doc) => ('error' in doc ? errorFromReply(doc) : doc.result));
  }

  hello() { return this.call('hello'); }

  register(name, opts = {}) {
    return this.call('register', { name, ...opts });
  }

  /** One heartbeat; resolves to `{ agent, lsn }`. */
  heartbeat(name, opts) {
    const id = this._nextId++;
    let line;
    try {
      line = encodeHeartbeat(id, name, opts);
    } catch (e) {
      return Promise.reject(e);
    }
    return this._send(line, id, true, plainName(name));
  }

  /** Every name's heartbeat in one write; each `{ agent, lsn }` or error, in order. */
  async heartbeatMany(names, opts) {
    if (this._closedError) throw this._closedError;
    let text = '';
    const answers = new Array(names.length);
    for (let i = 0; i < names.length; i++) {
      const id = this._nextId++;
      text += encodeHeartbeat(id, names[i], opts);
      answers[i] = this._expect(id, false, plainName(names[i]));
    }
    this._sock.write(text);
    const docs = await Promise.all(answers);
    return docs.map((doc) => ('error' in doc ? errorFromReply(doc) : 'result' in doc ? doc.result : doc));
  }

  status(name, status, opts = {}) { return this.call('status', { name, status, ...opts }); }
  remove(name, opts = {}) { return this.call('remove', { name, ...opts }); }
  /** Posts a message (`opts.to` absent: a broadcast); the id is `result.id`. */
  post(from, text, opts = {}) { return this.call('post', { from, text, ...opts }); }
  /** Unread messages of `name`, marked read (`opts.wait`: block up to that many seconds). */
  read(name, opts = {}) { return this.call('read', { name, ...opts }); }
  show(name, opts = {}) { return this.call('show', { name, ...opts }); }
  async presence(name) { return (await this.callWithExit('presence', { name })).exit === 0; }
  async list(opts = {}) {
    const result = await this.call('list', { all: opts.all ? true : undefined });
    return result && !Array.isArray(result) && result.agents ? result.agents : result;
  }
  get(name) { return this.call('get', { name }); }
  audit(name) { return this.call('audit', { name }); }

  /** An async iterable watch stream on its own connection (`for await`). */
  watch(opts = {}) {
    const { fromLsn, changes, ...rest } = opts;
    return new Watch(this.socketPath, paramsOf({ from: fromLsn, changes: changes ? true : undefined, ...rest }));
  }
}

/** The item of a watch line, or `undefined` for a line that carries none. */
function watchItem(doc) {
  if ('event' in doc) return doc.event;
  if ('change' in doc) return doc.change;
  if ('present' in doc) return { present: doc.present };
  if ('lagged' in doc) throw new Lagged(doc.lagged.resume_from);
  if ('error' in doc) return { error: doc.error };
  return undefined;
}

class Watch {
  constructor(socketPath, params) {
    this.socketPath = socketPath;
    this.params = params;
    this.start = null;
    this._docs = [];
    this._wakers = [];
    this._end = null;
    this._sock = null;
  }

  async open() {
    this._sock = await connectLines(
      this.socketPath,
      (line) => this._push(line),
      (e) => { if (!this._end) this._end = e; this._wake(); },
    );
    this._sock.write(encodeRequest(1, 'hello', {}) + encodeRequest(2, 'watch', this.params));
    checkHello((await this._nextDoc()).result);
    const first = await this._nextDoc();
    if ('error' in first) {
      this.close();
      throw errorFromReply(first);
    }
    this.start = first.result ? first.result.from : null;
    return this;
  }

  _push(line) {
    try {
      this._docs.push(decodeResponse(line));
    } catch (e) {
      this._end = e;
      this._sock.destroy();
    }
    this._wake();
  }

  _wake() {
    const w = this._wakers;
    this._wakers = [];
    for (const f of w) f();
  }

  async _nextDoc() {
    while (this._docs.length === 0) {
      if (this._end) throw this._end;
      await new Promise((r) => this._wakers.push(r));
    }
    return this._docs.shift();
  }

  close() {
    if (this._sock) this._sock.destroy();
    if (!this._end) this._end = new Closed('the watch was closed', 'closed');
    this._wake();
  }

  async next() {
    if (!this._sock) await this.open();
    for (;;) {
      let doc;
      try {
        doc = await this._nextDoc();
      } catch (e) {
        if (e instanceof Closed) return { done: true, value: undefined };
        throw e;
      }
      let item;
      try {
        item = watchItem(doc);
      } catch (e) {
        this.close();
        throw e;
      }
      if (item !== undefined) return { done: false, value: item };
    }
  }

  async return() {
    this.close();
    return { done: true, value: undefined };
  }

  [Symbol.asyncIterator]() { return this; }
}

module.exports = {
  Client,
  Watch,
  AgentlogError,
  NoDaemon,
  ProtocolError,
  UsageError,
  Refused,
  NotFound,
  Forbidden,
  Failed,
  Closed,
  Lagged,
  errorFromReply,
  socketPathOf,
  SOCKET_NAME,
  PROTOCOL_VERSION,
};
