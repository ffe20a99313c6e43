"""The simulation result: per-level MPKI, TLB and branch MPKI, coherence events, baseline CPI
and the per-1K-instruction events a CPI stack multiplies by the machine's penalties.

`SimResult.to_dict()` is the JSON `corecast sim --json` prints and `corecast throughput
--sim FILE` reads (`SimResult.load(path)`); docs/sim.md describes every field.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError

if TYPE_CHECKING:
    from . import native as N
    from .engine import SimOptions
    from .machine import MachineDescription

FORMAT = "corecast-sim-result"
VERSION = 1
CLASSES = ("fetch", "load", "store", "modify")
EXPOSED = ("fetch", "load", "modify")


def _per_k(n: float, instructions: int) -> float | None:
    return None if instructions <= 0 else 1000.0 * n / instructions


@dataclass
class SimResult:
    machine: dict[str, Any]
    trace: dict[str, Any]
    cores: int
    split: str
    warmup_instructions: int
    instructions: int
    transactions: int | None
    instructions_per_transaction: float | None
    accesses: dict[str, int]
    caches: list[dict[str, Any]]
    tlbs: list[dict[str, Any]]
    branch: dict[str, Any] | None
    coherence: dict[str, Any]
    issue: dict[str, Any] | None
    events_per_kilo_instruction: dict[str, float]
    unavailable: dict[str, str] = field(default_factory=dict)
    per_core: list[dict[str, Any]] = field(default_factory=list)
    served: dict[str, dict[str, int]] = field(default_factory=dict)

    # ------------------------------------------------------------------------------
    @classmethod
    def from_stats(cls, st: "N.Stats", machine: "MachineDescription", cores: int, split: str,
                   opts: "SimOptions", trace_meta: dict[str, Any],
                   trace_path: str | None) -> "SimResult":
        instr = int(st.instructions)
        unavailable: dict[str, str] = {}
        if instr == 0:
            unavailable["instructions"] = ("the trace has no instruction-fetch records, so "
                                           "nothing can be given per 1,000 instructions")
        accesses = {c: int(st.access[i]) for i, c in enumerate(CLASSES)}
        accesses["split_loads"] = int(st.split[1] + st.split[3])
        accesses["split_stores"] = int(st.split[2])
        served = {c: {("memory" if lv == 4 else f"L{lv}"): int(st.served[i][lv])
                      for lv in range(1, 5) if st.served[i][lv]}
                  for i, c in enumerate(CLASSES)}

        caches = []
        for i, c in enumerate(machine.caches):
            cs = st.cache[i]
            acc = {k: int(cs.access[j]) for j, k in enumerate(CLASSES)}
            mis = {k: int(cs.miss[j]) for j, k in enumerate(CLASSES)}
            total_acc = sum(acc.values())
            total_mis = sum(mis.values())
            caches.append({
                "name": c.name, "level": c.level, "kind": c.kind,
                "instances": c.instances(cores), "size": c.size, "ways": c.ways,
                "replacement": c.replacement, "policy": c.policy,
                "accesses": acc, "misses": mis, "misses_total": total_mis,
                "mpki": _per_k(total_mis, instr),
                "exposed_mpki": _per_k(sum(mis[k] for k in EXPOSED), instr),
                "fetch_mpki": _per_k(mis["fetch"], instr),
                "load_mpki": _per_k(mis["load"] + mis["modify"], instr),
                "store_mpki": _per_k(mis["store"], instr),
                "miss_ratio": (total_mis / total_acc) if total_acc else None,
                "writebacks": int(cs.writebacks), "fills": int(cs.fills),
                "evictions": int(cs.evictions), "coherence_misses": int(cs.coh_misses),
                "coherence_invalidations": int(cs.coh_invalidations),
                "back_invalidations": int(cs.back_invalidations),
            })

        tlbs = []
        tlb_specs = machine.tlbs if opts.tlb else []
        for i, t in enumerate(tlb_specs):
            ts = st.tlb[i]
            acc = int(ts.access[0] + ts.access[1])
            mis = int(ts.miss[0] + ts.miss[1])
            tlbs.append({"name": t.name, "level": t.level, "kind": t.kind,
                         "entries": t.entries, "ways": t.ways, "page_size": t.page_size,
                         "accesses": acc, "misses": mis,
                         "instruction_misses": int(ts.miss[0]), "data_misses": int(ts.miss[1]),
                         "mpki": _per_k(mis, instr),
                         "miss_ratio": (mis / acc) if acc else None})

        branch = None
        has_branches = int(st.branches) > 0
        if machine.branch is None or not opts.branch:
            unavailable["branch_mispredict"] = "the machine has no branch predictor"
        elif not has_branches:
            unavailable["branch_mispredict"] = (
                "the trace has no branch records (lackey text alone has none; `corecast sim "
                "capture` adds them by disassembling the program with objdump)")
        else:
            cond = int(st.cond_branches)
            mp = int(st.mispredicts)
            branch = {"predictor": machine.branch.kind,
                      "history_bits": machine.branch.history_bits,
                      "table_size": machine.branch.table_size,
                      "branches": int(st.branches), "conditional": cond,
                      "taken": int(st.taken), "mispredicts": mp, "mpki": _per_k(mp, instr),
                      "accuracy": (1 - mp / cond) if cond else None}

        coherence = {"invalidations": int(st.invalidations),
                     "coherence_misses": int(st.coh_misses),
                     "exposed_coherence_misses": int(st.coh_exposed),
                     "upgrades": int(st.upgrades), "interventions": int(st.interventions),
                     "memory_writebacks": int(st.mem_writebacks)}
        if instr:
            coherence["per_kilo_instruction"] = {
                k: _per_k(coherence[k], instr)
                for k in ("invalidations", "coherence_misses", "upgrades", "interventions")}

        issue = None
        if not opts.issue:
            unavailable["baseline_cpi"] = "the issue model was switched off"
        elif int(st.uops) == 0:
            unavailable["baseline_cpi"] = (
                "the trace has no uop records with register dependencies (`corecast sim "
                "capture` adds them by disassembling the program with objdump)")
        else:
            ii = int(st.issue_instructions)
            issue = {"uops": int(st.uops), "cycles": int(st.cycles),
                     "instructions": ii,
                     "placeholder_instructions": int(st.placeholder_instructions),
                     "baseline_cpi": (int(st.cycles) / ii) if ii else None,
                     "uops_per_instruction": (int(st.uops) / ii) if ii else None,
                     "scheduler_size": machine.pipeline.scheduler_size,
                     "issue_width": machine.pipeline.issue_width}
            if ii and st.placeholder_instructions / ii > 0.05:
                issue["note"] = (f"{st.placeholder_instructions / ii:.0%} of the instructions "
                                 "had no decoded uops and count as one independent ALU uop")

        ev: dict[str, float] = {}
        if instr:
            served_exposed = [0] * 5
            for i, c in enumerate(CLASSES):
                if c in EXPOSED:
                    for lv in range(1, 5):
                        served_exposed[lv] += int(st.served[i][lv])
            levels = machine.levels
            if levels >= 2:
                ev["l2_hit"] = _per_k(served_exposed[2], instr) or 0.0
            if levels >= 3:
                ev["l3_hit"] = _per_k(served_exposed[3], instr) or 0.0
            ev["dram"] = _per_k(served_exposed[4], instr) or 0.0
            sides = {"instruction": 0, "data": 1}
            specs = machine.tlbs if opts.tlb else []
            for side, idx in sides.items():
                kinds = (side, "unified")
                if any(t.kind in kinds for t in specs):
                    key = "itlb_miss" if side == "instruction" else "dtlb_miss"
                    ev[key] = _per_k(int(st.tlb_walk[idx]), instr) or 0.0
            if any(t.level == 2 for t in specs):
                ev["stlb_hit"] = _per_k(int(st.stlb_hit[0] + st.stlb_hit[1]), instr) or 0.0
            if branch is not None:
                ev["branch_mispredict"] = branch["mpki"]
            ev["misaligned_load"] = _per_k(accesses["split_loads"], instr) or 0.0
            if cores > 1:
                ev["coherence_miss"] = _per_k(int(st.coh_exposed), instr) or 0.0

        markers = int(st.markers)
        transactions = markers if markers else None
        # complete transactions: from one marker to the next; with a single marker, from it
        # to the end of the trace. Instructions before the first marker are not counted.
        if markers >= 2:
            ipt = (int(st.last_marker_instr) - int(st.first_marker_instr)) / (markers - 1)
        elif markers == 1:
            ipt = float(instr - int(st.first_marker_instr))
        else:
            ipt = None
        per_core = [{"core": c, "instructions": int(st.core_instructions[c])}
                    for c in range(cores)]
        tmeta = {"path": trace_path, "records": int(st.records),
                 "threads": trace_meta.get("threads"), "source": trace_meta.get("source")}
        mdict = {"name": machine.name, "frequency_hz": machine.frequency_hz,
                 "path": machine.path, "penalties": dict(machine.penalties)}
        return cls(machine=mdict, trace=tmeta, cores=cores, split=split,
                   warmup_instructions=int(opts.warmup_instructions), instructions=instr,
                   transactions=transactions, instructions_per_transaction=ipt,
                   accesses=accesses, caches=caches, tlbs=tlbs, branch=branch,
                   coherence=coherence, issue=issue, events_per_kilo_instruction=ev,
                   unavailable=unavailable, per_core=per_core, served=served)

    # ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "machine": self.machine,
                "trace": self.trace, "cores": self.cores, "split": self.split,
                "warmup_instructions": self.warmup_instructions,
                "instructions": self.instructions, "transactions": self.transactions,
                "instructions_per_transaction": self.instructions_per_transaction,
                "accesses": self.accesses, "caches": self.caches, "tlbs": self.tlbs,
                "branch": self.branch, "coherence": self.coherence, "issue": self.issue,
                "events_per_kilo_instruction": self.events_per_kilo_instruction,
                "unavailable": self.unavailable, "per_core": self.per_core,
                "served": self.served}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "<result>") -> "SimResult":
        if d.get("format") != FORMAT:
            raise UserError(f"{where}: not a corecast sim result (format "
                            f"{d.get('format')!r}; write one with `corecast sim ... --json`)")
        try:
            return cls(**{k: d[k] for k in (
                "machine", "trace", "cores", "split", "warmup_instructions", "instructions",
                "transactions", "instructions_per_transaction", "accesses", "caches", "tlbs",
                "branch", "coherence", "issue", "events_per_kilo_instruction")},
                unavailable=d.get("unavailable", {}), per_core=d.get("per_core", []),
                served=d.get("served", {}))
        except KeyError as err:
            raise UserError(f"{where}: sim result lacks the field {err}") from None

    @classmethod
    def load(cls, path: str | Path) -> "SimResult":
        try:
            d = json.loads(Path(path).read_text())
        except OSError as err:
            raise UserError(f"{path}: cannot read: {err.strerror}") from None
        except ValueError as err:
            raise UserError(f"{path}: not JSON: {err}") from None
        return cls.from_dict(d, str(path))

    # convenience -------------------------------------------------------------------
    def cache(self, name: str) -> dict[str, Any]:
        for c in self.caches:
            if c["name"] == name:
                return c
        raise KeyError(name)

    @property
    def baseline_cpi(self) -> float | None:
        return self.issue.get("baseline_cpi") if self.issue else None
