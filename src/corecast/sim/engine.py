"""Run a trace through the native simulator and build the result.

    from corecast.sim import simulate, load_machine
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
from typing import Any

import numpy as np

from ..errors import UserError
from . import native as N
from .machine import MachineDescription, load_machine
from .result import SimResult
from .trace import Trace, load as load_trace


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

    def feed(self, records: np.ndarray) -> None:
        """Simulate a batch of records (continuing from the previous batch)."""
        if self._finished:
            raise RuntimeError("simulator already finished")
        recs = N.as_records(records)
        if len(recs):
            self._L.cc_sim_run(self._h, recs.ctypes.data, len(recs))

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
        return SimResult.from_stats(st, self.machine, self.cores, self.split, self.options,
                                    trace_meta or {}, trace_path)

    def close(self) -> None:
        h = getattr(self, "_h", None)
        if h:
            self._L.cc_sim_free(h)
            self._h = None

    def __del__(self) -> None:
        self.close()


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
    if threads == 0 and len(trace.records):
        threads = int(len(np.unique(trace.records["tid"])))
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
    recs = trace.records
    data = (recs["kind"] >= N.KIND_LOAD) & (recs["kind"] <= N.KIND_MODIFY)
    if not np.any(data):
        return None
    addrs = recs["addr"][data]
    top = int(addrs.max())
    hi = (top | 0xFFF) + 1
    lo = max(0, hi - max_size)
    below = addrs[addrs < lo]
    if len(below) and lo - int(below.max()) < (1 << 30):
        return None
    return lo, hi


def simulate(trace: Trace | np.ndarray | str | Path, machine: MachineDescription | str,
             cores: int | None = None, options: SimOptions | None = None,
             chunk: int = 1 << 20) -> SimResult:
    """Simulate a whole trace (a Trace, a record array, or a file) on `machine`."""
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
        for part in trace.chunks(chunk):
            sim.feed(np.ascontiguousarray(part))
        if opts.warmup_instructions and not sim.stats().warm:
            raise UserError(f"--warmup {opts.warmup_instructions}: the trace has only "
                            f"{int(sim.stats().instructions):,} instructions")
        return sim.result(trace.meta, trace.path)
    finally:
        sim.close()
