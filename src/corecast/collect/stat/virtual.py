"""Virtual counters sampled in the same tick as the events: run-queue delay, run time, time
slices, context switches, PSI, energy (RAPL), cache occupancy and memory bandwidth (resctrl)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ...errors import UserError
from .. import sources





# ============================================================================================
# virtual counters

@dataclass
class VirtValue:
    name: str
    value: float | None
    unit: str
    status: str = "ok"         # ok | unavailable
    message: str = ""
    scope: str = "thread"      # thread | process | system

    def to_dict(self) -> dict:
        return {"name": self.name, "value": self.value, "unit": self.unit, "status": self.status,
                "message": self.message, "scope": self.scope}


VIRTUAL_COUNTERS: dict[str, tuple[str, str, str]] = {
    # name: (unit, scope, description)
    "runq_delay": ("ns", "thread", "time waiting on a run queue (schedstat)"),
    "run_time": ("ns", "thread", "time on CPU (schedstat)"),
    "timeslices": ("count", "thread", "timeslices run (schedstat)"),
    "ctxsw": ("count", "thread", "context switches, voluntary + involuntary (/proc status)"),
    "ctxsw_vol": ("count", "thread", "voluntary context switches (/proc status)"),
    "ctxsw_invol": ("count", "thread", "involuntary context switches (/proc status)"),
    "psi_cpu_some": ("us", "system", "PSI: time some task waited for a CPU"),
    "psi_cpu_full": ("us", "system", "PSI: time all non-idle tasks waited for a CPU"),
    "psi_mem_some": ("us", "system", "PSI: time some task stalled on memory"),
    "psi_mem_full": ("us", "system", "PSI: time all non-idle tasks stalled on memory"),
    "psi_io_some": ("us", "system", "PSI: time some task stalled on I/O"),
    "psi_io_full": ("us", "system", "PSI: time all non-idle tasks stalled on I/O"),
    "energy": ("J", "system", "RAPL energy of all packages (powercap)"),
    "energy_dram": ("J", "system", "RAPL DRAM energy (powercap)"),
    "llc_occupancy": ("bytes", "process", "LLC occupancy of the target's threads (resctrl)"),
    "mem_bw": ("bytes", "process", "memory traffic of the target's threads (resctrl mbm_total)"),
    "mem_bw_local": ("bytes", "process", "local memory traffic (resctrl mbm_local)"),
}
VIRTUAL_ALIASES = {"psi_memory_some": "psi_mem_some", "psi_memory_full": "psi_mem_full",
                   "schedstat": "runq_delay", "context_switches": "ctxsw", "rapl": "energy"}


def parse_virtual(text: str | Sequence[str] | None) -> list[str]:
    if not text:
        return []
    items = text.split(",") if isinstance(text, str) else [i for t in text for i in t.split(",")]
    out = []
    for it in items:
        k = it.strip().lower()
        if not k:
            raise UserError(f"-V '{text}': empty virtual counter name")
        k = VIRTUAL_ALIASES.get(k, k)
        if k == "psi":
            out.extend(n for n in VIRTUAL_COUNTERS if n.startswith("psi_"))
            continue
        if k not in VIRTUAL_COUNTERS:
            raise UserError(f"-V: unknown virtual counter '{it.strip()}' (known: "
                            f"{', '.join(VIRTUAL_COUNTERS)}, psi)")
        if k not in out:
            out.append(k)
    return out


class VirtualSampler:
    """Reads the virtual counters; `sample()` is called in the same tick as the counters."""

    def __init__(self, names: Sequence[str], pid: int, proc: Path = sources.PROC,
                 sys_root: Path = sources.SYS):
        self.names = list(names)
        self.pid = pid
        self.proc = proc
        self.sys_root = sys_root
        self.unavailable: dict[str, str] = {}
        self._prev_thread: dict[tuple[str, int], float] = {}
        self._prev_sys: dict[str, float] = {}
        self._rapl: list[sources.RaplDomain] = []
        self._resctrl: sources.ResctrlGroup | None = None
        self._setup()

    def _setup(self) -> None:
        want = set(self.names)
        if want & {"runq_delay", "run_time", "timeslices"}:
            why = sources.schedstat_unavailable(self.proc)
            if why is None and self.pid <= 0:
                why = "schedstat is per thread: give a command or -p PID"
            if why:
                for n in want & {"runq_delay", "run_time", "timeslices"}:
                    self.unavailable[n] = why
        if want & {"ctxsw", "ctxsw_vol", "ctxsw_invol"} and self.pid <= 0:
            for n in want & {"ctxsw", "ctxsw_vol", "ctxsw_invol"}:
                self.unavailable[n] = "context switches are per thread: give a command or -p PID"
        psi_names = [n for n in want if n.startswith("psi_")]
        if psi_names:
            p = sources.psi(proc=self.proc)
            if isinstance(p, sources.Unavailable):
                for n in psi_names:
                    self.unavailable[n] = p.reason
            else:
                for n in psi_names:
                    res = {"cpu": "cpu", "mem": "memory", "io": "io"}[n.split("_")[1]]
                    if res not in p:
                        self.unavailable[n] = f"/proc/pressure/{res} is missing"
                    elif n.endswith("_full") and p[res].full_us is None:
                        self.unavailable[n] = f"this kernel has no 'full' line in /proc/pressure/{res}"
        if want & {"energy", "energy_dram"}:
            r = sources.rapl_domains(self.sys_root)
            if isinstance(r, sources.Unavailable):
                for n in want & {"energy", "energy_dram"}:
                    self.unavailable[n] = r.reason
            else:
                self._rapl = r
                if "energy_dram" in want and not any(d.name.startswith("dram") for d in r):
                    self.unavailable["energy_dram"] = "no RAPL DRAM domain on this machine"
                if "energy" in want and not any(d.name.startswith("package") for d in r):
                    self.unavailable["energy"] = "no RAPL package domain on this machine"
        rc = want & {"llc_occupancy", "mem_bw", "mem_bw_local"}
        if rc:
            if self.pid <= 0:
                why: str | None = "resctrl monitoring follows the target's threads: give a command or -p PID"
            else:
                # named to corecast-sentinel as it is made: removed by `close`, or by the
                # sentinel if corecast ends without closing (SIGKILL included)
                g = sources.resctrl_group(f"corecast-{os.getpid()}-{self.pid}", self.sys_root)
                why = g.reason if isinstance(g, sources.Unavailable) else None
                if not isinstance(g, sources.Unavailable):
                    self._resctrl = g
            if why:
                for n in rc:
                    self.unavailable[n] = why
        # prime system-wide baselines
        self._system_now()

    def add_threads(self, tids: Sequence[int]) -> None:
        if self._resctrl is not None:
            self._resctrl.add_tasks(tids)

    def _system_now(self) -> dict[str, float]:
        cur: dict[str, float] = {}
        names = [n for n in self.names if n not in self.unavailable]
        if any(n.startswith("psi_") for n in names):
            p = sources.psi(proc=self.proc)
            if not isinstance(p, sources.Unavailable):
                for n in names:
                    if n.startswith("psi_"):
                        res = {"cpu": "cpu", "mem": "memory", "io": "io"}[n.split("_")[1]]
                        pr = p.get(res)
                        if pr is not None:
                            v = pr.full_us if n.endswith("_full") else pr.some_us
                            if v is not None:
                                cur[n] = float(v)
        for d in self._rapl:
            e = sources.read_energy_uj(d)
            if e is not None:
                cur[f"rapl:{d.name}"] = float(e)
        if self._resctrl is not None:
            r = self._resctrl.read()
            for key, n in (("llc_occupancy", "llc_occupancy"), ("mbm_total_bytes", "mem_bw"),
                           ("mbm_local_bytes", "mem_bw_local")):
                if r.get(key) is not None:
                    cur[n] = float(r[key])  # type: ignore[arg-type]
        return cur

    def sample_system(self) -> dict[str, VirtValue]:
        """System- and process-scope counters: deltas since the previous call."""
        cur = self._system_now()
        out: dict[str, VirtValue] = {}
        for n in self.names:
            unit, scope, _ = VIRTUAL_COUNTERS[n]
            if scope == "thread":
                continue
            if n in self.unavailable:
                out[n] = VirtValue(n, None, unit, "unavailable", self.unavailable[n], scope)
                continue
            if n in ("energy", "energy_dram"):
                total, seen = 0.0, False
                for d in self._rapl:
                    if (n == "energy") != d.name.startswith("package"):
                        continue
                    k = f"rapl:{d.name}"
                    if k in cur and k in self._prev_sys:
                        total += sources.energy_delta_uj(int(cur[k]), int(self._prev_sys[k]), d.max_uj)
                        seen = True
                out[n] = VirtValue(n, total / 1e6 if seen else None, unit, "ok", "" if seen else
                                 "RAPL could not be read at this tick or the one before", scope)
                continue
            if n == "llc_occupancy":
                out[n] = VirtValue(n, cur.get(n), unit, "ok", "" if n in cur else "could not be read at this tick",
                                   scope)
                continue
            if n in cur and n in self._prev_sys:
                out[n] = VirtValue(n, cur[n] - self._prev_sys[n], unit, "ok", "", scope)
            else:
                why = "could not be read at this tick" if n not in cur else \
                    "could not be read at the tick before (no difference to take)"
                out[n] = VirtValue(n, None, unit, "ok", why, scope)
        self._prev_sys = cur
        return out

    def sample_thread(self, tid: int, final: bool = False, pid: int | None = None) -> dict[str, VirtValue]:
        """Thread-scope counters of thread `tid` of process `pid` (default: the target)."""
        pid = self.pid if pid is None else pid
        out: dict[str, VirtValue] = {}
        st = ctx = None
        for n in self.names:
            unit, scope, _ = VIRTUAL_COUNTERS[n]
            if scope != "thread":
                continue
            if n in self.unavailable:
                out[n] = VirtValue(n, None, unit, "unavailable", self.unavailable[n], scope)
                continue
            if n in ("runq_delay", "run_time", "timeslices"):
                if st is None:
                    st = sources.thread_schedstat(pid, tid, self.proc)
                cur = None if st is None else {"runq_delay": st.wait_ns, "run_time": st.run_ns,
                                               "timeslices": st.timeslices}[n]
            else:
                if ctx is None:
                    ctx = sources.context_switches(pid, tid, self.proc)
                cur = None if ctx is None else {"ctxsw": ctx.total, "ctxsw_vol": ctx.voluntary,
                                                "ctxsw_invol": ctx.involuntary}[n]
            key = (n, tid)
            if cur is None:
                msg = "the thread exited before it could be read" if final else "its /proc files could not be read"
                out[n] = VirtValue(n, None, unit, "ok", msg, scope)
                continue
            prev = self._prev_thread.get(key, 0.0)
            self._prev_thread[key] = float(cur)
            out[n] = VirtValue(n, float(cur) - prev, unit, "ok", "", scope)
        return out

    def close(self) -> None:
        if self._resctrl is not None:
            self._resctrl.remove()
            self._resctrl = None
