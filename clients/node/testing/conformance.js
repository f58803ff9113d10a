'use strict';
// The conformance cases (tests/conformance/cases/*.json, format in
// tests/conformance/README.md) as the Node client runs them: the case
// files, the pattern matcher, and the answer rebuilt from a typed outcome.
// Not part of the package.

const fs = require('node:fs');
const path = require('node:path');
const al = require('..');

const ROOT = path.resolve(__dirname, '..', '..', '..');
const CASES = path.join(ROOT, 'tests', 'conformance', 'cases');
const NOW = '2030-01-01T00:00:00Z';

const TYPES = {
  integer: (v) => Number.isInteger(v),
  number: (v) => typeof v === 'number',
  string: (v) => typeof v === 'string',
  boolean: (v) => typeof v === 'boolean',
  null: (v) => v === null,
  array: (v) => Array.isArray(v),
  object: (v) => v !== null && typeof v === 'object' && !Array.isArray(v),
};

function caseFiles() {
  const files = fs.readdirSync(CASES).filter((f) => f.endsWith('.json')).sort();
  if (files.length === 0) throw new Error(`no conformance cases in ${CASES}`);
  return files.map((f) => path.join(CASES, f));
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const keysAre = (o, ks) => Object.keys(o).length === ks.length && ks.every((k) => k in o);

/** null if `actual` matches `pattern`, else where and why it does not. */
function mismatch(pattern, actual, where = '$') {
  const show = (v) => JSON.stringify(v);
  if (isObject(pattern)) {
    if (keysAre(pattern, ['$type'])) {
      return TYPES[pattern.$type](actual) ? null : `${where}: ${show(actual)} is not of type ${pattern.$type}`;
    }
    if (keysAre(pattern, ['$contains'])) {
      return typeof actual === 'string' && actual.includes(pattern.$contains)
        ? null : `${where}: ${show(actual)} does not contain ${show(pattern.$contains)}`;
    }
    if (!isObject(actual)) return `${where}: expected an object, got ${show(actual)}`;
    for (const [key, sub] of Object.entries(pattern)) {
      if (isObject(sub) && keysAre(sub, ['$absent']) && sub.$absent === true) {
        if (key in actual) return `${where}.${key}: present (${show(actual[key])}), expected absent`;
        continue;
      }
      if (!(key in actual)) return `${where}.${key}: missing`;
      const m = mismatch(sub, actual[key], `${where}.${key}`);
      if (m) return m;
    }
    return null;
  }
  if (Array.isArray(pattern)) {
    if (!Array.isArray(actual) || actual.length !== pattern.length) {
      return `${where}: expected ${pattern.length} items, got ${show(actual)}`;
    }
    for (let i = 0; i < pattern.length; i++) {
      const m = mismatch(pattern[i], actual[i], `${where}[${i}]`);
      if (m) return m;
    }
    return null;
  }
  return pattern === actual ? null : `${where}: expected ${show(pattern)}, got ${show(actual)}`;
}

const CLASS_OF_CODE = {
  parse_error: al.ProtocolError, bad_request: al.ProtocolError, unknown_method: al.ProtocolError,
  line_too_long: al.ProtocolError, usage: al.UsageError, refused: al.Refused, not_found: al.NotFound,
  forbidden: al.Forbidden, failed: al.Failed, too_many_connections: al.Closed, idle_timeout: al.Closed,
  shutting_down: al.Closed,
};

/** The response a typed outcome stands for. */
function answerOf(outcome, exit = 0) {
  if (outcome instanceof al.AgentlogError) {
    const want = CLASS_OF_CODE[outcome.code] || al.AgentlogError;
    if (outcome.constructor !== want) {
      throw new Error(`code ${outcome.code} rejected with ${outcome.constructor.name}, not ${want.name}`);
    }
    return { error: { code: outcome.code, message: outcome.message, exit: outcome.exitStatus } };
  }
  const doc = { result: outcome };
  if (exit) doc.exit = exit;
  return doc;
}

function withoutId(pattern) {
  const { id, ...rest } = pattern;
  return rest;
}

module.exports = { caseFiles, mismatch, answerOf, withoutId, NOW };
