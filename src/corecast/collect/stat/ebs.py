"""Event-based sampling rows of the `Monitor`: each thread's sampler drained at a tick into
`ebs` rows, and a thread's `exit` row at its end (from the kernel's count when its threads are
followed through task records, else from its own sampler).

`EbsRows` is a part of `monitor.Monitor` (a mixin: it works on the monitor's state).
"""
from __future__ import annotations

from ..events.spec import EventSpec
from ..perf import CounterValue, scale
from .rows import Row
from .threads import _ThreadState


class EbsRows:
    """The rows of a run with event-based sampling (one event set, per thread)."""

    def _ebs_order(self) -> list[EventSpec]:
        s = self.sets[0]
        return [e for e in s if e.sample_period] + [e for e in s if not e.sample_period]

    def _ebs_rows(self, now: float, final: bool) -> list[Row]:
        out: list[Row] = []
        tracked = self.tracker is not None
        if tracked:
            self._drain_tracker()
            live_tids: set[int] = set()
        else:
            live_tids = set(self.backend.threads(self.target.pid)) if self._look_live(final) else set()
        sysvirt = self.vsampler.sample_system() if self.vsampler is not None else {}
        first = True
        for tid, ts in sorted(self.threads.items()):
            if ts.sampler is not None:
                out.extend(self._ebs_samples(ts, now))
            label = "exit"
            if not tracked:
                gone = final or tid not in live_tids
                own_counts = True
                if final and tid in live_tids:
                    label = self.ended_by
            elif ts.root or (final and not ts.exited):
                gone = final or ts.exited
                own_counts = True
                if not ts.exited:
                    label = self.ended_by
            else:
                gone = final or self._complete(ts)
                own_counts = False
            if not gone:
                continue
            if own_counts:
                if ts.sampler is None:
                    self._close_thread(tid)
                    continue
                vals = self._ebs_own_exit(ts)
            else:
                reported: dict[str, CounterValue] = {}
                if ts.sampler is not None and ts.prev_sample is not None:
                    pen, prun = ts.prev_sample_times
                    opened = [c for c in ts.sampler.counters if c.fd is not None]
                    for c, raw in zip(opened, ts.prev_sample):
                        reported[c.spec.name] = CounterValue(c.spec.name, None, raw, pen, prun, "ok", spec=c.spec)
                own = (lambda ts=ts: {v.name: v for v in self._ebs_own_exit(ts)}) if ts.sampler is not None else None
                vals, _ = self._exit_values(ts, 0, self._ebs_order(), reported, own)
            virt = self.vsampler.sample_thread(tid, True, ts.pid) if self.vsampler is not None else {}
            pid = ts.pid if ts.pid > 0 else self.target.pid
            row = Row(0, now - self.t0, pid, tid, None, ts.comm, label, 0, vals, virt, {}, 0)
            out.append(self._finish_row(row, sysvirt, first))
            first = False
            self._close_thread(tid)
        return out

    def _ebs_samples(self, ts: _ThreadState, now: float) -> list[Row]:
        out = []
        res = ts.sampler.drain()
        self.totals.lost_samples += res.lost_records
        self.totals.throttled += res.throttled
        specs = ts.sampler.specs
        for s in res.samples:
            vals = []
            prev = ts.prev_sample or [0] * len(s.values)
            pen, prun = ts.prev_sample_times
            den, drun = s.enabled_ns - pen, s.running_ns - prun
            opened = [c for c in ts.sampler.counters if c.fd is not None] if hasattr(
                ts.sampler, "counters") else None
            order = [c.spec for c in opened] if opened is not None else specs
            byname = {}
            for spec, cur, p in zip(order, s.values, prev):
                raw = cur - p
                byname[spec.name] = CounterValue(spec.name, scale(raw, den, drun), raw, den, drun, "ok", "",
                                                 None, spec)
            for spec in specs:
                vals.append(byname.get(spec.name) or CounterValue(spec.name, None, None, 0, 0, "invalid",
                                                                  "not in the sampled group", spec=spec))
            ts.prev_sample = s.values
            ts.prev_sample_times = (s.enabled_ns, s.running_ns)
            row = Row(0, now - self.t0, s.pid, s.tid, s.cpu, ts.comm, "ebs", 0, vals, {}, {}, 0)
            out.append(self._finish_row(row, {}, False))
        return out

    def _ebs_own_exit(self, ts: _ThreadState) -> list[CounterValue]:
        """What a thread's sampler counted since its last sample."""
        cur = ts.sampler.read()
        prev = ts.prev_sample
        pen, prun = ts.prev_sample_times
        vals = []
        for i, c in enumerate(cur):
            if c.status != "ok" or c.raw is None:
                vals.append(c)
                continue
            praw = prev[i] if prev and i < len(prev) else 0
            raw = c.raw - praw
            den, drun = c.enabled_ns - pen, c.running_ns - prun
            vals.append(CounterValue(c.name, scale(raw, den, drun), raw, den, drun, "ok", "", c.lost, c.spec))
        return vals
