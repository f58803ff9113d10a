// The live registry page. Every string from the registry reaches the DOM
// through textContent (never parsed as markup), so "<script>" is text.
// Rows come from /api/agents, then live changes over SSE (/api/events,
// changes mode, resumed by Last-Event-ID); nothing polls.
"use strict";

const rows = new Map(); // agent name -> list --json row
let lsn = 0;
let dirty = new Set();
let renderQueued = false;
let selected = null;

const $ = (id) => document.getElementById(id);

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

function matches(r) {
  const st = $("f-status").value, pv = $("f-provider").value;
  const q = $("f-name").value.toLowerCase();
  return (!st || r.status === st) && (!pv || r.provider === pv) &&
    (!q || String(r.name).toLowerCase().includes(q) ||
      String(r.display_name || "").toLowerCase().includes(q));
}

function rowElement(r) {
  const tr = document.createElement("tr");
  tr.dataset.agent = r.name;
  const name = el("td", r.name, "name");
  if (r.display_name) name.title = String(r.display_name);
  tr.append(name, el("td", r.provider));
  const st = el("td");
  st.append(el("span", r.status, "st st-" + String(r.status).replace(/[^a-z_]/g, "")));
  tr.append(st, el("td", r.status_message, "msg"));
  const last = el("td", ago(r.last_active));
  last.title = String(r.last_active || "");
  tr.append(last, el("td", r.pid), el("td", r.life));
  tr.addEventListener("click", () => showAudit(r.name));
  return tr;
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

function render() {
  renderQueued = false;
  const body = $("agents").tBodies[0];
  const shown = [...rows.values()].filter(matches)
    .sort((a, b) => String(a.name).localeCompare(String(b.name)));
  const fresh = document.createDocumentFragment();
  for (const r of shown) {
    const tr = rowElement(r);
    if (dirty.has(r.name)) tr.classList.add("flash");
    fresh.append(tr);
  }
  body.replaceChildren(fresh);
  dirty = new Set();
  syncOptions($("f-status"), new Set([...rows.values()].map((r) => r.status)));
  syncOptions($("f-provider"), new Set([...rows.values()].map((r) => r.provider)));
  $("count").textContent = shown.length + " of " + rows.size + " agents";
  $("lsn").textContent = "at LSN " + lsn;
}

function queueRender() {
  if (!renderQueued) {
    renderQueued = true;
    setTimeout(render, 30);
  }
}

function setConn(text, cls) {
  const c = $("conn");
  c.textContent = text;
  c.className = "conn " + cls;
}

function applyChange(ch) {
  lsn = Math.max(lsn, ch.lsn || 0);
  if (ch.type === "removed") rows.delete(ch.agent);
  else if (ch.row) rows.set(ch.agent, ch.row);
  dirty.add(ch.agent);
  queueRender();
  if (selected === ch.agent) showAudit(ch.agent);
}

async function start() {
  const res = await fetch("/api/agents");
  if (!res.ok) throw new Error("/api/agents: HTTP " + res.status);
  const doc = await res.json();
  rows.clear();
  for (const r of doc.agents) rows.set(r.name, r);
  lsn = doc.lsn;
  render();
  const es = new EventSource("/api/events?changes=true&latest=true&from=" + (doc.lsn + 1));
  es.addEventListener("watching", () => setConn("live", "live"));
  es.addEventListener("change", (e) => applyChange(JSON.parse(e.data)));
  es.addEventListener("lagged", () => setConn("catching up…", ""));
  es.addEventListener("end", () => setConn("daemon stopped", "down"));
  es.onerror = () => setConn("reconnecting…", "down");
}

async function showAudit(name) {
  selected = name;
  $("audit").hidden = false;
  $("audit-name").textContent = name;
  const res = await fetch("/api/agents/" + encodeURIComponent(name) + "/audit?limit=200");
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

for (const id of ["f-status", "f-provider", "f-name"]) $(id).addEventListener("input", render);
$("filters").addEventListener("submit", (e) => e.preventDefault());
$("audit-close").addEventListener("click", () => { selected = null; $("audit").hidden = true; });
setInterval(queueRender, 5000); // refreshes the "… ago" column only
start().catch((e) => setConn(String(e.message || e), "down"));
startRate();
