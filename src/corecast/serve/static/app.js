// corecast dashboard. Every number shown comes from the documents the commands print with
// --json (the server sends them as they are); this file only lays them out and plots them.
"use strict";

const TOKEN = document.querySelector('meta[name="corecast-token"]').content;
const main = document.getElementById("main");
const cc = (window.corecast = { docs: {}, views: {} });   // kept for tests and the console

// ------------------------------------------------------------------------------------ helpers
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "html") el.innerHTML = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// numbers as the terminal tables show them: 4 significant digits, '-' for missing
function fmt(v, sig = 4) {
  if (v === null || v === undefined) return "-";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v !== "number") return String(v);
  if (Number.isNaN(v)) return "-";
  if (!Number.isFinite(v)) return v > 0 ? "∞" : "-∞";
  if (Number.isInteger(v) && Math.abs(v) < 10 ** (sig + 2)) return Math.abs(v) >= 10000 ? v.toLocaleString("en-US") : String(v);
  if (v !== 0 && (Math.abs(v) >= 10 ** (sig + 2) || Math.abs(v) < 1e-3))  // as Python's f"{v:.3e}"
    return v.toExponential(sig - 1).replace(/e([+-])(\d)$/, "e$10$2");
  return String(Number(v.toPrecision(sig)));
}

async function api(path, opts = {}) {
  const init = { headers: { "X-Corecast-Token": TOKEN } };
  if (opts.body !== undefined) {
    init.method = "POST";
    init.body = JSON.stringify(opts.body);
    init.headers["Content-Type"] = "application/json";
  } else if (opts.method) init.method = opts.method;
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new Error("the server does not answer (is `corecast serve` still running?)");
  }
  let doc;
  try {
    doc = await resp.json();
  } catch (e) {
    throw new Error(`the server answered ${resp.status} without a JSON document`);
  }
  if (!resp.ok || doc.error) throw new Error(doc.error || `HTTP ${resp.status}`);
  return doc;
}

function errorLine(msg) { return h("p", { class: "error", role: "alert" }, msg); }
function table(headers, rows, opts = {}) {
  const t = h("table", { class: opts.cls || null });
  t.append(h("thead", {}, h("tr", {}, headers.map((x, i) => h("th", { class: opts.text && opts.text.includes(i) ? "text" : null }, x)))));
  const body = h("tbody");
  rows.forEach((r, j) => {
    body.append(h("tr", { class: opts.flag && opts.flag[j] ? "flagged" : null },
      r.map((c, i) => h("td", { class: opts.text && opts.text.includes(i) ? "text" : null }, typeof c === "number" || c === null ? fmt(c) : c))));
  });
  t.append(body);
  return t;
}
function q(params) { return new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "" && v !== null && v !== undefined)).toString(); }
function median(a) { const s = a.filter(Number.isFinite).sort((x, y) => x - y); if (!s.length) return null; const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; }

