"""Run a trace through the native simulator and build the result.

    from corecast.sim.engine import simulate
    res = simulate("app.cctrace", "penryn-l5420", cores=2)
    res.events_per_kilo_instruction["l2_hit"]

The batch interface: `Simulator(machine, cores).feed(records)` any number of times (numpy
arrays of `RECORD_DTYPE`; the C core walks each batch without calling back into Python), then
`.result()`.
"""
from __future__ import annotations

import ctypes as C
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import UserError
from . import native as N
from .machine import MachineDescription, load_machine
from .result import SimResult
from .trace import Trace, load as load_trace, wrapping_access


@dataclass
class SimOptions:
    """How a trace is mapped onto the simulated cores and counted.

    split: how records are assigned to cores: "threads" (thread t runs on core t mod N),
    "transactions" (one thread's trace cut at marker records, transaction k on core k mod N),
    "chunks" (cut every `chunk_instructions` instructions, round robin), or "auto"
    (threads when the trace has several, else transactions when it has markers, else chunks).
    stack: (lo, hi) address range of the stack; with `stack_hash` (the default when a trace
    is split) stack addresses are remapped per core so that cores do not share a stack.
    warmup_instructions: instructions simulated before counting starts.
    straddle_all: the cachegrind rule for line-straddling misses (the whole access goes to
    the next level, not only the missing line).
    general_loop: run every record through the general loop even where the single-core
    kernel applies (for tests: the two give identical results).
    """

    split: str = "auto"
    chunk_instructions: int = 100_000
    stack: tuple[int, int] | None = None
    stack_hash: bool | None = None
    warmup_instructions: int = 0
    seed: int = 1
    straddle_all: bool = False
    tlb: bool = True
    branch: bool = True
    issue: bool = True
    general_loop: bool = False


def build_config(machine: MachineDescription, cores: int, opts: SimOptions,
                 split: str = "threads") -> N.Config:
    if not 1 <= cores <= N.MAX_CORES:
        raise UserError(f"--cores {cores}: the simulator models 1 to {N.MAX_CORES} cores")
    cfg = N.Config()
    cfg.ncores = cores
    if len(machine.caches) > N.MAX_CACHES:
        raise UserError(f"{machine.name}: at most {N.MAX_CACHES} caches")
    cfg.ncaches = len(machine.caches)
    for i, c in enumerate(machine.caches):
        cc = cfg.caches[i]
        cc.level, cc.kind = c.level, N.CACHE_KIND[c.kind]
        cc.replacement, cc.policy = N.REPLACEMENT[c.replacement], N.POLICY[c.policy]
        cc.write_allocate, cc.shared = int(c.write_allocate), c.shared
        cc.size, cc.line_size, cc.ways = c.size, c.line_size, c.ways
    tlbs = machine.tlbs if opts.tlb else []
    if len(tlbs) > N.MAX_TLBS:
        raise UserError(f"{machine.name}: at most {N.MAX_TLBS} TLBs")
    cfg.ntlbs = len(tlbs)
    for i, t in enumerate(tlbs):
        tc = cfg.tlbs[i]
        tc.level, tc.kind, tc.replacement = t.level, N.CACHE_KIND[t.kind], N.REPLACEMENT[t.replacement]
        tc.entries, tc.ways, tc.page_size = t.entries, t.ways, t.page_size
    if machine.branch is not None and opts.branch:
        cfg.bp_kind = N.BRANCH[machine.branch.kind]
        cfg.bp_history_bits = machine.branch.history_bits if machine.branch.kind == "gshare" else 0
        cfg.bp_table_size = machine.branch.table_size
    p = machine.pipeline
    cfg.issue_enabled = int(opts.issue)
    cfg.sched_size = p.scheduler_size
    cfg.issue_width = p.issue_width
    for name, idx in (("alu", 0), ("load", 1), ("store", 2), ("branch", 3), ("fp", 4)):
        cfg.units[idx] = p.units.get(name, 0)
    cfg.split_mode = N.SPLIT[split]
    cfg.chunk_instructions = max(1, int(opts.chunk_instructions))
    hash_stack = opts.stack_hash if opts.stack_hash is not None else split != "threads"
    if opts.stack is not None and hash_stack:
        cfg.stack_hash = 1
        cfg.stack_lo, cfg.stack_hi = int(opts.stack[0]), int(opts.stack[1])
    cfg.warmup_instructions = max(0, int(opts.warmup_instructions))
    cfg.seed = opts.seed
    cfg.straddle_all = int(opts.straddle_all)
    cfg.force_general = int(opts.general_loop)
    return cfg


