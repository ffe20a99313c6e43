"""The PMCTrack-style table, CSV and JSON-lines writers of `corecast stat`.

Every value not counted says why, as perf prints `<not supported>` or `<not counted>`: the
totals give the status and the reason in every format (`event_totals`), a row's value carries
its status and message in CSV and JSON, and the table, whose rows show `-`, says why in a note
for each reason not already on a totals line.
"""
from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, TextIO

from .rows import Row, _fmt_num, not_counted_reason
from .virtual import VIRTUAL_COUNTERS

if TYPE_CHECKING:
    from .monitor import Monitor


FLUSH_PERIOD = 0.05     # writers flush when they are idle and this long has passed since the last flush

# ============================================================================================
# writers

_DASH14 = "%14s" % "-"
_BLANK14 = "%14s" % ""


def event_totals(m: Monitor):
    """Each set's total of each event, as every writer prints it: (set, label, spec, acc,
    counted, status, reason) with `acc` the sums [value, raw, enabled_ns, running_ns] and
    `reason` why it was not counted ("" when it was)."""
    t = m.totals
    for i, mp in enumerate(m.mappings):
        d = t.per_set[i] if i < len(t.per_set) else {}
        st = t.status[i] if i < len(t.status) else {}
        for label, e in mp:
            acc = d.get(e.name)
            status, msg = st.get(e.name, ("ok", ""))
            if status != "ok":
                why = msg or status
            elif acc is None:
                why = ("its set was never the live one (the run ended before its turn)" if len(m.mappings) > 1
                       else "no sample was taken")
            elif not acc[3]:
                why = not_counted_reason(acc[2], acc[3])
            else:
                why = ""
            yield i, label, e, acc or [0.0, 0, 0, 0], not why, status, why


class Writer:
    """Streams rows as they are measured. Rows are flushed when the monitor is about to sleep
    and FLUSH_PERIOD has passed since the last flush (`flush_due`, the monitor's `idle`
    callback), so a row reaches the output at most ~0.1 s after it was measured (at every
    tick when -T >= 0.05), and always at the end of the run, on a signal and on an error."""

    def __init__(self, out: TextIO, monitor: Monitor):
        self.out = out
        self.mon = monitor
        self._flushed = time.monotonic()
        self._dirty = False

    def header(self) -> None: ...
    def row(self, r: Row) -> None: ...
    def summary(self) -> None: ...

    def flush(self) -> None:
        self.out.flush()
        self._flushed = time.monotonic()
        self._dirty = False

    def flush_due(self) -> None:
        """Flush what was written when FLUSH_PERIOD has passed since the last flush."""
        if self._dirty and time.monotonic() - self._flushed >= FLUSH_PERIOD:
            self.flush()

    def regions(self, regions: dict[str, dict]) -> None:
        """Totals of the code regions the program marked (corecast.region / corecast_region.h)."""
        if not regions:
            return
        w = self.out
        if isinstance(self, JsonWriter):
            w.write(json.dumps({"type": "regions", "regions": regions}) + "\n")
        elif isinstance(self, CsvWriter):
            import csv                      # here: a table needs none (start-up time)
            cw = csv.writer(w, lineterminator="\n")
            for name, t in regions.items():
                for k, v in t.items():
                    cw.writerow(["region", name, k, "" if v is None else v])
        else:
            w.write("[Regions]\n")
            keys = ["calls", "wall_ns", "task_clock_ns", "context_switches", "page_faults", "instructions", "cycles"]
            w.write(f"{'region':<20}" + "".join(f"{k:>18}" for k in keys) + "\n")
            for name, t in regions.items():
                w.write(f"{name:<20}" + "".join(f"{_fmt_num(t.get(k)):>18}" for k in keys) + "\n")
        w.flush()


