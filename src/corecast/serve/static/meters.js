// corecast dashboard: the meters blackboard, live and replayed. Loaded before app.js, whose
// helpers (h, fmt, table, plot, COLORS, cc) it uses when its views draw.
//
// Live: a meters session's lines are `corecast meters show --json` documents cut in two (the
// board's description once, then the changing values: see corecast/serve/meters.py);
// joinMeters() puts each one back together, and window.corecast.docs.meters is the latest.
// Replay: a recording's rows (`corecast meters --record`) with `meters replay --json`.
"use strict";

const METER_LISTS = ["meters", "triggers", "advice"];
function joinMeters(desc, values) {
  const doc = Object.assign({}, desc);
  for (const [k, v] of Object.entries(values)) if (!METER_LISTS.includes(k)) doc[k] = v;
  for (const k of METER_LISTS) doc[k] = (desc[k] || []).map((d, i) => Object.assign({}, d, (values[k] || [])[i] || {}));
  return doc;
}

const MAX_FRAMES = 7200;    // polls kept by a page left open (an hour at the default 0.5 s)
const STATS = [["avg", "window average"], ["current", "last tick"], ["max", "window maximum"], ["min", "window minimum"]];

// Meters over time: one plot per meter (a line per scope) with its triggers' levels and the
// spans they were HIGH, the triggers and the advice as they were at the view's time, and the
// unavailable meters with their reasons (never plotted, never as 0).
class MetersView {
  constructor(root, opts = {}) {
    this.root = root;
    this.opts = opts;
    this.window = opts.window ?? 60;
    this.stat = "avg";
    this.scopes = null;      // which scopes are drawn: null until the first description
    root.append(
      h("p", { class: "status", id: "meters-status" }, ""),
      h("div", { class: "toolbar" },
        opts.live ? [h("label", {}, "value"),
          this.statSel = h("select", { id: "meters-stat", onchange: () => { this.stat = this.statSel.value; this.render(true); } },
            STATS.map(([v, t]) => h("option", { value: v }, t)))] : null,
        h("label", {}, "scopes"),
        this.scopeSel = h("select", { id: "meters-scopes", onchange: () => { this.scopes = this.scopeSel.value; this.render(true); } },
          h("option", { value: "all" }, "all"), h("option", { value: "node+socket" }, "node and sockets"), h("option", { value: "node" }, "node")),
        opts.live ? [h("label", {}, "window"),
          this.winSel = h("select", { id: "meters-window", onchange: () => { this.window = Number(this.winSel.value); this.render(true); } },
            [[10, "10 s"], [30, "30 s"], [60, "60 s"], [300, "5 min"], [0, "everything"]].map(([v, t]) => h("option", { value: v, selected: v === this.window }, t)))] : null),
      this.banner = h("div", { id: "meters-banner" }),
      this.msgs = h("div", { id: "meters-messages" }),
      h("div", { class: "meters-tables" }, this.trigEl = h("div", { id: "meters-triggers" }), this.advEl = h("div", { id: "meters-advice" })),
      this.plots = h("div", { class: "plots", id: "meters-plots" }),
      this.unavEl = h("div", { id: "meters-unavailable" }));
    this.reset();
  }

  reset() {
    this.desc = null; this.t = []; this.mv = []; this.tv = []; this.av = []; this.frames = 0;
    this.divs = new Map(); this.board = null; this.ended = null;
    this.plots.innerHTML = ""; this.trigEl.innerHTML = ""; this.advEl.innerHTML = ""; this.unavEl.innerHTML = ""; this.banner.innerHTML = "";
  }
  message(text, cls = "note") { this.msgs.append(h("p", { class: cls }, text)); }

