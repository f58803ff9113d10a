// Types of agentlog-client (index.js). Parameters are the protocol's
// (PROTOCOL.md); camelCase option names are sent as the protocol's
// snake_case ones.

export declare const SOCKET_NAME: 'agentlog.sock';
export declare const PROTOCOL_VERSION: 1;

export declare class AgentlogError extends Error {
  /** The protocol's stable error code (`refused`, `not_found`, …), or null. */
  code: string | null;
  /** The CLI's exit status for this error (1 refused/failed, 2 usage). */
  exitStatus: number;
  constructor(message: string, code?: string | null, exitStatus?: number);
}
export declare class NoDaemon extends AgentlogError {}
export declare class ProtocolError extends AgentlogError {}
export declare class UsageError extends AgentlogError {}
export declare class Refused extends AgentlogError {}
export declare class NotFound extends AgentlogError {}
export declare class Forbidden extends AgentlogError {}
export declare class Failed extends AgentlogError {}
export declare class Closed extends AgentlogError {}
export declare class Lagged extends AgentlogError {
  resumeFrom: number;
  constructor(resumeFrom: number);
}

export declare function errorFromReply(doc: ResponseDoc): AgentlogError;
export declare function socketPathOf(storeDir?: string, socketPath?: string): string;

/** A time: an RFC 3339 UTC string, e.g. "2026-11-30T12:00:00Z". */
export type Time = string;

export interface ErrorBody {
  code: string;
  message: string;
  exit: number;
  [key: string]: unknown;
}

export interface ResponseDoc {
  id: unknown;
  result?: unknown;
  error?: ErrorBody;
  exit?: number;
  [key: string]: unknown;
}

export interface Hello {
  protocol: 1;
  server: string;
  store: { dir: string; id: string };
  last_lsn: number;
  pid: number;
  writer: boolean;
  [key: string]: unknown;
}

export interface Applied {
  agent: string;
  lsn: number;
  [key: string]: unknown;
}

export interface RegisterOptions {
  provider: string;
  cwd: string;
  pid?: number;
  pidStartTime?: number;
  role?: string;
  parent?: string;
  projectRoot?: string;
  logPath?: string;
  hostMode?: string;
  shortId?: string;
  at?: Time;
}

export interface HeartbeatOptions {
  pid?: number;
  /** Answered only after an fsync covers it. */
  durable?: boolean;
  at?: Time;
}

export interface PostOptions {
  /** The recipient; absent: a broadcast. */
  to?: string;
  category?: string;
  priority?: string;
  privacy?: string;
  projectRoot?: string;
  ttlHours?: number;
  requestId?: string;
  at?: Time;
}

export interface ReadOptions {
  projectRoot?: string;
  budget?: number;
  limit?: number;
  at?: Time;
  /** Seconds to wait for unread mail. */
  wait?: number;
}

export interface ReadPage {
  messages: Array<{ id: string; body: string; [key: string]: unknown }>;
  left?: number;
  timed_out?: boolean;
  [key: string]: unknown;
}

export type AgentRow = { name: string; status: string; [key: string]: unknown };

export interface WatchOptions {
  fromLsn?: number;
  agent?: string;
  kinds?: string[];
  changes?: boolean;
  latest?: boolean;
}

export type WatchItem =
  | { lsn: number; kind: string; [key: string]: unknown }
  | { type: 'added' | 'updated' | 'removed'; lsn: number; agent: string; row?: AgentRow }
  | { present: { lsn: number; agents: string[] } }
  | { error: ErrorBody };

export declare class Watch implements AsyncIterableIterator<WatchItem> {
  readonly socketPath: string;
  /** The first LSN the daemon sends (known once opened). */
  start: number | null;
  open(): Promise<this>;
  close(): void;
  next(): Promise<IteratorResult<WatchItem>>;
  return(): Promise<IteratorResult<WatchItem>>;
  [Symbol.asyncIterator](): AsyncIterableIterator<WatchItem>;
}

export declare class Client {
  readonly socketPath: string;
  /** The daemon's `hello`, asked on connect. */
  server: Hello;
  static connect(storeDir?: string, options?: { socketPath?: string }): Promise<Client>;
  static connect(options: { socketPath?: string }): Promise<Client>;
  close(): void;
  /** The raw protocol: `doc` sent as is, the whole response returned (errors included). */
  request(doc: Record<string, unknown> | string): Promise<ResponseDoc>;
  call(method: string, params?: Record<string, unknown>): Promise<any>;
  callWithExit(method: string, params?: Record<string, unknown>): Promise<{ result: any; exit: number }>;
  pipeline(requests: Array<[string, Record<string, unknown>?]>): Promise<Array<any | AgentlogError>>;
  hello(): Promise<Hello>;
  register(name: string, opts: RegisterOptions): Promise<Applied>;
  heartbeat(name: string, opts?: HeartbeatOptions): Promise<Applied>;
  heartbeatMany(names: string[], opts?: HeartbeatOptions): Promise<Array<Applied | AgentlogError>>;
  status(name: string, status: string, opts?: { message?: string; at?: Time }): Promise<Applied>;
  remove(name: string, opts?: { at?: Time }): Promise<Applied>;
  post(from: string, text: string, opts?: PostOptions): Promise<{ id: string; [key: string]: unknown }>;
  read(name: string, opts?: ReadOptions): Promise<ReadPage>;
  show(name: string, opts?: { at?: Time }): Promise<Record<string, unknown>>;
  presence(name: string): Promise<boolean>;
  list(opts?: { all?: boolean }): Promise<AgentRow[]>;
  get(name: string): Promise<AgentRow>;
  audit(name: string): Promise<unknown>;
  watch(opts?: WatchOptions): Watch;
}