class TableWriter(Writer):
    """PMCTrack's layout: `[Event-to-counter mappings]`, then `[Event counts]` with one line
    per sample: nsample, pid, event (tick/ebs/exit), then the counters."""

    def header(self) -> None:
        m = self.mon
        w = self.out
        if m.totals_only:
            return
        w.write("[Event-to-counter mappings]\n")
        multi = len(m.mappings) > 1
        for i, mp in enumerate(m.mappings):
            for label, e in mp:
                prefix = f"set{i}: " if multi else ""
                extra = f"  ({e.description})" if e.description and e.origin not in ("pmctrack",) else ""
                w.write(f"{prefix}{label}={e.name}{extra}\n")
        for j, n in enumerate(m.virtual_names):
            msg = ""
            if m.vsampler is not None and n in m.vsampler.unavailable:
                msg = f"  (unavailable: {m.vsampler.unavailable[n]})"
            w.write(f"virt{j}={n}{msg}\n")
        for met in m.metrics:
            w.write(f"{met.name}={met.expr}\n")
        w.write("[Event counts]\n")
        self.ncols = max((len(mp) for mp in m.mappings), default=0)
        cols = [f"{'nsample':>7}", f"{'time_s':>9}"]
        cols.append(f"{'cpu':>6}" if m.per_cpu else f"{'pid':>7}")
        if not m.per_cpu and not m.totals_only:
            cols.append(f"{'tid':>7}")
        cols.append(f"{'event':>9}")      # tick, ebs, exit, or what ended the run (interrupt, ...)
        if multi:
            cols.append(f"{'set':>4}")
        labels = m.mappings[0] if not multi else [(f"pmc{j}", None) for j in range(self.ncols)]
        for label, _ in labels:
            cols.append(f"{label:>14}")
        for j, _ in enumerate(m.virtual_names):
            cols.append(f"{'virt' + str(j):>12}")
        for met in m.metrics:
            cols.append(f"{met.name:>10}")
        w.write(" ".join(cols) + "\n")
        self._dashes: dict[tuple[str, str], int] = {}      # (name, why) -> rows with a '-' for it
        # the fixed part of every row, as one format (see row)
        lead = "%7d %9.3f " + ("%6s" if m.per_cpu else "%7d %7s") + " %9s"
        self._multi = multi
        self._lead = lead + (" %4d" if multi else "")
        w.flush()

    def row(self, r: Row) -> None:
        m = self.mon
        if m.totals_only:
            return
        if m.per_cpu:
            lead = (r.nsample, r.time_s, "-" if r.cpu is None else r.cpu, r.sample_type)
        else:
            lead = (r.nsample, r.time_s, r.pid, "-" if r.tid is None else r.tid, r.sample_type)
        if self._multi:
            lead += (r.set_index,)
        cols = [self._lead % lead]
        values = r.values
        for v in values[:self.ncols]:
            if v.status != "ok":
                cols.append(_DASH14)          # the totals line says why
                continue
            val = v.value
            if val is None:
                self._dash(v.name, v.message)
                cols.append(_DASH14)
                continue
            if val.__class__ is float and val.is_integer() and -1e15 < val < 1e15:
                txt = "%d" % val              # what _fmt_num gives an integral count
            else:
                txt = _fmt_num(val, v.spec.unit if v.spec else "count")
            if val is not None and v.running_ns < v.enabled_ns:
                txt = "~" + txt               # estimated: the kernel multiplexed this counter
            cols.append("%14s" % txt)
        if len(values) < self.ncols:
            cols.extend([_BLANK14] * (self.ncols - len(values)))
        if m.virtual_names:
            for n in m.virtual_names:
                vv = r.virt.get(n)
                if vv is not None and vv.value is None and vv.status == "ok":
                    self._dash(n, vv.message or "no reading")
                cols.append("%12s" % _fmt_num(vv.value if vv else None, vv.unit if vv else "count"))
        if m.metrics:
            for met in m.metrics:
                val = r.metrics.get(met.name)
                if val is None:
                    self._dash(met.name, "undefined: a value it needs was not counted, or a division by zero")
                cols.append(f"{('-' if val is None else f'{val:.4g}'):>10}")
        self.out.write(" ".join(cols) + "\n")
        self._dirty = True

    def _dash(self, name: str, why: str) -> None:
        """A row shows '-' for `name`: count it under its reason, said at the end."""
        key = (name, why or "not counted")
        self._dashes[key] = self._dashes.get(key, 0) + 1

    def summary(self) -> None:
        m = self.mon
        w = self.out
        t = m.totals
        title = "[Totals]" if not m.totals_only else "[Event totals]"
        w.write(f"{title}\n")
        given: set[tuple[str, str]] = set()       # reasons a totals line already gives
        for i, label, e, acc, counted, status, why in event_totals(m):
            prefix = f"set{i} " if len(m.mappings) > 1 else ""
            if not counted:
                given.add((e.name, why))
                st = f"<{status}>" if status != "ok" else "<not counted>"
                w.write(f"{prefix}{label:<6} {e.name:<32} {st:>18}  {why}\n")
                continue
            pct = f"  ({100.0 * acc[3] / acc[2]:.1f}% running)" if acc[2] and acc[3] < acc[2] else ""
            unit = f" {e.unit}" if e.unit != "count" else ""
            w.write(f"{prefix}{label:<6} {e.name:<32} {_fmt_num(acc[0], e.unit):>18}{unit}{pct}\n")
        for n in m.virtual_names:
            vi = t.virt_info.get(n)
            if vi is not None and vi.status != "ok":
                w.write(f"virt   {n:<32} {'<unavailable>':>18}  {vi.message}\n")
            elif t.virt.get(n) is None:
                why = t.virt_why.get(n, "no sample was taken")
                given.add((n, why))
                w.write(f"virt   {n:<32} {'<not counted>':>18}  {why}\n")
            else:
                unit = VIRTUAL_COUNTERS[n][0]
                w.write(f"virt   {n:<32} {_fmt_num(t.virt.get(n), unit):>18} {unit}\n")
        if t.lost_samples or t.throttled:
            w.write(f"lost samples: {t.lost_samples}; throttled: {t.throttled}\n")
        if m.inherited is not None:
            w.write("[Process totals] (inherited counters: every thread, from the kernel)\n")
            for i, (mp, vals) in enumerate(zip(m.mappings, m.inherited)):
                prefix = f"set{i} " if len(m.mappings) > 1 else ""
                for (label, e), v in zip(mp, vals):
                    if v.status != "ok" or v.value is None:
                        why = v.message or v.status
                        st = f"<{v.status}>" if v.status != "ok" else "<not counted>"
                        w.write(f"{prefix}{label:<6} {e.name:<32} {st:>18}  {why}\n")
                        continue
                    unit = f" {e.unit}" if e.unit != "count" else ""
                    pct = f"  ({100.0 * v.running_ns / v.enabled_ns:.1f}% running)" if v.scaled else ""
                    w.write(f"{prefix}{label:<6} {e.name:<32} {_fmt_num(v.value, e.unit):>18}{unit}{pct}\n")
        for note in m.notes:
            w.write(f"note: {note}\n")
        for (name, why), n in getattr(self, "_dashes", {}).items():
            if (name, why) not in given:
                w.write(f"note: '-' for {name} in {n} row{'s' if n > 1 else ''}: {why}\n")
        w.flush()