  // d: {meters: [{name, scope, level, unit, available, source}], triggers: [{name, meter, scope,
  // low, high, dwell_s}], advice: [{scope, min_workers, max_workers, policy}]}: frames give values
  // in the same order
  describe(d) {
    this.reset();
    this.desc = d;
    this.mv = d.meters.map(() => ({ avg: [], current: [], min: [], max: [], tid: [] }));
    this.tv = d.triggers.map(() => ({ state: [], value: [], transitions: [] }));
    this.av = d.advice.map(() => ({ allowed: [], high: [] }));
    const scopes = new Set(d.meters.filter((m) => m.available).map((m) => m.scope));
    if (this.scopes === null) this.scopes = this.scopeSel.value = scopes.size > 16 ? "node+socket" : "all";
    // the unavailable meters, grouped as `corecast meters show` groups them
    const groups = new Map();
    for (const m of d.meters) {
      if (m.available) continue;
      const reason = (m.source || "").replace(/^unavailable: /, "");
      const k = m.name + "\u0000" + reason;
      if (!groups.has(k)) groups.set(k, { name: m.name, reason, scopes: [] });
      groups.get(k).scopes.push(m.scope);
    }
    if (groups.size) {
      this.unavEl.append(h("h3", {}, `Unavailable meters (${groups.size})`));
      const ul = h("ul", { class: "unavailable-meters" });
      for (const g of groups.values())
        ul.append(h("li", { "data-meter": g.name }, h("b", {}, g.name), ` (${g.scopes.length === 1 ? g.scopes[0] : g.scopes.length + " scopes"}): `, h("span", { class: "why" }, g.reason)));
      this.unavEl.append(ul);
    }
  }

  // f: {meters: [{avg, current, min, max, tid} | null], triggers: [{state, value, transitions}],
  // advice: [{allowed, high}]}; t in seconds, increasing
  frame(t, f) {
    if (!this.desc) return;
    if (this.t.length && t <= this.t[this.t.length - 1]) return;     // the board did not tick since
    this.t.push(t);
    this.frames++;
    this.mv.forEach((s, j) => {
      const v = f.meters[j] || {};
      for (const k of ["avg", "current", "min", "max"]) s[k].push(v[k] ?? null);
      s.tid.push(v.tid ?? null);
    });
    this.tv.forEach((s, j) => { const v = f.triggers[j] || {}; s.state.push(v.state ?? null); s.value.push(v.value ?? null); s.transitions.push(v.transitions ?? null); });
    this.av.forEach((s, j) => { const v = f.advice[j] || {}; s.allowed.push(v.allowed ?? null); s.high.push(v.high ?? null); });
    if (this.t.length > MAX_FRAMES) {
      const cut = MAX_FRAMES >> 2;
      this.t.splice(0, cut);
      for (const s of [...this.mv, ...this.tv, ...this.av]) for (const a of Object.values(s)) a.splice(0, cut);
    }
  }

  // a live board's header: its state, and why it is stale
  setBoard(doc) {
    this.board = doc;
  }

  index(until) {     // the last frame at or before `until`
    let lo = 0, hi = this.t.length - 1, at = -1;
    while (lo <= hi) { const m = (lo + hi) >> 1; if (this.t[m] <= until) { at = m; lo = m + 1; } else hi = m - 1; }
    return at;
  }

  shown(m) {
    if (!m.available) return false;
    if (this.scopes === "node") return m.level === "node" || m.scope === "node";
    if (this.scopes === "node+socket") return ["node", "socket", "process"].includes(m.level) || m.scope === "node";
    return true;
  }

  render(force = false) {
    if (this._pending && !force) return;
    this._pending = true;
    requestAnimationFrame(() => setTimeout(() => { this._pending = false; this.draw(); }, 0));
  }