class Simulator:
    """The native simulator for one machine and core count."""

    def __init__(self, machine: MachineDescription | str, cores: int | None = None,
                 options: SimOptions | None = None, split: str = "threads"):
        self.machine = machine if isinstance(machine, MachineDescription) else load_machine(machine)
        self.cores = int(cores if cores is not None else 1)
        self.options = options or SimOptions()
        self.split = split
        self._L = N.lib()
        self._cfg = build_config(self.machine, self.cores, self.options, split)
        err = C.create_string_buffer(256)
        self._h = self._L.cc_sim_new(C.byref(self._cfg), err, 256)
        if not self._h:
            raise UserError(f"{self.machine.name}: the simulator refused the machine: "
                            f"{err.value.decode()}")
        self._finished = False
        self._fed = 0

    def feed(self, records: np.ndarray) -> None:
        """Simulate a batch of records (continuing from the previous batch). An access whose last
        byte passes 2^64 - 1 is a UserError naming its record: the kernel clamps it at the top of
        the address space (a wrap to address 0 would never end its walks) and says so."""
        if self._finished:
            raise RuntimeError("simulator already finished")
        recs = N.as_records(records)
        if len(recs) and self._L.cc_sim_run(self._h, recs.ctypes.data, len(recs)):
            raise UserError(wrapping_access(recs, self._fed) or "an access passes the top of the address space")
        self._fed += len(recs)

    def stats(self) -> N.Stats:
        st = N.Stats()
        self._L.cc_sim_stats(self._h, C.byref(st))
        return st

    def finish(self) -> N.Stats:
        if not self._finished:
            self._L.cc_sim_finish(self._h)
            self._finished = True
        return self.stats()

    def result(self, trace_meta: dict[str, Any] | None = None,
               trace_path: str | None = None) -> SimResult:
        st = self.finish()
        return build_result(st, self.machine, self.cores, self.split, self.options, trace_meta or {},
                            trace_path)

    def close(self) -> None:
        h = getattr(self, "_h", None)
        if h:
            self._L.cc_sim_free(h)
            self._h = None

    def __del__(self) -> None:
        self.close()


# ------------------------------------------------------------------------------ the result
CLASSES = ("fetch", "load", "store", "modify")
EXPOSED = ("fetch", "load", "modify")


def _per_k(n: float, instructions: int) -> float | None:
    return None if instructions <= 0 else 1000.0 * n / instructions


def build_result(st: N.Stats, machine: MachineDescription, cores: int, split: str, opts: SimOptions,
                 trace_meta: dict[str, Any], trace_path: str | None) -> SimResult:
    """The result of a run from the simulator's counts (docs/sim.md describes every field)."""
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
    return SimResult(machine=mdict, trace=tmeta, cores=cores, split=split,
                     warmup_instructions=int(opts.warmup_instructions), instructions=instr,
                     transactions=transactions, instructions_per_transaction=ipt,
                     accesses=accesses, caches=caches, tlbs=tlbs, branch=branch,
                     coherence=coherence, issue=issue, events_per_kilo_instruction=ev,
                     unavailable=unavailable, per_core=per_core, served=served)