class CsvWriter(Writer):
    """One line per (sample, counter): nsample,time_s,pid,tid,cpu,comm,sample_type,set,
    kind,name,value,raw,enabled_ns,running_ns,status,unit,message."""

    FIELDS = ["nsample", "time_s", "pid", "tid", "cpu", "comm", "sample_type", "set", "kind", "name",
              "value", "raw", "enabled_ns", "running_ns", "status", "unit", "message"]
    separator = ","          # perf's --field-separator

    def header(self) -> None:
        import csv
        self.w = csv.writer(self.out, lineterminator="\n", delimiter=self.separator)
        if not self.mon.totals_only:
            self.w.writerow(self.FIELDS)

    def row(self, r: Row) -> None:
        if self.mon.totals_only:
            return
        base = [r.nsample, f"{r.time_s:.6f}", r.pid, "" if r.tid is None else r.tid,
                "" if r.cpu is None else r.cpu, r.comm, r.sample_type, r.set_index]
        for v in r.values:
            self.w.writerow(base + ["counter", v.name, "" if v.value is None else repr(float(v.value)),
                                    "" if v.raw is None else v.raw, v.enabled_ns, v.running_ns, v.status,
                                    v.spec.unit if v.spec else "count", v.message])
        for n, vv in r.virt.items():
            self.w.writerow(base + ["virtual", n, "" if vv.value is None else repr(float(vv.value)), "", "",
                                    "", vv.status, vv.unit, vv.message])
        for n, val in r.metrics.items():
            self.w.writerow(base + ["metric", n, "" if val is None else repr(float(val)), "", "", "",
                                    "ok" if val is not None else "undefined", "", ""])
        self._dirty = True

    def summary(self) -> None:
        if not self.mon.totals_only:
            return
        self.w.writerow(["set", "kind", "name", "value", "raw", "enabled_ns", "running_ns", "status", "message"])
        t = self.mon.totals
        for i, _, e, acc, counted, status, why in event_totals(self.mon):
            self.w.writerow([i, "counter", e.name, repr(float(acc[0])) if counted else "",
                             acc[1] if counted else "", acc[2], acc[3], status, why])
        for n in self.mon.virtual_names:
            vi = t.virt_info.get(n)
            val = t.virt.get(n)
            st = vi.status if vi else "ok"
            why = vi.message if vi and st != "ok" else (t.virt_why.get(n, "no sample was taken") if val is None else "")
            self.w.writerow(["", "virtual", n, "" if val is None else repr(float(val)), "", "", "", st, why])
        self.out.flush()


