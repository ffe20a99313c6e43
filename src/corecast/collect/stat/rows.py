"""The rows `corecast stat` produces (one per thread or CPU per sample) and their totals."""
from __future__ import annotations

from dataclasses import dataclass, field

from typing import Any, Sequence

from ..events.spec import EventSpec
from ..perf import CounterValue, interval_value
from .metrics import aliases
from .virtual import VirtValue


# ============================================================================================
# rows

def _reading(v: CounterValue) -> Any:
    """A counter's reading as the monitor keeps it: (raw, enabled_ns, running_ns, lost) when it
    was read, else the CounterValue that says why not."""
    if v.status == "ok" and v.raw is not None:
        return (v.raw, v.enabled_ns, v.running_ns, v.lost)
    return v


def _deltas(specs: Sequence[EventSpec], cur: Sequence[Any], prev: Sequence[Any] | None) -> list[CounterValue]:
    """The counts between two readings of the same counters (`perf.delta_value` on readings),
    scaled by that interval's enabled/running times."""
    out = []
    for i, c in enumerate(cur):
        if c.__class__ is not tuple:
            out.append(c)
            continue
        raw, en, run, lost = c
        p = prev[i] if prev is not None else None
        if p is not None and p.__class__ is tuple:
            raw -= p[0]
            en -= p[1]
            run -= p[2]
            if lost is not None:
                lost -= p[3] or 0
        val, msg = interval_value(raw, en, run)
        spec = specs[i]
        out.append(CounterValue(spec.name, val, raw, en, run, "ok", msg, lost, spec))
    return out


@dataclass(slots=True)
class Row:
    nsample: int
    time_s: float
    pid: int
    tid: int | None
    cpu: int | None
    comm: str
    sample_type: str                  # tick | ebs | exit, or what ended the monitoring (signals.END_CAUSES)
    set_index: int
    values: list[CounterValue]        # counts in this interval, for the live set
    virt: dict[str, VirtValue] = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)
    interval_ns: int = 0

    def env(self) -> dict[str, float | None]:
        env: dict[str, float | None] = {"interval_ns": float(self.interval_ns)}
        stalls = [v.value for v in self.values if v.spec is not None and v.spec.name.startswith("stall_")]
        for v in self.values:                  # a fixed counter's mnemonic, unless the set names it
            if v.spec is not None:
                for alias in aliases(v.spec):
                    env[alias] = v.value
        for v in self.values:
            if v.spec is not None:
                env[v.spec.ident] = v.value
                env[v.spec.label] = v.value
        if stalls:
            env["backend_stalls"] = None if any(s is None for s in stalls) else float(sum(stalls))  # type: ignore[arg-type]
        for k, vv in self.virt.items():
            env[k] = vv.value
        return env

    def to_dict(self) -> dict:
        return {"nsample": self.nsample, "time_s": round(self.time_s, 6), "pid": self.pid, "tid": self.tid,
                "cpu": self.cpu, "comm": self.comm, "sample_type": self.sample_type, "set": self.set_index,
                "interval_ns": self.interval_ns,
                "counters": [v.to_dict() for v in self.values],
                "virtual": {k: v.to_dict() for k, v in self.virt.items()},
                "metrics": self.metrics}


@dataclass
class Totals:
    """Sums over the whole run, per set and event (for -A and the closing summary)."""

    per_set: list[dict[str, list[float]]] = field(default_factory=list)   # name -> [value, raw, en, run]
    status: list[dict[str, tuple[str, str]]] = field(default_factory=list)
    virt: dict[str, float | None] = field(default_factory=dict)
    virt_info: dict[str, VirtValue] = field(default_factory=dict)
    virt_why: dict[str, str] = field(default_factory=dict)      # why a virtual counter had no value
    rows: int = 0
    lost_samples: int = 0
    throttled: int = 0

    def add(self, row: Row, count_system_virt: bool) -> None:
        self.rows += 1
        while len(self.per_set) <= row.set_index:
            self.per_set.append({})
            self.status.append({})
        d = self.per_set[row.set_index]
        st = self.status[row.set_index]
        for v in row.values:
            name = v.name
            acc = d.get(name)
            if acc is None:
                acc = d[name] = [0.0, 0, 0, 0]
            ok = v.status == "ok"
            if ok and v.value is not None:
                acc[0] += v.value
                acc[1] += v.raw or 0
            acc[2] += v.enabled_ns
            acc[3] += v.running_ns
            if not ok or name not in st:
                st[name] = (v.status, v.message)
        if not row.virt:
            return
        for k, vv in row.virt.items():
            self.virt_info.setdefault(k, vv)
            if vv.scope != "thread" and not count_system_virt:
                continue
            if vv.value is None:
                self.virt.setdefault(k, None)
                if vv.message:
                    self.virt_why.setdefault(k, vv.message)
                continue
            if k == "llc_occupancy":
                self.virt[k] = max(self.virt.get(k) or 0.0, vv.value)
            else:
                self.virt[k] = (self.virt.get(k) or 0.0) + vv.value


#: What a counter read with a bare "not counted" says (collect.perf's task totals and samples).
_BARE = ("", "not counted")


def not_counted_reason(enabled_ns: int, running_ns: int) -> str:
    """Why a counter that was read has no value, from its enabled and running times (perf
    prints `<not counted>` and no more)."""
    if enabled_ns <= 0:
        return "did not run while monitored (enabled 0 ns: its task was never scheduled)"
    return (f"enabled {enabled_ns / 1e6:.3g} ms but never on a counter (the PMU had no counter free: "
            "fewer hardware events per -c set)")


def why_not_counted(v: CounterValue) -> str:
    """Why `v` has no value: its own message when that says why, else what its status or its
    enabled and running times say."""
    if v.message not in _BARE:
        return v.message
    if v.status != "ok":
        return v.status
    return not_counted_reason(v.enabled_ns, v.running_ns)


def _fmt_num(v: float | None, unit: str = "count") -> str:
    if v is None:
        return "-"
    if unit in ("count", "ns", "us", "bytes") and abs(v - round(v)) < 1e-6 * max(1.0, abs(v)):
        return f"{int(round(v))}"
    if abs(v) >= 1e6 or v == int(v):
        return f"{v:.0f}"
    return f"{v:.4g}"