  draw() {
    const d = this.desc;
    this.showBoard();
    if (!d) return;
    const last = this.t.length ? this.t[this.t.length - 1] : 0;
    const until = this.opts.until !== undefined && this.opts.until !== null ? this.opts.until : last;
    const i1 = this.index(until);
    const from = this.window > 0 ? until - this.window : -Infinity;
    let i0 = this.index(from - 1e-9) + 1;
    if (i0 < 0) i0 = 0;
    const x = this.t.slice(i0, i1 + 1);
    // live: the last `window` seconds; replayed: the whole recording, whatever the slider's time
    const range = this.opts.range || (this.window > 0 ? [Math.max(x.length ? x[0] : 0, until - this.window), Math.max(until, 1e-3)] : undefined);
    // the meters, one plot per name
    const names = [...new Set(d.meters.filter((m) => m.available).map((m) => m.name))];
    names.forEach((name) => {
      let div = this.divs.get(name);
      if (!div) {
        div = h("div", { class: "plot", "data-meter": name });
        this.plots.append(div);
        this.divs.set(name, div);
      }
      const traces = [], under = [];
      let unit = "";
      const masked = (j) => {                // a meter's values; a thread slot's while it follows a thread
        const s = this.mv[j], y = s[this.opts.live ? this.stat : "avg"].slice(i0, i1 + 1);
        if (d.meters[j].level !== "thread") return y;
        const tid = s.tid.slice(i0, i1 + 1);
        return y.map((v, i) => (tid[i] ? v : null));
      };
      d.meters.forEach((m, j) => {
        if (m.name !== name || !this.shown(m)) return;
        unit = m.unit;
        const y = masked(j);
        let label = m.scope;
        if (m.level === "thread") {
          const now = this.mv[j].tid.slice(i0, i1 + 1).filter(Boolean).pop();
          if (!now) return;
          label = `${m.scope} (tid ${now})`;
        }
        const k = traces.length;
        traces.push({ x, y, name: label, type: "scatter", mode: x.length < 60 ? "lines+markers" : "lines", connectgaps: false,
          marker: { size: 3 }, line: { width: m.scope === "node" ? 2 : 1.2, color: m.scope === "node" ? "#1d232b" : COLORS[k % COLORS.length] } });
      });
      // each trigger on this meter: its levels (once per name and levels), and its scope's line
      // underlined in red while it was HIGH
      const shapes = [], annotations = [], drawn = new Set();
      d.triggers.forEach((t, j) => {
        if (t.meter !== name) return;
        const key = `${t.name} ${t.low} ${t.high}`;
        if (!drawn.has(key)) {
          drawn.add(key);
          for (const [lvl, col] of [["low", "#2f8f46"], ["high", "#b3261e"]]) {
            if (t[lvl] === null || t[lvl] === undefined) continue;
            shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, y0: t[lvl], y1: t[lvl], line: { color: col, dash: "dash", width: 1 } });
            annotations.push({ xref: "paper", x: 1, xanchor: "right", y: t[lvl], yanchor: lvl === "high" ? "bottom" : "top", showarrow: false,
              text: `${lvl} ${fmt(t[lvl])} · ${ptext(t.name)}`, font: { size: 9, color: col } });
          }
        }
        const mj = d.meters.findIndex((m) => m.name === t.meter && m.scope === t.scope);
        if (mj < 0 || !this.shown(d.meters[mj])) return;
        const y = masked(mj), st = this.tv[j].state;
        under.push({ x, y: y.map((v, i) => (st[i0 + i] === "high" ? v : null)), name: `${t.name}@${t.scope} HIGH`, type: "scatter", mode: "lines+markers",
          line: { width: 9, color: "rgba(179,38,30,0.22)" }, marker: { size: 9, color: "rgba(179,38,30,0.22)" }, connectgaps: false, showlegend: false, hoverinfo: "skip", meta: "trigger-high" });
      });
      plot(div, [...under, ...traces], {
        title: { text: `${ptext(name)}<span style="font-size:11px;color:#5f6b7a"> ${ptext(unit)}${this.opts.live ? " · " + STATS.find((s) => s[0] === this.stat)[1] : " · window average"}</span>`, font: { size: 13 }, x: 0.02 },
        xaxis: { title: { text: "time (s)" }, range }, yaxis: { rangemode: "tozero", exponentformat: "SI" },
        shapes, annotations, showlegend: traces.length > 1 && traces.length <= 16, uirevision: name,
      });
    });
    // the advice over time
    if (d.advice.length) {
      let div = this.divs.get("\u0000advice");
      if (!div) {
        div = h("div", { class: "plot", "data-meter": "allowed_workers" });
        this.plots.append(div);
        this.divs.set("\u0000advice", div);
      }
      plot(div, d.advice.map((a, j) => ({ x, y: this.av[j].allowed.slice(i0, i1 + 1), name: a.scope, type: "scatter", mode: "lines", line: { shape: "hv", width: 1.8, color: COLORS[j % COLORS.length] } })),
        { title: { text: `allowed_workers<span style="font-size:11px;color:#5f6b7a"> concurrency advice per scope</span>`, font: { size: 13 }, x: 0.02 },
          xaxis: { title: { text: "time (s)" }, range },
          yaxis: { rangemode: "tozero", tickformat: "d" }, showlegend: d.advice.length > 1, uirevision: "advice" });
    }
    // the triggers and the advice at the view's time
    this.trigEl.innerHTML = "";
    if (d.triggers.length) {
      this.trigEl.append(h("h3", {}, "Triggers"));
      const rows = d.triggers.map((t, j) => {
        const s = this.tv[j];
        const state = i1 >= 0 ? s.state[i1] : null;
        const changes = this.opts.live ? (i1 >= 0 ? s.transitions[i1] : null) : s.state.slice(0, i1 + 1).filter((v, i, a) => i > 0 && v !== null && a[i - 1] !== null && v !== a[i - 1]).length;
        return [t.name, t.scope, t.meter, h("span", { class: "state " + (state || "none") }, state ? state.toUpperCase() : "-"),
          i1 >= 0 ? s.value[i1] : null, t.low, t.high, t.dwell_s, changes];
      });
      this.trigEl.append(table(["trigger", "scope", "meter", "state", "value", "low", "high", "dwell s", "changes"], rows, { text: [1, 2, 3], cls: "meters-triggers" }));
    }
    this.advEl.innerHTML = "";
    if (d.advice.length) {
      this.advEl.append(h("h3", {}, "Advice"));
      this.advEl.append(table(["scope", "allowed_workers", "min", "max", "policy", "triggers high"],
        d.advice.map((a, j) => [a.scope, i1 >= 0 ? this.av[j].allowed[i1] : null, a.min_workers ?? null, a.max_workers ?? null, a.policy || "-", i1 >= 0 ? this.av[j].high[i1] : null]),
        { text: [4], cls: "meters-advice" }));
    }
    if (this.opts.onRender) this.opts.onRender(this);
  }

  showBoard() {
    const b = this.board, status = this.root.querySelector("#meters-status");
    this.banner.innerHTML = "";
    if (!b) {
      if (this.opts.status) { status.textContent = this.opts.status; status.className = "status ended"; }
      return;
    }
    const t = this.t.length ? this.t[this.t.length - 1] : 0;
    let text = `blackboard ${b.blackboard} · daemon pid ${b.pid} · every ${fmt(b.interval_s * 1e3)} ms, window ${fmt(b.window_s * 1e3)} ms · ${b.ticks} ticks (${b.late_ticks} lost) · t = ${fmt(t)} s since it started`;
    let cls = "running";
    if (b.stale) {
      cls = "stale";
      text = "stale · " + text;
      this.banner.append(h("p", { class: "error", id: "meters-stale", role: "alert" },
        `The blackboard '${b.blackboard}' is stale: ${b.stale}. The values shown are the last it held; the page follows a new daemon of that name when one starts.`));
    } else if (b.state !== "running") cls = "ended";
    if (this.ended) { text = "not watched any more · " + text; cls = "ended"; }
    status.textContent = text;
    status.className = "status " + cls;
  }
}

