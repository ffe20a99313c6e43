"""Per-thread instruction counts for the enforcing mode, where the PMU counts them
(perf_event_open through corecast.collect.perf); without them progress is the task clock."""
from __future__ import annotations

from typing import Any

from ...errors import UserError

SOURCES = ("auto", "instructions", "taskclock")


class Instructions:
    """One instructions counter per thread, read as a delta every quantum."""

    def __init__(self) -> None:
        from ...collect.events import resolve
        from ...collect.perf import probe
        self.spec = resolve("instructions")[0]
        status = probe([self.spec])[0]
        self.ok = status[1] == "ok"
        self.why = "" if self.ok else f"instructions: {status[1]}" + (f" ({status[2]})" if status[2] else "")
        self.sets: dict[int, Any] = {}
        self.last: dict[int, float] = {}

    def delta(self, tid: int) -> float | None:
        from ...collect.perf import open_counters
        cs = self.sets.get(tid)
        if cs is None:
            try:
                cs = open_counters([self.spec], pid=tid, inherit=False)
            except UserError:
                return None
            self.sets[tid] = cs
            self.last[tid] = 0.0
        v = cs.read()[0].value
        if v is None:
            return None
        d = v - self.last[tid]
        self.last[tid] = v
        return max(0.0, d)

    def close(self) -> None:
        for cs in self.sets.values():
            cs.close()
        self.sets.clear()


def choose(source: str) -> tuple[Instructions | None, str]:
    """The instruction counters to use (or None) and a line saying where progress comes from."""
    if source not in SOURCES:
        raise UserError(f"--progress {source}: choose {', '.join(SOURCES)}")
    if source == "taskclock":
        return None, "task clock (/proc/PID/task/TID/schedstat)"
    ins = Instructions()
    if ins.ok:
        return ins, "instructions (perf_event_open, per thread); CPU time from the task clock"
    if source == "instructions":
        raise UserError(f"--progress instructions: not countable here ({ins.why})")
    return None, f"task clock (/proc/PID/task/TID/schedstat): {ins.why}"