// Every plot's layout. The title is in the top margin, left; Plotly's toolbar (the modebar) is
// a column in the right margin, so it never covers the title; the legend is a row at the
// bottom of the panel, under the x axis's title (both axes push the margins for their tick
// labels and titles: automargin), so neither collides with the other.
const BASE_LAYOUT = {
  margin: { l: 56, r: 40, t: 38, b: 8, pad: 2 }, font: { family: "system-ui, sans-serif", size: 12 },
  paper_bgcolor: "#fff", plot_bgcolor: "#fff", modebar: { orientation: "v" },
  legend: { font: { size: 10 }, orientation: "h", x: 0, xanchor: "left", y: 0, yref: "container", yanchor: "bottom" },
  xaxis: { gridcolor: "#eceff3", zeroline: false, automargin: true, title: { standoff: 6 } },
  yaxis: { gridcolor: "#eceff3", zeroline: false, automargin: true, title: { standoff: 8 } },
};
const PLOT_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
// Text from files (a trace's, a column's, a source's name) shown as text in Plotly, which reads
// a little HTML in titles, legends and hover labels (links, styles): another user's file could
// put a link or a restyled instruction on the owner's page.
function ptext(s) {
  return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function plot(div, traces, layout) {
  // trace names are always text (corecast's own names carry no markup)
  traces = traces.map((t) => (typeof t.name === "string" ? Object.assign({}, t, { name: ptext(t.name) }) : t));
  const l = Object.assign({}, BASE_LAYOUT, layout);
  for (const ax of ["xaxis", "yaxis"]) {
    l[ax] = Object.assign({}, BASE_LAYOUT[ax], layout[ax] || {});
    l[ax].title = Object.assign({}, BASE_LAYOUT[ax].title, (layout[ax] || {}).title || {});
  }
  // room at the bottom for the legend's rows (about 16 px a row of ~4 entries)
  const shown = traces.filter((t) => t.showlegend !== false && t.name).length;
  if (shown > 1 && !(layout.margin && layout.margin.b)) l.margin = Object.assign({}, BASE_LAYOUT.margin, { b: 10 + 18 * Math.ceil(shown / 3) });
  return Plotly.react(div, traces, l, PLOT_CONFIG);
}
// A y axis for these values: logarithmic only where every value is above zero and they span
// two decades or more (a log axis cannot show a zero: it dropped those points); else linear from 0.
function yScale(values) {
  const v = values.filter((x) => x !== null && x !== undefined && Number.isFinite(x));
  if (v.length && v.every((x) => x > 0) && Math.max(...v) / Math.min(...v) >= 100) return { type: "log", exponentformat: "SI" };
  return { type: "linear", rangemode: "tozero", exponentformat: "SI" };
}
const COLORS = ["#1b6ac9", "#c0392b", "#2f8f46", "#8e44ad", "#d35400", "#16a085", "#7f8c8d", "#b7950b", "#2c3e50", "#e84393"];

let state = { files: [], sessions: [], commands: {}, meters: {} };
async function refreshState() {
  state = await api("/api/state");
  document.getElementById("conn").textContent = `${state.files.length} file(s), ${state.sessions.length} live session(s)`;
  showBoards();
  return state;
}
// the names of the methods, policies and meters, from corecast's registries (asked once)
let registryNames = null;
async function registry() {
  if (!registryNames) registryNames = await api("/api/registry");
  return registryNames;
}
function filesOf(...kinds) { return state.files.filter((f) => kinds.includes(f.kind)); }

function fileSelect(files, selected, onchange) {
  const sel = h("select", { id: "file", onchange: () => onchange(sel.value) });
  if (!files.length) sel.append(h("option", { value: "" }, "(no files: name them on the command line)"));
  for (const f of files) sel.append(h("option", { value: f.id, selected: f.id === selected }, `${f.name}  (${f.kind})`));
  return sel;
}

// -------------------------------------------------------------------------- stat: a view
// Shows the JSON lines of `corecast stat --format json` (live or replayed): one plot per
// event, virtual counter and metric, one line per thread (or CPU), over a scrolling window.
class StatView {
  constructor(root, opts = {}) {
    this.root = root;
    this.opts = opts;
    this.mode = "thread";
    this.window = opts.window ?? 60;
    this.reset();
    root.append(
      h("div", { class: "toolbar" },
        h("span", { class: "status", id: "stat-status" }, ""),
        h("label", {}, "show"),
        this.modeSel = h("select", { id: "stat-mode", onchange: () => { this.mode = this.modeSel.value; this.userMode = true; this.render(true); } },
          h("option", { value: "thread" }, "each thread / CPU"), h("option", { value: "sum" }, "sum over threads")),
        h("label", {}, "values"),
        this.rateSel = h("select", { id: "stat-rate", onchange: () => { this.rate = this.rateSel.value === "rate"; this.render(true); } },
          h("option", { value: "count" }, "per interval (as stat prints)"), h("option", { value: "rate" }, "per second")),
        h("label", {}, "window"),
        this.winSel = h("select", { id: "stat-window", onchange: () => { this.window = Number(this.winSel.value); this.render(true); } },
          [[10, "10 s"], [30, "30 s"], [60, "60 s"], [300, "5 min"], [0, "whole run"]].map(([v, t]) => h("option", { value: v, selected: v === this.window }, t)))),
      this.msgs = h("div", { id: "stat-messages" }),
      this.plots = h("div", { class: "plots", id: "stat-plots" }),
      this.totals = h("div", { id: "stat-totals" }),
      this.logEl = h("div", { class: "log", id: "stat-log" }));
  }
  reset() {
    this.header = null; this.summary = null; this.series = new Map(); this.divs = new Map();
    this.tmax = 0; this.rows = 0; this.notes = new Set(); this.ended = null;
    if (this.plots) { this.plots.innerHTML = ""; this.msgs.innerHTML = ""; this.totals.innerHTML = ""; this.logEl.textContent = ""; }
  }
  setStatus(text, cls) { const s = this.root.querySelector("#stat-status"); s.textContent = text; s.className = "status " + (cls || ""); }
  message(text, cls = "note") { this.msgs.append(h("p", { class: cls }, text)); }
  seriesFor(name, unit, kind, description) {
    let s = this.series.get(name);
    if (!s) {
      s = { name, unit, kind, description, keys: new Map() };
      this.series.set(name, s);
    }
    return s;
  }
  addPoint(name, key, t, v, dt, exit) {
    const s = this.series.get(name);
    if (!s) return;
    let k = s.keys.get(key);
    if (!k) { k = { x: [], y: [], dt: [], exit: [] }; s.keys.set(key, k); }
    k.x.push(t); k.y.push(v === null || v === undefined ? null : v); k.dt.push(dt || null); k.exit.push(!!exit);
  }
  add(objs) {
    for (const o of objs) {
      switch (o.type) {
        case "header": this.onHeader(o); break;
        case "sample": this.onSample(o); break;
        case "summary": this.summary = o; this.showSummary(); break;
        case "regions": this.totals.append(h("h3", {}, "Regions"), table(["region", ...Object.keys(Object.values(o.regions)[0] || {})],
          Object.entries(o.regions).map(([n, r]) => [n, ...Object.values(r)]))); break;
        case "error": this.message(o.message, "error"); break;
        case "log": case "output": this.logEl.textContent += o.message + "\n"; break;
        case "end": this.ended = o; break;
      }
    }
    this.render();
  }
  onHeader(hd) {
    this.header = hd;
    const sets = hd.sets || [];
    for (const set of sets) for (const e of set) this.seriesFor(e.name, e.unit, "event", e.description);
    for (const v of hd.virtual || []) {
      this.seriesFor(v.name, v.unit, "virtual", v.description);
      if (v.unavailable) this.message(`virtual counter ${v.name}: unavailable: ${v.unavailable}`, "warning");
    }
    for (const m of hd.metrics || []) this.seriesFor(m.name, "", "metric", m.expr);
    const tgt = hd.target || {};
    const what = tgt.kind === "command" ? (tgt.argv || []).join(" ") : tgt.kind === "pid" ? `pid ${tgt.pid}` : "every CPU";
    this.message(`${what} · every ${hd.interval_s} s · ${hd.per_cpu ? "per CPU" : "per thread"}` + (sets.length > 1 ? ` · ${sets.length} event sets in rotation` : ""));
  }
  onSample(r) {
    this.rows++;
    const t = r.time_s;
    if (t > this.tmax) this.tmax = t;
    const key = this.header && this.header.per_cpu ? `cpu ${r.cpu}` : `${r.comm} ${r.tid ?? r.pid}`;
    const dt = r.interval_ns ? r.interval_ns / 1e9 : null;
    const ex = r.sample_type === "exit";
    for (const c of r.counters || []) {
      if (c.status !== "ok" && !this.notes.has(c.name)) {
        this.notes.add(c.name);
        this.message(`${c.name}: ${c.status}${c.message ? ": " + c.message : ""}`, "warning");
      }
      if (!this.series.has(c.name)) this.seriesFor(c.name, "count", "event", "");
      this.addPoint(c.name, key, t, c.status === "ok" ? c.value : null, dt, ex);
    }
    for (const [n, v] of Object.entries(r.virtual || {})) {
      if (!this.series.has(n)) this.seriesFor(n, v.unit, "virtual", "");
      if (v.scope !== "thread" && !(this.header && this.header.per_cpu)) this.addPoint(n, "system", t, v.value, dt, ex);
      else this.addPoint(n, key, t, v.value, dt, ex);
    }
    for (const [n, v] of Object.entries(r.metrics || {})) this.addPoint(n, key, t, v, dt, ex);
  }
  // points for one series as plot traces, over the window ending at `until`
  traces(s, from, until) {
    const out = [];
    const keys = [...s.keys.entries()];
    const rate = this.rate && s.kind !== "metric";
    const cut = (k, ticksOnly) => {
      const x = [], y = [];
      for (let i = 0; i < k.x.length; i++) {
        if (k.x[i] < from || k.x[i] > until || (ticksOnly && k.exit[i])) continue;
        x.push(k.x[i]);
        y.push(rate ? (k.y[i] === null || !k.dt[i] ? null : k.y[i] / k.dt[i]) : k.y[i]);
      }
      return { x, y };
    };
    if (this.mode === "sum" && keys.length > 1 && s.kind !== "metric") {
      const acc = new Map();
      for (const [, k] of keys) {
        const c = cut(k, true);       // a thread's exit row has a time of its own: not summed with a tick
        c.x.forEach((x, i) => { if (c.y[i] !== null) acc.set(x, (acc.get(x) || 0) + c.y[i]); });
      }
      const xs = [...acc.keys()].sort((a, b) => a - b);
      out.push({ x: xs, y: xs.map((x) => acc.get(x)), name: "all threads (ticks)", type: "scatter", mode: "lines+markers", marker: { size: 4 }, line: { width: 1.6 } });
    } else {
      keys.forEach(([key, k], i) => {
        const c = cut(k);
        out.push({ x: c.x, y: c.y, name: key, type: "scatter", mode: c.x.length < 60 ? "lines+markers" : "lines",
          marker: { size: 4 }, line: { width: 1.4, color: COLORS[i % COLORS.length] }, connectgaps: false });
      });
    }
    return out;
  }
  render(force = false) {
    if (this._pending && !force) return;
    this._pending = true;
    const go = () => {
      this._pending = false;
      const until = this.opts.until !== undefined && this.opts.until !== null ? this.opts.until : this.tmax;
      // many threads: their sum reads better than a line each (the menu switches back)
      if (!this.userMode && this.mode === "thread" && Math.max(0, ...[...this.series.values()].map((s) => s.keys.size)) > 16) {
        this.mode = this.modeSel.value = "sum";
      }
      const from = this.window > 0 ? until - this.window : -Infinity;
      for (const s of this.series.values()) {
        let div = this.divs.get(s.name);
        if (!div) {
          div = h("div", { class: "plot", "data-series": s.name });
          this.plots.append(div);
          this.divs.set(s.name, div);
        }
        const unit = s.kind === "metric" ? "" : ` (${ptext(s.unit || "count")} per ${this.rate ? "second" : "interval"})`;
        const range = this.opts.range || (this.window > 0 ? [Math.max(0, until - this.window), Math.max(until, this.window * 0.05)] : undefined);
        const traces = this.traces(s, from, until);
        plot(div, traces, {
          title: { text: `${ptext(s.name)}<span style="font-size:11px;color:#5f6b7a"> ${ptext(s.kind)}${unit}</span>`, font: { size: 13 }, x: 0.02 },
          xaxis: { title: { text: "time (s)" }, range }, yaxis: { rangemode: "tozero", exponentformat: "SI" },
          showlegend: traces.length <= 12, uirevision: s.name,
        });
      }
      if (this.ended) {
        const st = this.ended.exit_status;
        this.setStatus(st === 0 ? "ended" : `ended (corecast stat exit status ${st})`, "ended");
      } else if (this.header) this.setStatus(`running · ${this.rows} rows · t = ${fmt(this.tmax)} s`, "running");
      if (this.opts.onRender) this.opts.onRender(this);
    };
    requestAnimationFrame(() => setTimeout(go, 0));
  }
  showSummary() {
    const s = this.summary;
    this.totals.innerHTML = "";
    this.totals.append(h("h3", {}, "Totals"));
    const rows = [];
    (s.sets || []).forEach((set, i) => set.forEach((e) => rows.push([e.name, i, e.value, e.status, e.message || ""])));
    for (const [n, v] of Object.entries(s.virtual || {})) rows.push([n, "virtual", v.value, v.status, v.message || ""]);
    this.totals.append(table(["event", "set", "value", "status", "why"], rows, { text: [3, 4] }));
    for (const n of s.notes || []) this.totals.append(h("p", { class: "note" }, "note: " + n));
    if (s.exit_status !== null && s.exit_status !== undefined && s.exit_status !== 0)
      this.totals.append(h("p", { class: "warning" }, `the command exited with status ${s.exit_status}`));
  }
}

// ----------------------------------------------------------------------------------- Live
let liveSource = null;
async function pageLive() {
  main.innerHTML = "";
  const left = h("div"), right = h("div", { id: "live-view" });
  main.append(h("h2", {}, "Live"), h("div", { class: "layout" }, left, right));
  // the stat form
  const form = h("div", { class: "panel", id: "stat-form" }, h("h3", {}, "Start a stat"));
  const tgt = h("select", { id: "stat-target" }, h("option", { value: "command" }, "a command"), h("option", { value: "pid" }, "a running process (pid)"), h("option", { value: "system" }, "every CPU (-S)"));
  const cmd = h("input", { type: "text", id: "stat-command", placeholder: "e.g. corecast-lockbench -t 2", value: "corecast-lockbench -t 2 -n 3000000" });
  const pid = h("input", { type: "text", id: "stat-pid", placeholder: "pid" });
  const interval = h("input", { type: "number", id: "stat-interval", value: "0.5", step: "0.1", min: "0.01" });
  const duration = h("input", { type: "number", id: "stat-duration", placeholder: "until it ends", step: "1", min: "0" });
  const extra = h("input", { type: "text", id: "stat-extra", placeholder: "more specs, e.g. sched:sched_switch" });
  const metrics = h("input", { type: "text", id: "stat-metrics", placeholder: "e.g. utilization (comma-separated)" });
  const evBox = h("div", { class: "events", id: "stat-events" }, h("span", { class: "muted" }, "reading this machine's catalogue…"));
  const vBox = h("div", { class: "events", id: "stat-virtual" });
  const startBtn = h("button", { id: "stat-start" }, "Start");
  const formMsg = h("div", { id: "stat-form-msg" });
  form.append(h("label", {}, "what to count"), tgt, h("label", {}, "command"), cmd, h("label", {}, "pid"), pid,
    h("div", { class: "row" }, h("div", {}, h("label", {}, "interval (s)"), interval), h("div", {}, h("label", {}, "stop after (s)"), duration)),
    h("label", {}, "events (this machine's catalogue)"), evBox, h("label", {}, "more event specs"), extra,
    h("label", {}, "virtual counters"), vBox, h("label", {}, "metrics"), metrics,
    h("div", { class: "row", style: "margin-top:10px" }, startBtn), formMsg);
  if (!state.commands.allowed) formMsg.append(h("p", { class: "note" }, state.commands.reason));
  const sessionsPanel = h("div", { class: "panel sessions", id: "sessions" }, h("h3", {}, "Sessions"));
  const metersPanel = h("div", { class: "panel", id: "meters" }, h("h3", {}, "Meters blackboard"));
  left.append(sessionsPanel, metersPanel, form);
  if (state.meters.available) showMetersForm(metersPanel);
  else metersPanel.append(h("p", { class: "note", id: "meters-off" }, "unavailable: " + state.meters.reason));

  api("/api/catalogue").then((cat) => {
    cc.docs.catalogue = cat;
    evBox.innerHTML = "";
    const events = cat.events.slice().sort((a, b) => (a.status === "ok" ? 0 : 1) - (b.status === "ok" ? 0 : 1));
    for (const e of events) {
      const ok = e.status === "ok";
      const box = h("input", { type: "checkbox", value: e.name, disabled: !ok, checked: ok && ["task_clock", "context_switches"].includes(e.name) });
      evBox.append(h("label", { class: ok ? null : "unavailable", title: ok ? e.description : `${e.status}: ${e.message}` }, box, e.name,
        ok ? null : h("span", { class: "why" }, `${e.status}: ${e.message}`)));
    }
    for (const v of cat.virtual || []) {
      vBox.append(h("label", { title: v.description }, h("input", { type: "checkbox", value: v.name, checked: v.name === "runq_delay" }), v.name, h("span", { class: "why" }, v.scope)));
    }
  }).catch((e) => { evBox.innerHTML = ""; evBox.append(errorLine(e.message)); });

  startBtn.onclick = async () => {
    formMsg.querySelectorAll(".error").forEach((x) => x.remove());
    const events = [...evBox.querySelectorAll("input:checked")].map((x) => x.value);
    const more = extra.value.trim();
    const spec = [events.join(","), more].filter(Boolean).join(",");
    const body = { events: spec ? [spec] : [], virtual: [...vBox.querySelectorAll("input:checked")].map((x) => x.value),
      metrics: metrics.value.split(",").map((x) => x.trim()).filter(Boolean), interval: interval.value, duration: duration.value };
    if (tgt.value === "command") body.command = cmd.value;
    else if (tgt.value === "pid") body.pid = pid.value;
    else body.per_cpu = true;
    try {
      const s = await api("/api/stat", { body });
      await refreshState();
      showSessions(sessionsPanel);
      watchSession(s.id);
    } catch (e) { formMsg.append(errorLine(e.message)); }
  };
  showSessions(sessionsPanel);
  const running = state.sessions.filter((s) => s.state !== "ended");
  const pick = (running.length ? running : state.sessions).slice(-1)[0];
  if (pick) watchSession(pick.id);
  else right.append(h("p", { class: "note" }, "No live session yet: start a stat on the left."));
}

// the meters panel: a blackboard by name (default $CORECAST_METERS, else "default"), the boards
// found in /dev/shm, how often to read it
function showMetersForm(panel) {
  const m = state.meters;
  const name = h("input", { type: "text", id: "meters-board", value: m.default, placeholder: "default" });
  const period = h("input", { type: "number", id: "meters-period", value: String(m.period_s), step: "0.1", min: "0.05", max: "10" });
  const msg = h("div", { id: "meters-form-msg" });
  const found = h("div", { class: "boards", id: "meters-boards" });
  const go = h("button", { class: "secondary", id: "meters-watch" }, "Watch");
  go.onclick = async () => {
    msg.innerHTML = "";
    try {
      await refreshState();
      const s = await api("/api/meters", { body: { blackboard: name.value.trim(), period: period.value } });
      await refreshState();
      showSessions(document.getElementById("sessions"));
      watchSession(s.id);
    } catch (e) { msg.append(errorLine(e.message)); }
  };
  panel.append(h("div", { class: "row" }, h("div", {}, h("label", {}, "name"), name), h("div", {}, h("label", {}, "read every (s)"), period)),
    h("label", {}, "boards on this machine"), found, h("div", { style: "margin-top:8px" }, go), msg);
  showBoards();
}

// the boards in /dev/shm as the last /api/state saw them; a click puts a name in the form
function showBoards() {
  const found = document.getElementById("meters-boards"), name = document.getElementById("meters-board");
  if (!found || !state.meters.boards) return;
  found.innerHTML = "";
  if (!state.meters.boards.length) found.append(h("p", { class: "note" }, "no blackboard in /dev/shm: start one with corecast meters"));
  for (const b of state.meters.boards)
    found.append(h("a", { href: "#live", "data-board": b.name, title: b.stale || `daemon pid ${b.pid}, ${b.meters} meters, ${b.triggers} triggers`,
      onclick: (ev) => { ev.preventDefault(); name.value = b.name; } },
      h("span", {}, b.name), h("span", { class: b.stale ? "stale" : "live" }, b.stale ? "stale" : "live")));
}

function showSessions(panel) {
  panel.querySelectorAll(".session, .note").forEach((x) => x.remove());
  if (!state.sessions.length) panel.append(h("p", { class: "note" }, "none yet"));
  for (const s of state.sessions.slice().reverse()) {
    panel.append(h("div", { class: "session" + (cc.views.live && cc.views.live.sid === s.id ? " selected" : ""), "data-id": s.id },
      h("span", { class: "label", title: (s.argv || []).join(" ") }, `${s.id} · ${s.label}`),
      h("span", { class: "muted" }, s.state),
      h("button", { class: "secondary", onclick: () => watchSession(s.id) }, "view"),
      s.state !== "ended" ? h("button", { class: "stop", "data-stop": s.id, onclick: () => stopSession(s.id) }, "Stop") : null));
  }
}

async function stopSession(id) {
  try { await api(`/api/sessions/${id}/stop`, { method: "POST" }); }
  catch (e) { document.getElementById("sessions").append(errorLine(e.message)); }
  await refreshState();
  showSessions(document.getElementById("sessions"));
}

function watchSession(id) {
  if (liveSource) liveSource.close();
  const right = document.getElementById("live-view");
  right.innerHTML = "";
  const s = state.sessions.find((x) => x.id === id);
  right.append(h("h3", {}, `${id}: ${s ? s.label : ""}`));
  let view, feed;
  if (s && s.kind === "meters") {
    view = new MetersView(right, { window: 60, live: true });
    feed = new MetersFeed(view);
  } else feed = view = new StatView(right, { window: 60 });
  view.sid = id;
  cc.views.live = view;
  showSessions(document.getElementById("sessions"));
  const es = new EventSource(`/api/sessions/${id}/stream`);
  liveSource = es;
  es.addEventListener("lines", (ev) => feed.add(JSON.parse(ev.data)));
  es.addEventListener("end", async () => {
    es.close();
    if (!view.ended) view.ended = { exit_status: null };
    view.render(true);
    await refreshState();
    const panel = document.getElementById("sessions");
    if (panel) showSessions(panel);
  });
  es.onerror = () => { if (es.readyState === EventSource.CLOSED) view.message("the stream from the server ended", "note"); };
}

// ------------------------------------------------------------------------------ Campaigns
let campaignWatch = null;
async function pageCampaigns(params) {
  main.innerHTML = "";
  const files = filesOf("campaign");
  const fid = params.get("file") || (files[0] && files[0].id);
  main.append(h("h2", {}, "Campaigns"),
    h("div", { class: "toolbar" }, h("label", {}, "campaign file"), fileSelect(files, fid, (v) => { location.hash = "#campaigns?file=" + v; })));
  const out = h("div", { id: "campaign" });
  main.append(out);
  if (!fid) { out.append(h("p", { class: "note" }, "No campaign file: name one (or a folder) on the command line, e.g. corecast serve campaign.db")); return; }
  const load = async () => {
    try {
      const doc = await api("/api/campaign?" + q({ file: fid }));
      cc.docs.campaign = doc;
      renderCampaign(out, doc);
    } catch (e) {
      out.innerHTML = "";
      out.append(errorLine(e.message), h("p", { class: "note" }, "watching the file: the page updates when it changes"));
    }
  };
  await load();
  if (campaignWatch) campaignWatch.close();
  campaignWatch = new EventSource("/api/watch?" + q({ file: fid }));
  campaignWatch.addEventListener("changed", load);
}

function renderCampaign(out, doc) {
  out.innerHTML = "";
  const m = doc.measure, info = doc.info, notes = (info.notes || {}).campaign || {};
  const rows = doc.dataset.rows;
  const planned = notes.planned ? ` of ${notes.planned} planned` : "";
  out.append(h("p", {}, h("span", { class: "mono" }, m.command || ""), h("br"),
    h("span", { class: "muted" }, `${info.machine && info.machine.cpu_model ? info.machine.cpu_model + " · " : ""}${m.runs} run(s)${planned}, ${m.failed} failed · `),
    h("span", { class: "status " + (notes.complete ? "ended" : "running"), id: "campaign-progress" }, notes.complete ? "complete" : "in progress or interrupted")));
  const plots = h("div", { class: "plots" });
  out.append(plots);
  const sum = m.summary;
  const cores = sum.map((r) => r.cores);
  const runsAt = (name) => ({ x: rows.filter((r) => r[name] !== null && r[name] !== undefined).map((r) => r.cores), y: rows.filter((r) => r[name] !== null && r[name] !== undefined).map((r) => r[name]) });
  // time
  const tdiv = h("div", { class: "plot", id: "campaign-time" });
  plots.append(tdiv);
  const tr = runsAt("time_s");
  const tmed = sum.filter((r) => r.time_s);
  plot(tdiv, [
    { x: tr.x, y: tr.y, mode: "markers", name: "runs", marker: { color: "#9aa5b1", size: 6 } },
    { x: tmed.map((r) => r.cores), y: tmed.map((r) => r.time_s[0]), mode: "lines+markers", name: "median (min–max)", line: { color: COLORS[0], width: 2 },
      error_y: { type: "data", symmetric: false, array: tmed.map((r) => r.time_s[2] - r.time_s[0]), arrayminus: tmed.map((r) => r.time_s[0] - r.time_s[1]), color: COLORS[0] } },
  ], { title: { text: "time per run (s)", font: { size: 13 }, x: 0.02 }, xaxis: { title: { text: "cores" }, tickvals: cores }, yaxis: { rangemode: "tozero" } });
  // throughput or speedup
  const xdiv = h("div", { class: "plot", id: "campaign-throughput" });
  plots.append(xdiv);
  const hasX = sum.some((r) => r.throughput !== undefined && r.throughput !== null);
  if (hasX) {
    const xr = runsAt("throughput");
    plot(xdiv, [{ x: xr.x, y: xr.y, mode: "markers", name: "runs", marker: { color: "#9aa5b1", size: 6 } },
      { x: cores, y: sum.map((r) => r.throughput), mode: "lines+markers", name: "median", line: { color: COLORS[2], width: 2 } }],
      { title: { text: "throughput", font: { size: 13 }, x: 0.02 }, xaxis: { title: { text: "cores" }, tickvals: cores }, yaxis: { rangemode: "tozero" } });
  } else {
    plot(xdiv, [{ x: cores, y: sum.map((r) => r.speedup), mode: "lines+markers", name: "speedup", line: { color: COLORS[2], width: 2 } },
      { x: cores, y: cores, mode: "lines", name: "linear", line: { color: "#bbb", dash: "dot" } }],
      { title: { text: "speedup (1/time relative to the fewest cores)", font: { size: 13 }, x: 0.02 }, xaxis: { title: { text: "cores" }, tickvals: cores }, yaxis: { rangemode: "tozero" } });
  }
  // stalls
  const stallNames = [...new Set(sum.flatMap((r) => Object.keys(r.stalls || {})))];
  if (stallNames.length) {
    const sdiv = h("div", { class: "plot", id: "campaign-stalls" });
    plots.append(sdiv);
    const straces = stallNames.map((n, i) => ({ x: cores, y: sum.map((r) => (r.stalls || {})[n] ?? null), name: n, mode: "lines+markers", line: { color: COLORS[i % COLORS.length] } }));
    plot(sdiv, straces,
      { title: { text: "stall categories (median per run)", font: { size: 13 }, x: 0.02 }, xaxis: { title: { text: "cores" }, tickvals: cores }, yaxis: yScale(straces.flatMap((t) => t.y)) });
  }
  out.append(h("h3", {}, "Per core count"), table(["cores", "runs ok", "time_s (median)", "min", "max", hasX ? "throughput" : null, "speedup", "peak RSS (bytes)"].filter((x) => x !== null),
    sum.map((r) => [r.cores, `${r.runs - r.failed}/${r.runs}`, r.time_s ? r.time_s[0] : null, r.time_s ? r.time_s[1] : null, r.time_s ? r.time_s[2] : null, ...(hasX ? [r.throughput ?? null] : []), r.speedup ?? null, r.rss_bytes ? r.rss_bytes[0] : null]), { cls: "campaign-summary" }));
  if (stallNames.length) out.append(h("h3", {}, "Stall categories (median per run)"), table(["cores", ...stallNames], sum.map((r) => [r.cores, ...stallNames.map((n) => (r.stalls || {})[n] ?? null)])));
  const failed = (info.notes || {}).failed_runs || [];
  if (failed.length) out.append(h("h3", {}, "Failed runs"), table(["cores", "rep", "status", "exit", "message"], failed.map((f) => [f.cores, f.repetition, f.status, f.exit_status, f.message || ""]), { text: [2, 4] }));
  for (const n of (info.notes || {}).notices || []) out.append(h("p", { class: "note" }, n));
  out.append(h("h3", {}, "Columns"), table(["column", "kind", "unit", "source", "status"], info.columns.map((c) => [c.name, c.kind, c.unit || "-", c.source || "-", c.status]), { text: [1, 2, 3, 4] }));
}

// ---------------------------------------------------------------------------- Predictions
async function pagePredict(params) {
  main.innerHTML = "";
  const files = filesOf("campaign", "dataset");
  const fid = params.get("file") || (files[0] && files[0].id);
  const form = h("div", { class: "panel", id: "predict-form" }, h("h3", {}, "corecast predict"));
  const names = await registry();
  const method = h("select", { id: "predict-method" }, names.methods.map((m) => h("option", { value: m, selected: m === (params.get("method") || names.methods[0]) }, m)));
  const cores = h("input", { type: "text", id: "predict-cores", value: params.get("cores") || "", placeholder: "e.g. 16,32,64 or 8-64:2x" });
  const level = h("input", { type: "text", id: "predict-level", value: params.get("level") || "0.8" });
  const freq = h("input", { type: "text", id: "predict-freq", value: params.get("freq_ratio") || "", placeholder: "1 (same clock)" });
  const size = h("input", { type: "text", id: "predict-size", value: params.get("size_ratio") || "", placeholder: "1 (same problem)" });
  const clock = h("input", { type: "text", id: "predict-clock", value: params.get("clock") || "", placeholder: "recorded, or GHz" });
  const stalls = h("input", { type: "text", id: "predict-stalls", value: params.get("stalls") || "", placeholder: "all stall columns" });
  // another machine, as --target-machine takes it: a bundled name or the inline form
  const machine = h("input", { type: "text", id: "predict-machine", list: "predict-machines", value: params.get("target_machine") || "", placeholder: "this one; or a name, or sockets=2,cores=32,smt=2" });
  const machines = h("datalist", { id: "predict-machines" }, (state.machines || []).map((m) => h("option", { value: m })));
  const placement = h("select", { id: "predict-placement" }, ["compact", "spread", "smt-last"].map((m) => h("option", { value: m, selected: m === (params.get("placement") || "compact") }, m)));
  const smtYield = h("input", { type: "text", id: "predict-smt-yield", value: params.get("smt_yield") || "", placeholder: "the corpus prior" });
  const measured = h("input", { type: "text", id: "predict-measured", list: "predict-machines", value: params.get("measured_machine") || "", placeholder: "recorded, or as above" });
  const sel = fileSelect(files, fid, () => {});
  const go = h("button", { id: "predict-go" }, "Predict");
  form.append(h("label", {}, "campaign or Dataset"), sel, h("label", {}, "method"), method,
    h("label", {}, "target core counts"), cores, h("label", {}, "band level"), level,
    h("h3", {}, "Target machine"),
    h("label", {}, "machine (predict --target-machine)"), machine, machines,
    h("div", { class: "row" }, h("div", {}, h("label", {}, "placement"), placement), h("div", {}, h("label", {}, "SMT yield"), smtYield)),
    h("label", {}, "measured machine, for data that does not record it"), measured,
    h("label", {}, "clock ratio: measured / target frequency"), freq,
    h("label", {}, "problem size ratio: target / measured"), size,
    h("label", {}, "measured clock (GHz), for data that does not record it"), clock,
    h("label", {}, "stall categories"), stalls, h("div", { style: "margin-top:10px" }, go));
  const out = h("div", { id: "prediction" });
  main.append(h("h2", {}, "Predictions"), h("div", { class: "layout" }, h("div", {}, form), out));
  const run = async () => {
    out.innerHTML = "";
    out.append(h("p", { class: "note" }, "fitting…"));
    const p = { file: sel.value, method: method.value, cores: cores.value, level: level.value, freq_ratio: freq.value, size_ratio: size.value, clock: clock.value, stalls: stalls.value,
      target_machine: machine.value.trim(), placement: machine.value.trim() ? placement.value : "", smt_yield: smtYield.value, measured_machine: measured.value.trim() };
    try {
      if (!p.cores) {
        const d = await api("/api/dataset?" + q({ file: p.file }));
        const top = Math.max(...d.info.cores.map((c) => c.cores));
        p.cores = cores.value = `${top * 2},${top * 4}`;
      }
      const doc = await api("/api/predict?" + q(p));
      cc.docs.predict = doc;
      renderPrediction(out, doc);
    } catch (e) { out.innerHTML = ""; out.append(errorLine(e.message)); }
  };
  go.onclick = run;
  if (fid) run(); else out.append(h("p", { class: "note" }, "No campaign or Dataset: name one on the command line."));
}

function renderPrediction(out, r) {
  out.innerHTML = "";
  const d = r.doc, metric = d.metric, lvl = Math.round(100 * d.level);
  out.append(h("p", { class: "verdict" }, `${d.file}: method ${d.method}${d.chosen && d.chosen.length ? " → " + d.chosen.join(" + ") : ""}; model: ${d.model}`));
  if (d.reason) out.append(h("p", { class: "note" }, d.reason));
  const tm = d.target_machine;
  if (tm) out.append(h("p", { class: "note", id: "predict-target" }, `target: ${tm.sockets} socket(s) × ${tm.cores_per_socket} cores × ${tm.threads_per_core} thread(s) = ${tm.cpus} CPUs (${tm.name || tm.source}), placement ${tm.placement}; SMT yield ${fmt(tm.smt_yield)} (${tm.smt_yield_source})`));
  for (const w of d.warnings || []) out.append(h("p", { class: "warning" }, "warning: " + w));
  const plots = h("div", { class: "plots" });
  out.append(plots);
  const rows = r.dataset.rows.filter((x) => x[metric] !== null && x[metric] !== undefined);
  const measuredTop = Math.max(...r.dataset.rows.map((x) => x.cores));
  const main_ = h("div", { class: "plot tall", id: "predict-plot" });
  plots.append(main_);
  const traces = [];
  const val = (p) => (metric === "time_s" ? p.time_s : p.throughput);
  if (r.curve) {
    const c = r.curve.predictions;
    traces.push({ x: c.map((p) => p.cores), y: c.map((p) => p.high), mode: "lines", line: { width: 0 }, showlegend: false, hoverinfo: "skip", name: "high" });
    traces.push({ x: c.map((p) => p.cores), y: c.map((p) => p.low), mode: "lines", line: { width: 0 }, fill: "tonexty", fillcolor: "rgba(27,106,201,0.18)", name: `${lvl}% band` });
    traces.push({ x: c.map((p) => p.cores), y: c.map(val), mode: "lines", line: { color: COLORS[0], width: 2.2 }, name: `${d.method}: ${d.model}`.slice(0, 60) });
  }
  traces.push({ x: rows.map((x) => x.cores), y: rows.map((x) => x[metric]), mode: "markers", name: "measured", marker: { color: "#333", size: 6, opacity: 0.7 } });
  traces.push({ x: d.predictions.map((p) => p.cores), y: d.predictions.map(val), mode: "markers", name: "predicted", marker: { color: COLORS[1], size: 9, symbol: "diamond" },
    error_y: { type: "data", symmetric: false, array: d.predictions.map((p) => (p.high ?? val(p)) - val(p)), arrayminus: d.predictions.map((p) => val(p) - (p.low ?? val(p))), color: COLORS[1] } });
  plot(main_, traces, { title: { text: `${metric === "time_s" ? "time (s)" : "throughput"}: measured and predicted, ${lvl}% band`, font: { size: 13 }, x: 0.02 },
    xaxis: { title: { text: "cores" } }, yaxis: { type: "log", exponentformat: "SI" },
    shapes: [{ type: "line", x0: measuredTop, x1: measuredTop, yref: "paper", y0: 0, y1: 1, line: { dash: "dash", color: "#777", width: 1 } }],
    annotations: [{ x: measuredTop, yref: "paper", y: 1, text: "measurements end", showarrow: false, xanchor: "left", font: { size: 10, color: "#555" } }] });
  // stall panel
  const bn = d.bottlenecks || [];
  if (bn.length) {
    const sdiv = h("div", { class: "plot tall", id: "predict-stalls-plot" });   // "predict-stalls" is the form's field
    plots.append(sdiv);
    const st = [];
    const curveBn = (r.curve && r.curve.bottlenecks) || [];
    bn.forEach((b, i) => {
      const col = COLORS[i % COLORS.length];
      const meas = r.dataset.rows.filter((x) => x[b.category] !== null && x[b.category] !== undefined);
      st.push({ x: meas.map((x) => x.cores), y: meas.map((x) => x[b.category] / x.cores), mode: "markers", marker: { color: col, size: 6 }, name: `${b.category} measured`, legendgroup: b.category, showlegend: false });
      const cb = curveBn.find((x) => x.category === b.category);
      const pts = cb ? cb.per_target : b.per_target;
      st.push({ x: pts.map((p) => p.cores), y: pts.map((p) => p.stalls_per_core), mode: "lines", line: { color: col, width: 1.8 }, name: `${b.category} (${b.model})`, legendgroup: b.category });
    });
    plot(sdiv, st, { title: { text: "stall categories: stalls per core, measured (points) and extrapolated", font: { size: 13 }, x: 0.02 }, xaxis: { title: { text: "cores" } }, yaxis: yScale(st.flatMap((t) => t.y)),
      shapes: [{ type: "line", x0: measuredTop, x1: measuredTop, yref: "paper", y0: 0, y1: 1, line: { dash: "dash", color: "#777", width: 1 } }] });
  }
  const x = d.throughput_unit && d.throughput_unit.startsWith("runs/s") ? "runs/s" : "throughput";
  const where = tm ? [["sockets", (p) => p.sockets_used], ["SMT shared", (p) => fmt(p.smt_shared)], ["effective cores", (p) => p.effective_cores]] : [];
  out.append(h("h3", {}, `Predictions (${metric} band at ${lvl}%)`),
    table(["cores", "time_s", x, `low (${metric})`, `high (${metric})`, ...where.map((w) => w[0])], d.predictions.map((p) => [p.cores, p.time_s, p.throughput, p.low, p.high, ...where.map((w) => w[1](p))]), { cls: "predictions" }));
  if (bn.length) {
    const top = d.predictions[d.predictions.length - 1].cores;
    out.append(h("h3", {}, `Bottlenecks (stalls per core, largest measured → ${top} cores)`),
      table(["rank", "category", "model", "growth", "share now", `share at ${top}`, "verdict"], bn.map((b) => [b.rank, b.category, b.model, b.growth, b.share_measured, b.share_at_largest_target, b.verdict]), { text: [1, 2, 6], cls: "bottlenecks" }));
  }
  // the locks, with their call sites: measured share of thread time and the demand model's at each target
  const lk = (d.locks && d.locks.locks) || [];
  if (lk.length) {
    const pct = (v) => (v === null || v === undefined ? "-" : `${(100 * v).toFixed(1)}%`);
    const meas = lk[0].measured.slice(-1).map((p) => `measured @${p.cores}`);
    out.append(h("h3", {}, "Locks (share of thread time waiting for or holding each; predicted by the demand model)"),
      table(["lock (call site)", ...meas, ...lk[0].predicted.map((p) => `@${p.cores}`)],
        lk.map((l) => [l.label, ...l.measured.slice(-1).map((p) => pct(p.share)), ...l.predicted.map((p) => pct(p.share))]),
        { text: [0], cls: "locks" }),
      h("p", { class: "note" }, `from the ${d.locks.source}`));
  }
  const models = Object.entries(d.models || {}).filter(([k, m]) => m && typeof m === "object" && "kernel" in m);
  if (models.length) out.append(h("h3", {}, "Models"), table(["series", "kernel", "points", "checkpoint RMSE", "formula"], models.map(([k, m]) => [k, m.kernel, m.points ?? "-", m.checkpoint_rmse ?? null, m.formula || ""]), { text: [1, 4] }));
}

// -------------------------------------------------------------------------------------- USL
async function pageUsl(params) {
  main.innerHTML = "";
  const files = filesOf("campaign", "dataset");
  const fid = params.get("file") || (files[0] && files[0].id);
  const sel = fileSelect(files, fid, () => {});
  const metric = h("input", { type: "text", id: "usl-metric", value: params.get("metric") || "", placeholder: "throughput, else 1/time_s" });
  const level = h("input", { type: "text", id: "usl-level", value: params.get("level") || "0.95" });
  const predict = h("input", { type: "text", id: "usl-predict", value: params.get("predict") || "", placeholder: "e.g. 64,128" });
  const go = h("button", { id: "usl-go" }, "Fit");
  const form = h("div", { class: "panel" }, h("h3", {}, "corecast usl"), h("label", {}, "campaign or Dataset"), sel, h("label", {}, "metric"), metric,
    h("label", {}, "level"), level, h("label", {}, "predict at"), predict, h("div", { style: "margin-top:10px" }, go));
  const out = h("div", { id: "usl" });
  main.append(h("h2", {}, "Universal Scalability Law"), h("div", { class: "layout" }, h("div", {}, form), out));
  const run = async () => {
    out.innerHTML = "";
    try {
      const r = await api("/api/usl?" + q({ file: sel.value, metric: metric.value, level: level.value, predict: predict.value }));
      cc.docs.usl = r;
      renderUsl(out, r);
    } catch (e) { out.append(errorLine(e.message)); }
  };
  go.onclick = run;
  if (fid) run(); else out.append(h("p", { class: "note" }, "No campaign or Dataset: name one on the command line."));
}

function renderUsl(out, r) {
  const d = r.doc, lvl = Math.round(100 * d.level);
  out.append(h("p", { class: "verdict" }, d.verdict));
  for (const w of d.warnings || []) out.append(h("p", { class: "warning" }, "warning: " + w));
  for (const n of d.notes || []) out.append(h("p", { class: "note" }, "note: " + n));
  const div = h("div", { class: "plot tall", id: "usl-plot" });
  out.append(div);
  const c = r.curve, pts = d.points, flagged = pts.map((p) => p.flags.length > 0);
  const traces = [
    { x: c.map((p) => p.cores), y: c.map((p) => p.high), mode: "lines", line: { width: 0 }, showlegend: false, hoverinfo: "skip" },
    { x: c.map((p) => p.cores), y: c.map((p) => p.low), mode: "lines", line: { width: 0 }, fill: "tonexty", fillcolor: "rgba(59,130,196,0.16)", name: `${lvl}% prediction band` },
    { x: c.map((p) => p.cores), y: c.map((p) => p.throughput), mode: "lines", line: { color: "#1f5f99", width: 2 }, name: `USL (α=${fmt(d.alpha, 3)}, β=${fmt(d.beta, 3)}, γ=${fmt(d.gamma, 5)})` },
    { x: c.map((p) => p.cores), y: c.map((p) => d.amdahl.gamma * p.cores / (1 + d.amdahl.alpha * (p.cores - 1))), mode: "lines", line: { color: "#8c6d1f", dash: "dash", width: 1.3 }, name: `Amdahl (α=${fmt(d.amdahl.alpha, 3)})` },
    { x: pts.filter((p, i) => !flagged[i]).map((p) => p.cores), y: pts.filter((p, i) => !flagged[i]).map((p) => p.throughput), mode: "markers", name: "measured (median, min–max)", marker: { color: "#1d232b", size: 7 },
      error_y: { type: "data", symmetric: false, array: pts.filter((p, i) => !flagged[i]).map((p) => p.high - p.throughput), arrayminus: pts.filter((p, i) => !flagged[i]).map((p) => p.throughput - p.low), color: "#1d232b" } },
  ];
  if (flagged.some(Boolean)) traces.push({ x: pts.filter((p, i) => flagged[i]).map((p) => p.cores), y: pts.filter((p, i) => flagged[i]).map((p) => p.throughput), mode: "markers", name: "flagged point", marker: { color: "#b3261e", size: 10, symbol: "circle-open", line: { width: 2 } } });
  if (d.predictions && d.predictions.length) traces.push({ x: d.predictions.map((p) => p.cores), y: d.predictions.map((p) => p.throughput), mode: "markers", name: "predicted", marker: { color: COLORS[1], size: 9, symbol: "diamond" } });
  const shapes = d.n_max ? [{ type: "line", x0: d.n_max, x1: d.n_max, yref: "paper", y0: 0, y1: 1, line: { color: "#b3261e", dash: "dashdot", width: 1 } }] : [];
  plot(div, traces, { title: { text: `X(N) from ${ptext(d.source)}`, font: { size: 13 }, x: 0.02 }, xaxis: { title: { text: "N (cores / load)" }, rangemode: "tozero" }, yaxis: { title: { text: "throughput X(N)" }, rangemode: "tozero" }, shapes });
  const names = ["α  contention", "β  coherency", "γ  X at N=1, no overhead"];
  out.append(h("h3", {}, "Parameters"), table(["parameter", "estimate", "std. error", `${lvl}% interval`],
    ["alpha", "beta", "gamma"].map((k, i) => [names[i], d[k], d[k + "_se"], `[${fmt(d[k + "_ci"][0])}, ${fmt(d[k + "_ci"][1])}]`]), { cls: "usl-params" }));
  out.append(table(["quantity", "value"], [["N_max (peak load)", d.n_max], ["X_max", d.x_max], ["N_opt 1/α", d.n_opt], ["X_roof γ/α", d.x_roof], ["R²", d.r2], ["residual standard error", d.sigma]]));
  out.append(h("p", {}, `Amdahl's law (β = 0): ${d.amdahl.summary}.`));
  out.append(h("h3", {}, "Points"), table(["N", "X", "fitted", "residual", "eff.", "C(N)", "cont.", "coh.", "runs", "flags"],
    pts.map((p) => [p.cores, p.throughput, p.fitted, p.residual, p.efficiency, p.capacity, `${Math.round(100 * p.contention)}%`, `${Math.round(100 * p.coherency)}%`, p.repetitions, p.flags.join(", ")]), { flag: flagged, text: [9], cls: "usl-points" }));
  if (d.predictions && d.predictions.length) out.append(h("h3", {}, `Predicted (${lvl}% prediction band)`), table(["N", "X", "low", "high", "efficiency"], d.predictions.map((p) => [p.cores, p.throughput, p.low, p.high, p.efficiency])));
}

// ----------------------------------------------------------------------------------- Replay
async function pageReplay(params) {
  main.innerHTML = "";
  const files = filesOf("stat-trace", "meters-recording");
  const fid = params.get("file") || (files[0] && files[0].id);
  main.append(h("h2", {}, "Replay"), h("div", { class: "toolbar" }, h("label", {}, "trace or recording"), fileSelect(files, fid, (v) => { location.hash = "#replay?file=" + v; })));
  const out = h("div", { id: "replay" });
  main.append(out);
  if (!fid) {
    out.append(h("p", { class: "note" }, "No trace: record one with corecast stat --format json -o trace.jsonl -- PROGRAM, or corecast meters --record meters.csv, and name it on the command line."));
    return;
  }
  let doc;
  try { doc = await api("/api/replay?" + q({ file: fid })); }
  catch (e) { out.append(errorLine(e.message)); return; }
  cc.docs.replay = doc;
  const info = doc.info;
  const slider = h("input", { type: "range", id: "replay-slider", min: info.start_s, max: info.end_s, step: "any", value: info.end_s });
  const at = h("span", { class: "mono", id: "replay-time" });
  const play = h("button", { class: "secondary", id: "replay-play" }, "▶ play");
  out.append(h("div", { class: "toolbar" }, play, h("div", { style: "flex:1" }, slider), at));
  for (const n of info.notes) out.append(h("p", { class: "note" }, n));
  if (info.cut) out.append(h("p", { class: "warning" }, `the trace has ${info.samples_total} samples; the last ${doc.samples.length} are shown`));
  let view;
  if (info.kind === "meters-recording") {
    const r = doc.replay;
    view = new MetersView(out, { window: 0, until: info.end_s, range: [info.start_s, info.end_s],
      status: `recording of blackboard ${((doc.dataset.notes || {}).meters || {}).blackboard || "?"} · every ${fmt((r.interval_s || 0) * 1e3)} ms, window ${fmt((r.window_s || 0) * 1e3)} ms · ${r.windows} windows over ${fmt(r.span_s)} s · ${r.machine}` });
    replayMeters(view, doc);
    out.append(replayStats(r));
  } else {
    view = new StatView(out, { window: 0, until: info.end_s, range: [0, info.end_s] });
    view.add([doc.header, ...doc.samples]);
    if (doc.summary) view.add([doc.summary]);
    view.add([{ type: "end", exit_status: doc.summary ? doc.summary.exit_status : null }]);
  }
  cc.views.replay = view;
  const show = () => { view.opts.until = Number(slider.value); at.textContent = `t = ${fmt(Number(slider.value))} s of ${fmt(info.end_s)} s`; view.render(true); };
  slider.oninput = show;
  let timer = null;
  play.onclick = () => {
    if (timer) { clearInterval(timer); timer = null; play.textContent = "▶ play"; return; }
    if (Number(slider.value) >= info.end_s) slider.value = info.start_s;
    play.textContent = "❚❚ pause";
    let last = performance.now();
    timer = setInterval(() => {
      const now = performance.now();
      slider.value = Math.min(info.end_s, Number(slider.value) + (now - last) / 1000);
      last = now;
      show();
      if (Number(slider.value) >= info.end_s) play.onclick();
    }, 250);
  };
  show();
}

// ----------------------------------------------------------------------------------- router
const PAGES = { live: pageLive, campaigns: pageCampaigns, predict: pagePredict, usl: pageUsl, replay: pageReplay };
async function route() {
  const [name, query] = (location.hash.slice(1) || "live").split("?");
  const params = new URLSearchParams(query || "");
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.dataset.page === name);
  if (campaignWatch && name !== "campaigns") { campaignWatch.close(); campaignWatch = null; }
  if (liveSource && name !== "live") { liveSource.close(); liveSource = null; }
  try {
    await refreshState();
    await (PAGES[name] || pageLive)(params);
  } catch (e) {
    main.innerHTML = "";
    main.append(errorLine(e.message));
  }
  document.body.dataset.page = name;
}
window.addEventListener("hashchange", route);
route();