def choose_split(split: str, trace: Trace, cores: int) -> str:
    if split not in ("auto", "threads", "transactions", "chunks"):
        raise UserError(f"--split {split}: choose auto, threads, transactions or chunks")
    if split == "transactions" and cores > 1 and not _has_kind(trace, N.KIND_MARKER):
        raise UserError("--split transactions: the trace has no marker records (capture with "
                        "--marker FUNCTION, or use --split chunks)")
    if split != "auto":
        return split
    if cores == 1:
        return "threads"
    threads = int(trace.meta.get("threads") or 0)
    if threads == 0 and len(trace):
        seen = np.zeros(1 << 16, bool)
        for chunk in trace.chunks(1 << 22, checked=False):
            seen[chunk["tid"]] = True
        threads = int(np.count_nonzero(seen))
    if threads > 1:
        return "threads"
    if _has_kind(trace, N.KIND_MARKER):
        return "transactions"
    return "chunks"


def _has_kind(trace: Trace, kind: int) -> bool:
    for chunk in trace.chunks(1 << 22):
        if np.any(chunk["kind"] == kind):
            return True
    return False


def guess_stack(trace: Trace, max_size: int = 8 << 20) -> tuple[int, int] | None:
    """The stack's address range: the highest data addresses of the trace, up to `max_size`
    below the top, when a gap of at least 1 GiB separates them from everything else (as the
    main thread's stack is placed, natively and under valgrind)."""
    top = None
    for chunk in trace.chunks(1 << 22, checked=False):          # a frame at a time when compressed
        addrs = chunk["addr"][(chunk["kind"] >= N.KIND_LOAD) & (chunk["kind"] <= N.KIND_MODIFY)]
        if len(addrs):
            m = int(addrs.max())
            top = m if top is None else max(top, m)
    if top is None:
        return None
    hi = (top | 0xFFF) + 1
    lo = max(0, hi - max_size)
    below = None
    for chunk in trace.chunks(1 << 22, checked=False):
        addrs = chunk["addr"][(chunk["kind"] >= N.KIND_LOAD) & (chunk["kind"] <= N.KIND_MODIFY)]
        addrs = addrs[addrs < lo]
        if len(addrs):
            m = int(addrs.max())
            below = m if below is None else max(below, m)
    if below is not None and lo - below < (1 << 30):
        return None
    return lo, hi


def simulate(trace: Trace | np.ndarray | str | Path, machine: MachineDescription | str,
             cores: int | None = None, options: SimOptions | None = None,
             chunk: int = 1 << 20, progress: Callable[[int], None] | None = None) -> SimResult:
    """Simulate a whole trace (a Trace, a record array, or a file) on `machine`; `progress`
    is called with the number of records simulated so far after each slice of `chunk`."""
    opts = options or SimOptions()
    if isinstance(trace, (str, Path)):
        trace = load_trace(trace)
    elif isinstance(trace, np.ndarray):
        trace = Trace(trace, {})
    mach = machine if isinstance(machine, MachineDescription) else load_machine(machine)
    ncores = int(cores if cores is not None else 1)
    split = choose_split(opts.split, trace, ncores)
    if split != "threads" and opts.stack is None and opts.stack_hash is not False:
        st = trace.meta.get("stack")
        stack = tuple(st) if st else guess_stack(trace)
        if stack:
            opts = SimOptions(**{**opts.__dict__, "stack": (int(stack[0]), int(stack[1]))})
    sim = Simulator(mach, ncores, opts, split)
    try:
        done = 0
        for part in trace.chunks(chunk, reuse=True):          # the simulator keeps none of a slice
            try:
                sim.feed(np.ascontiguousarray(part))
            except UserError as err:
                raise UserError(f"{trace.path or 'trace'}: {err}") from None
            done += len(part)
            if progress is not None:
                progress(done)
        if opts.warmup_instructions and not sim.stats().warm:
            raise UserError(f"--warmup {opts.warmup_instructions}: the trace has only "
                            f"{int(sim.stats().instructions):,} instructions")
        return sim.result(trace.meta, trace.path)
    finally:
        sim.close()