// a live meters session's lines into a view
class MetersFeed {
  constructor(view) { this.view = view; this.descs = new Map(); this.k = null; this.started = null; cc.docs.meters = null; }
  add(lines) {
    for (const o of lines) {
      if (o.type === "header" && o.format === "corecast-meters") { this.descs.set(o.desc, o.description); this.take(o.desc, o.values); }
      else if (o.type === "meters") this.take(o.desc, o.values);
      else if (o.type === "error") this.view.message(o.message, "error");
      else if (o.type === "end") this.view.ended = o;
    }
    this.view.render();
  }
  take(k, values) {
    const d = this.descs.get(k);
    if (!d) return;
    const doc = joinMeters(d, values);
    cc.docs.meters = doc;
    if (k !== this.k || doc.started_unix_s !== this.started) {     // the first board, or a new daemon's
      this.k = k;
      this.started = doc.started_unix_s;
      this.view.describe({
        meters: doc.meters.map((m) => ({ name: m.name, scope: m.scope, level: m.level, unit: m.unit, source: m.source, available: m.quality !== "unavailable" })),
        triggers: doc.triggers.map((t) => ({ name: t.name, meter: t.meter, scope: t.scope, low: t.low, high: t.high, dwell_s: t.dwell_s })),
        advice: doc.advice.map((a) => ({ scope: a.scope, min_workers: a.min_workers, max_workers: a.max_workers, policy: a.policy })),
      });
    }
    this.view.setBoard(doc);
    if (doc.ticks > 0 && doc.heartbeat_unix_s)
      this.view.frame(doc.heartbeat_unix_s - doc.started_unix_s, {
        meters: doc.meters.map((m) => (m.quality === "unavailable" ? null : m)),
        triggers: doc.triggers.map((t) => ({ state: t.state, value: t.value, transitions: t.transitions })),
        advice: doc.advice.map((a) => ({ allowed: a.allowed_workers, high: a.high_triggers })),
      });
  }
}