class JsonWriter(Writer):
    """JSON lines: a `header` object (mappings, virtual counters, metrics), one `sample` object
    per row, and a closing `summary` object (totals with enabled/running and status)."""

    def header(self) -> None:
        m = self.mon
        hdr = {"type": "header", "format": "corecast-stat", "version": 1, "interval_s": m.interval,
               "per_cpu": m.per_cpu, "totals_only": m.totals_only, "ebs": m.ebs,
               "target": {"kind": m.target.kind, "pid": m.target.pid, "argv": m.target.argv},
               "sets": [[{"label": label, **e.to_dict()} for label, e in mp] for mp in m.mappings],
               "virtual": [{"name": n, "unit": VIRTUAL_COUNTERS[n][0], "scope": VIRTUAL_COUNTERS[n][1],
                            "description": VIRTUAL_COUNTERS[n][2],
                            "unavailable": (m.vsampler.unavailable.get(n) if m.vsampler else None)}
                           for n in m.virtual_names],
               "metrics": [{"name": x.name, "expr": x.expr} for x in m.metrics]}
        self.out.write(json.dumps(hdr) + "\n")
        self.out.flush()

    def row(self, r: Row) -> None:
        if self.mon.totals_only:
            return
        self.out.write(json.dumps({"type": "sample", **r.to_dict()}) + "\n")
        self._dirty = True

    def summary(self) -> None:
        m = self.mon
        t = m.totals
        sets: list[list[dict]] = [[] for _ in m.mappings]
        for i, label, e, acc, counted, status, why in event_totals(m):
            sets[i].append({"label": label, "name": e.name, "value": acc[0] if counted else None,
                            "raw": acc[1] if counted else None, "enabled_ns": acc[2], "running_ns": acc[3],
                            "status": status, "message": why})
        virt = {}
        for n in m.virtual_names:
            vi = t.virt_info.get(n)
            st = vi.status if vi else "ok"
            val = t.virt.get(n)
            why = vi.message if vi and st != "ok" else (t.virt_why.get(n, "no sample was taken") if val is None else "")
            virt[n] = {"value": val, "unit": VIRTUAL_COUNTERS[n][0], "status": st, "message": why}
        process = None
        if m.inherited is not None:
            process = [[{"label": label, **v.to_dict()} for (label, _), v in zip(mp, vals)]
                       for mp, vals in zip(m.mappings, m.inherited)]
        self.out.write(json.dumps({"type": "summary", "rows": t.rows, "sets": sets, "virtual": virt,
                                   "lost_samples": t.lost_samples, "throttled": t.throttled,
                                   "threads": m.threads_followed or None, "process_totals": process,
                                   "exit_status": m.target.exit_status, "notes": m.notes}) + "\n")
        self.out.flush()


WRITERS: dict[str, type[Writer]] = {"table": TableWriter, "csv": CsvWriter, "json": JsonWriter}
