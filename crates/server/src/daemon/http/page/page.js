// The live registry page. Every string from the registry reaches the DOM
// through textContent (never parsed as markup), so "<script>" is text.
// Rows come from /api/agents, then live over SSE (/api/events in `latest`
// mode: each changed agent's newest row at most four times a second, about
// 500 rows a second at most, then `present` or `removed`; resumed by
// Last-Event-ID); nothing polls.
// The browser's work is bounded too: changes are merged per agent and
// applied at most every RENDER_EVERY ms (QUIET_EVERY when only "last
// active" moved), a row's cells are written only when their text changes,
// and the table's rows are built once and moved, never rebuilt, so an
// update does not lay out the whole table again.
// Registry data needs the store's token (PROTOCOL.md, "HTTP"): the page
// takes it from its address (/#token=…; the fragment never reaches a
// server), keeps it for this tab only (sessionStorage, per origin: no
// cookie, which every port of the host would receive), and shows it as
// `Authorization: Bearer` (fetch) or `token=` (EventSource sends no
// headers). Without it the page says so and loads nothing.
"use strict";

const TOKEN = (() => {
  const m = /^#token=([0-9a-fA-F]+)$/.exec(location.hash);
  if (m) {
    sessionStorage.setItem("agentlog-token", m[1]);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("agentlog-token") || "";
})();
// A token pasted into the address of an open page: load the page with it.
window.addEventListener("hashchange", () => {
  if (/^#token=/.test(location.hash)) location.reload();
});
const AUTH = TOKEN ? { headers: { Authorization: "Bearer " + TOKEN } } : {};
const withToken = (url) => (TOKEN ? url + (url.includes("?") ? "&" : "?") + "token=" + TOKEN : url);
// Thrown when the daemon wants the token: no retry helps.
class Locked extends Error {}

const RENDER_EVERY = 200; // ms, when a change shows (status, message, a new or gone row)
const QUIET_EVERY = 2000; // ms, when rows only moved their "last active" (heartbeats)
const BULK = 64; // new rows in one render past which the table is placed in one pass
const AUDIT_EVERY = 2000; // ms between refreshes of an open audit timeline

const $ = (id) => document.getElementById(id);
const byName = new Intl.Collator().compare;

const agents = new Map(); // name -> entry {row, tr, cells, texts, shown}
const order = []; // every name, sorted
const pending = new Map(); // name -> newest row, or null when removed
let lsn = 0;
let renderTimer = 0;
let renderDue = 0;
let selected = null;
let auditAt = 0;
let auditTimer = 0;
const statuses = new Set();
const providers = new Set();

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function ago(iso) {
  if (!iso) return "";
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return String(iso);
  const s = Math.round((Date.now() - t) / 1000);
  if (s < 0) return iso;
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.floor(s / 60) + " min ago";
  if (s < 86400) return Math.floor(s / 3600) + " h ago";
  return iso;
}

function filters() {
  return {
    status: $("f-status").value,
    provider: $("f-provider").value,
    name: $("f-name").value.toLowerCase(),
  };
}

function matches(r, f) {
  return (!f.status || r.status === f.status) && (!f.provider || r.provider === f.provider) &&
    (!f.name || String(r.name).toLowerCase().includes(f.name) ||
      String(r.display_name || "").toLowerCase().includes(f.name));
}

// A cell's text, class or title, written only when it differs from what is
// shown: an unchanged write would still invalidate style.
function setText(entry, i, text) {
  const t = text === undefined || text === null ? "" : String(text);
  if (entry.texts[i] !== t) {
    entry.texts[i] = t;
    entry.cells[i].textContent = t;
  }
}
function setAttr(node, key, value) {
  if (node[key] !== value) node[key] = value;
}

function fill(entry) {
  const r = entry.row;
  setText(entry, 0, r.name);
  setAttr(entry.cells[0], "title", String(r.display_name || ""));
  setText(entry, 1, r.provider);
  setText(entry, 2, r.status);
  setAttr(entry.cells[2], "className", "st st-" + String(r.status).replace(/[^a-z_]/g, ""));
  setText(entry, 3, r.status_message);
  setText(entry, 4, ago(r.last_active));
  setAttr(entry.cells[4], "title", String(r.last_active || ""));
  setText(entry, 5, r.pid);
  setText(entry, 6, r.life);
  const controller = r.owner && r.owner.controller;
  setText(entry, 7, controller ? controller.client : "");
  setAttr(entry.cells[7], "title", controller ? "until " + controller.expires_at : "");
  setText(entry, 8, (r.observers || []).map((o) => o.client).join(", "));
  const outage = r.outage && r.outage.open ? r.outage : null;
  setText(entry, 9, outage ? "down since " + outage.first_failure + " (" + outage.failures + " failed)" : "");
  setAttr(entry.cells[9], "title", outage ? String(outage.endpoint) + ": " + String(outage.error) : "");
  setAttr(entry.cells[9], "className", outage ? "outage" : "");
}

function newEntry(name, row) {
  const tr = document.createElement("tr");
  tr.dataset.agent = name;
  const status = el("span");
  const cells = [el("td", null, "name"), el("td"), status, el("td", null, "msg"),
    el("td"), el("td"), el("td"), el("td"), el("td"), el("td")];
  const statusCell = el("td");
  statusCell.append(status);
  tr.append(cells[0], cells[1], statusCell, ...cells.slice(3));
  tr.addEventListener("click", () => showAudit(name));
  const entry = { row, tr, cells, texts: [], shown: false };
  fill(entry);
  return entry;
}

// Index of `name` in `order`, or where it would go.
function place(name) {
  let lo = 0, hi = order.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (byName(order[mid], name) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// Puts a row into the table (in name order) or takes it out.
function show(entry, name, on) {
  if (entry.shown === on) return;
  entry.shown = on;
  if (!on) {
    entry.tr.remove();
    return;
  }
  const body = $("agents").tBodies[0];
  for (let i = place(name) + 1; i < order.length; i++) {
    const next = agents.get(order[i]);
    if (next.shown) {
      body.insertBefore(entry.tr, next.tr);
      return;
    }
  }
  body.append(entry.tr);
}

function syncOptions(select, values) {
  const have = new Set(Array.from(select.options).map((o) => o.value));
  for (const v of [...values].sort()) {
    if (v && !have.has(v)) {
      const o = el("option", v);
      o.value = v;
      select.append(o);
    }
  }
}

function noteValues(r) {
  const s = String(r.status), p = String(r.provider);
  if (!statuses.has(s)) {
    statuses.add(s);
    syncOptions($("f-status"), statuses);
  }
  if (!providers.has(p)) {
    providers.add(p);
    syncOptions($("f-provider"), providers);
  }
}

function countShown() {
  let n = 0;
  for (const e of agents.values()) if (e.shown) n++;
  $("count").textContent = n + " of " + agents.size + " agents";
}

// Applies the merged changes: only the rows that changed are touched. Many
// new rows at once (the first load) are placed in one pass instead.
function render() {
  renderTimer = 0;
  renderDue = 0;
  const f = filters();
  let fresh = 0;
  for (const [name, row] of pending) if (row !== null && !agents.has(name)) fresh++;
  const bulk = fresh > BULK;
  let auditChanged = false;
  for (const [name, row] of pending) {
    let entry = agents.get(name);
    if (name === selected) auditChanged = true;
    if (row === null) {
      if (entry) {
        show(entry, name, false);
        agents.delete(name);
        order.splice(place(name), 1);
      }
      continue;
    }
    noteValues(row);
    if (!entry) {
      entry = newEntry(name, row);
      agents.set(name, entry);
      if (bulk) order.push(name);
      else order.splice(place(name), 0, name);
    } else {
      const before = entry.row;
      entry.row = row;
      fill(entry);
      if (entry.shown && (before.status !== row.status || before.status_message !== row.status_message)) {
        entry.tr.animate([{ background: "#fff3b0" }, { background: "transparent" }], 1000);
      }
    }
    if (!bulk) show(entry, name, matches(row, f));
  }
  pending.clear();
  if (bulk) {
    order.sort(byName);
    rebuild(f);
  }
  countShown();
  $("lsn").textContent = "at LSN " + lsn;
  if (auditChanged) refreshAudit();
}

// Every row shown or hidden again in one pass (the rows are moved, not
// made again).
function rebuild(f) {
  const rowsShown = document.createDocumentFragment();
  for (const name of order) {
    const entry = agents.get(name);
    entry.shown = matches(entry.row, f);
    if (entry.shown) rowsShown.append(entry.tr);
  }
  $("agents").tBodies[0].replaceChildren(rowsShown);
}

// Renders within `delay` ms (sooner if already due sooner): every render is
// a frame the browser lays out and paints, so heartbeats alone wait longer.
function queueRender(delay) {
  const due = Date.now() + delay;
  if (renderTimer && renderDue <= due) return;
  clearTimeout(renderTimer);
  renderDue = due;
  renderTimer = setTimeout(render, delay);
}

// Whether `row` changes what the table shows of `before` beyond its last
// activity.
const SHOWN = ["name", "provider", "status", "status_message", "pid", "life", "display_name"];
// Attachments and outages are objects: compared by their text.
function attachments(r) {
  return JSON.stringify([r.owner && r.owner.controller, r.observers, r.outage]);
}
function shows(before, row) {
  return !before || !row || SHOWN.some((k) => before[k] !== row[k]) ||
    attachments(before) !== attachments(row);
}

// A filter changed.
function refilter() {
  rebuild(filters());
  countShown();
}

// "… ago" moves with the clock: rewritten where its text changed.
function refreshAges() {
  for (const e of agents.values()) if (e.shown) setText(e, 4, ago(e.row.last_active));
}

function setConn(text, cls) {
  const c = $("conn");
  c.textContent = text;
  c.className = "conn " + cls;
}

function applyChange(ch) {
  lsn = Math.max(lsn, ch.lsn || 0);
  const row = ch.type === "removed" ? null : ch.row;
  const before = pending.has(ch.agent) ? pending.get(ch.agent) : agents.get(ch.agent)?.row;
  pending.set(ch.agent, row);
  queueRender(shows(before, row) || ch.agent === selected ? RENDER_EVERY : QUIET_EVERY);
}

// The agents there are at `lsn`: a row of any other name is gone.
function applyPresent(p) {
  lsn = Math.max(lsn, p.lsn || 0);
  const there = new Set(p.agents);
  let gone = false;
  for (const name of agents.keys()) {
    if (!there.has(name) && !pending.has(name)) {
      pending.set(name, null);
      gone = true;
    }
  }
  if (gone) queueRender(RENDER_EVERY);
}

async function start() {
  const res = await fetch("/api/agents", AUTH);
  if (res.status === 401) throw new Locked();
  if (!res.ok) throw new Error("/api/agents: HTTP " + res.status);
  const doc = await res.json();
  for (const r of doc.agents) pending.set(r.name, r);
  lsn = doc.lsn;
  render();
  const es = new EventSource(withToken("/api/events?changes=true&latest=true&from=" + (doc.lsn + 1)));
  es.addEventListener("watching", () => setConn("live", "live"));
  es.addEventListener("change", (e) => applyChange(JSON.parse(e.data)));
  es.addEventListener("present", (e) => applyPresent(JSON.parse(e.data)));
  es.addEventListener("end", () => setConn("daemon stopped", "down"));
  es.onerror = () => setConn("reconnecting…", "down");
}

// The open timeline follows its agent, at most once per AUDIT_EVERY.
function refreshAudit() {
  if (auditTimer || selected === null) return;
  const wait = Math.max(0, auditAt + AUDIT_EVERY - Date.now());
  auditTimer = setTimeout(() => {
    auditTimer = 0;
    if (selected !== null) showAudit(selected);
  }, wait);
}

async function showAudit(name) {
  selected = name;
  auditAt = Date.now();
  $("audit").hidden = false;
  $("audit-name").textContent = name;
  const res = await fetch("/api/agents/" + encodeURIComponent(name) + "/audit?limit=200", AUTH);
  const list = $("audit-list");
  if (!res.ok) {
    list.replaceChildren(el("li", "audit failed: HTTP " + res.status));
    return;
  }
  const doc = await res.json();
  if (selected !== name) return;
  const items = (doc.events || []).slice().reverse().map((a) => {
    const li = el("li");
    li.append(el("span", a.at), el("span", "lsn " + a.lsn));
    li.append(document.createTextNode(String(a.what) + (a.count ? " ×" + a.count : "")));
    if (a.why) li.append(el("span", " — " + a.why));
    return li;
  });
  list.replaceChildren(...items);
}

// heartbeats/s over the last minutes
const samples = [];
function drawRate() {
  const c = $("rate"), g = c.getContext("2d");
  g.clearRect(0, 0, c.width, c.height);
  const n = 300, max = Math.max(1, ...samples.map((s) => s[1]));
  const w = c.width / n;
  g.fillStyle = "#2f6fdd";
  samples.slice(-n).forEach((s, i, all) => {
    const h = (s[1] / max) * (c.height - 4);
    g.fillRect((n - all.length + i) * w, c.height - h, Math.max(1, w - 0.2), h);
  });
  const now = samples.length ? samples[samples.length - 1][1] : 0;
  $("rate-now").textContent = String(now);
  $("rate-max").textContent = String(samples.length ? max : 0);
}
function startRate() {
  const es = new EventSource("/api/heartbeats");
  es.addEventListener("history", (e) => {
    samples.length = 0;
    samples.push(...JSON.parse(e.data));
    drawRate();
  });
  es.addEventListener("rate", (e) => {
    samples.push(JSON.parse(e.data));
    if (samples.length > 300) samples.shift();
    drawRate();
  });
}

for (const id of ["f-status", "f-provider", "f-name"]) $(id).addEventListener("input", refilter);
$("filters").addEventListener("submit", (e) => e.preventDefault());
$("audit-close").addEventListener("click", () => { selected = null; $("audit").hidden = true; });
setInterval(refreshAges, 5000);
// A page opened before its daemon (or while it restarts) keeps trying.
function connect() {
  start().catch((e) => {
    if (e instanceof Locked) {
      const how = TOKEN ? "the token was refused" : "registry data needs the store's token";
      setConn(how + ": open this page as /#token=… (the store's http.token)", "locked");
      return;
    }
    setConn(String(e.message || e) + ", retrying…", "down");
    setTimeout(connect, 1000);
  });
}
connect();
startRate();