// the kind of a scope from its name (a recording keeps names only): node, socketN, coreN,
// pidP, pidP.threadK
function scopeLevel(s) {
  if (s === "node") return "node";
  if (/^socket\d+$/.test(s)) return "socket";
  if (/^core\d+$/.test(s)) return "core";
  if (/^pid\d+$/.test(s)) return "process";
  if (/\.thread\d+$/.test(s)) return "thread";
  return "";
}

// a recording (`meters replay --json` and its rows) into a view
function replayMeters(view, doc) {
  const r = doc.replay, rows = doc.dataset.rows;
  view.describe({
    meters: [...r.meters.map((s) => ({ name: s.meter, scope: s.scope, level: scopeLevel(s.scope), unit: s.unit, source: s.source, available: true })),
      ...r.unavailable.map((u) => ({ name: u.meter, scope: u.scope, source: u.reason, available: false }))],
    triggers: r.triggers.map((t) => ({ name: t.trigger, meter: t.meter, scope: t.scope, low: t.low, high: t.high, dwell_s: t.dwell_s })),
    advice: r.advice.map((a) => ({ scope: a.scope, policy: null })),
  });
  for (const row of rows) {
    if (row.elapsed_s === null || row.elapsed_s === undefined) continue;
    view.frame(row.elapsed_s, {
      meters: r.meters.map((s) => ({ avg: row[s.column] ?? null, tid: row["tid@" + s.scope] ?? null })),
      // a trigger's value is its meter's window average at its scope: that column
      triggers: r.triggers.map((t) => ({ state: row[t.column] === null || row[t.column] === undefined ? null : row[t.column] > 0 ? "high" : "low",
        value: row[`${t.meter}@${t.scope}`] ?? null })),
      advice: r.advice.map((a) => ({ allowed: row[a.column] ?? null })),
    });
  }
}

// `corecast meters replay --json`'s statistics and trigger changes
function replayStats(r) {
  const out = h("div", { id: "meters-replay-stats" });
  out.append(h("h3", {}, `Statistics (corecast meters replay): ${r.windows} windows over ${fmt(r.span_s)} s`),
    table(["meter", "scope", "mean", "min", "p95", "max", "unit"], r.meters.map((s) => [s.meter, s.scope, s.mean, s.min, s.p95, s.max, s.unit]), { text: [1, 6], cls: "meters-replay" }));
  for (const t of r.triggers)
    out.append(h("p", { class: "note" }, `trigger ${t.trigger} at ${t.scope}: ` + (t.transitions.map((c) => `${c.change} at ${fmt(c.elapsed_s)} s`).join(", ") || "no change")));
  for (const a of r.advice) out.append(h("p", { class: "note" }, `allowed_workers at ${a.scope}: ${fmt(a.min)} to ${fmt(a.max)}`));
  return out;
}
