"""Running the chase kernel: where the threads go, what each point measured, and the VM noise.

Three modes, each a list of *points* (one run of the kernel each):

- `concurrency`: threads x chains per thread at one buffer size (the pChase sweep);
- `sizes`: one thread, one chain, at each working-set size (lmbench's staircase);
- `loaded`: one chaser (one chain) and N loaders reading with an injection delay (MLC's
  loaded-latency table).

A point's figures come from its samples (the warm-up sample is dropped by the kernel): per
sample, latency is the mean over the chasers of time x chains / dereferences and bandwidth the
sum over all threads of bytes / time; the point is the median over its samples. *Time* is the
time each thread really ran (its CPU-time clock), so another program taking the CPU for a while
does not read as memory latency; samples in which every thread ran at least 90% of the wall
time are used alone when there are any (there the threads surely ran together), and the share
of the wall time the threads got is kept and warned about. With more threads than CPUs (`oversubscribe`) the threads cannot all run at once and the
wall time is used instead. The clock reads of each sample boundary are measured
(`native.timer_overhead_ns`) and subtracted. Steal time (the hypervisor running someone else)
is read from /proc/stat around each point. A point in which some thread never ran at all (the
scheduler kept it off its CPU the whole time) is run again twice as long, up to EXTEND_TIMES
times, and warned about.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import os
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ...dataset import Machine
from ...errors import UserError
from .. import sources
from .. import topology as topo_mod
from . import native

PATTERNS = ("random", "forward", "stride:N")
DEFAULT_SIZE = 256 << 20
DEFAULT_CHAINS = (1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32, 40, 48, 64)
DEFAULT_DELAYS = (0, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
STEAL_WARN = 0.02           # steal above this share of a point's CPU time is warned about
SHARE_WARN = 0.90           # threads that ran less than this share of the wall time: warned
EXTEND_TIMES = 4            # a point where a thread never ran is run again this often, each time twice as long

Progress = Callable[[int, int, str], None]


@dataclass
class Settings:
    """What every point of a run shares."""

    size_bytes: int = DEFAULT_SIZE
    line: int = 64
    page: str = "4k"
    pattern: str = "random"         # random | forward | stride
    stride_bytes: int = 0           # stride: bytes between consecutive lines of a chain
    tlb_group_pages: int = 64       # random: pages a chain stays within before moving on
    duration_s: float = 0.4         # measured time per point (the warm-up comes on top)
    samples: int = 5
    warmup_s: float = 0.1
    seed: int = 1

    @property
    def pattern_label(self) -> str:
        return f"stride:{self.stride_bytes}" if self.pattern == "stride" else self.pattern

    def check(self) -> None:
        if self.size_bytes <= 0:
            raise UserError(f"--size {self.size_bytes}: the buffer must hold at least two lines")
        if self.line < 8 or self.line % 8 or self.line & (self.line - 1):
            raise UserError(f"--line {self.line}: a power of two of at least 8 bytes (64 is a cache line)")
        if self.size_bytes < 2 * self.line:
            raise UserError(f"--size {self.size_bytes}: the buffer must hold at least two {self.line}-byte lines")
        if self.page not in native.PAGES:
            raise UserError(f"--page {self.page}: choose {', '.join(native.PAGES)}")
        if self.pattern == "stride" and (self.stride_bytes < self.line or self.stride_bytes % self.line):
            raise UserError(f"--pattern stride:{self.stride_bytes}: the stride must be a whole number of "
                            f"--line ({self.line}) bytes")
        if not (self.duration_s > 0 and math.isfinite(self.duration_s)):
            raise UserError(f"--duration {self.duration_s}: a positive number of seconds")
        if self.samples < 1:
            raise UserError("at least one sample per point")
        if self.tlb_group_pages < 1:
            raise UserError(f"--tlb-group {self.tlb_group_pages}: at least one page")


def parse_pattern(text: str) -> tuple[str, int]:
    """`random`, `forward` or `stride:N` (N bytes, with units: stride:256, stride:4KiB)."""
    from ...parsing import size_bytes

    t = text.strip().lower()
    if t in ("random", "forward"):
        return t, 0
    m = re.fullmatch(r"stride:(.+)", t)
    if m:
        try:
            return "stride", size_bytes(m.group(1))
        except UserError:
            pass
    raise UserError(f"--pattern {text}: choose random, forward or stride:N (N bytes, e.g. stride:256)")


def parse_counts(text: str, what: str, upper: int | None = None, low: int = 1) -> list[int]:
    """`1,2,4`, `1-16`, `1-16:2`, `pow2` (1, 2, 4, ... up to `upper`) and `all` (= `upper`);
    every count at least `low`."""
    out: list[int] = []
    for part in text.replace(" ", "").lower().split(","):
        if part in ("all", "pow2"):
            if upper is None:
                raise UserError(f"{what} {part}: not meaningful here")
            if part == "all":
                out.append(upper)
            else:
                n = 1
                while n < upper:
                    out.append(n)
                    n *= 2
                out.append(upper)
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", part)
        if not m:
            raise UserError(f"{what} {text}: '{part}' is not a count, a range (1-16, 1-16:2), 'pow2' or 'all'")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        step = int(m.group(3) or 1)
        if lo < low or hi < lo or step < 1:
            raise UserError(f"{what} {text}: '{part}' must count from {low} upwards")
        if hi > 1_000_000:
            raise UserError(f"{what} {text}: '{part}' is far too large")
        out.extend(range(lo, hi + 1, step))
    if not out:
        raise UserError(f"{what}: empty")
    return sorted(set(out))


@dataclass
class Point:
    """One run of the kernel."""

    threads: int                    # chasers
    chains: int                     # chains per chaser
    cpus: list[int]
    sockets: int                    # sockets the threads' CPUs span
    size_bytes: int
    latency_ns: float               # per dereference of one chain (the chaser's, with loaders)
    latency_range_ns: tuple[float, float]
    bandwidth_bytes_s: float        # every thread's lines, loaders included
    bandwidth_range: tuple[float, float]
    samples: int                    # samples kept
    steal: float | None             # steal time / time of the point's CPUs (None: unknown)
    cpu_share: float                # least share of the wall time any thread ran
    loaders: int = 0
    delay: int | None = None
    load_bandwidth_bytes_s: float | None = None   # the loaders' part
    extended: int = 0               # times the point was run again, twice as long, as a thread never ran

    @property
    def misses(self) -> int:
        """Dereferences in flight the point asks for (threads x chains)."""
        return self.threads * self.chains

    def to_dict(self) -> dict:
        d = {"threads": self.threads, "chains": self.chains, "misses": self.misses, "cpus": self.cpus,
             "sockets": self.sockets, "size_bytes": self.size_bytes, "latency_ns": self.latency_ns,
             "latency_range_ns": list(self.latency_range_ns), "bandwidth_bytes_s": self.bandwidth_bytes_s,
             "bandwidth_range_bytes_s": list(self.bandwidth_range), "samples": self.samples,
             "steal": self.steal, "cpu_share": self.cpu_share}
        if self.delay is not None:
            d.update(loaders=self.loaders, delay=self.delay, load_bandwidth_bytes_s=self.load_bandwidth_bytes_s)
        return d


@dataclass
class Run:
    """A mode's points and the conditions they were measured under."""

    mode: str                       # concurrency | sizes | loaded
    settings: Settings
    points: list[Point]
    order: str
    page_used: str = "4k"
    fallback: str = ""              # the page fallback taken, in words
    huge_fraction: float | None = None   # share of the buffer backed by huge pages (thp, 2m)
    timer_overhead_ns: float = 0.0
    machine: Machine = field(default_factory=Machine)
    caches: list[topo_mod.Cache] = field(default_factory=list)
    oversubscribed: bool = False
    elapsed_s: float = 0.0
    warnings: list[str] = field(default_factory=list)
    interrupted: bool = False       # Ctrl-C: the points measured before it are kept
    #: A concurrency sweep measured (1 thread, 1 chain) for the idle latency only, not asked for:
    #: kept out of the Dataset, whose rows are the thread and chain counts asked for.
    idle_only: bool = False

    def conditions(self) -> dict:
        """How the points were measured, for the JSON documents and the profile."""
        steals = [p.steal for p in self.points if p.steal is not None]
        s = self.settings
        return {"mode": self.mode, "size_bytes": s.size_bytes, "line_bytes": s.line, "pattern": s.pattern_label,
                "page": s.page, "page_used": self.page_used, "page_fallback": self.fallback or None,
                "huge_page_fraction": self.huge_fraction, "tlb_group_pages": s.tlb_group_pages,
                "duration_s_per_point": s.duration_s, "samples_per_point": s.samples,
                "warmup_s_per_point": s.warmup_s, "first_sample_discarded": True,
                "timer_overhead_ns": self.timer_overhead_ns,
                "timer_overhead_subtracted": "once per sample (the clock reads at its boundary)",
                "time_base": "wall time (oversubscribed)" if self.oversubscribed else
                             "each thread's CPU time (CLOCK_THREAD_CPUTIME_ID)",
                "order": self.order, "max_steal": max(steals) if steals else None,
                "min_cpu_share": min((p.cpu_share for p in self.points), default=None),
                "elapsed_s": self.elapsed_s}


# ------------------------------------------------------------------------------ helpers
def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _check_memory(total_bytes: int, line: int) -> None:
    need = total_bytes + total_bytes // line * 4          # the buffer and its order
    avail = _mem_available()
    if avail is not None and need > 0.8 * avail:
        raise UserError(f"--size {total_bytes >> 20} MiB: needs {need >> 20} MiB of memory and only "
                        f"{avail >> 20} MiB are available; give a smaller --size")


def _huge_fraction(address: int, size: int) -> float | None:
    """Share of [address, address+size) backed by huge pages, from /proc/self/smaps."""
    try:
        text = open("/proc/self/smaps").read()
    except OSError:
        return None
    huge = 0
    for m in re.finditer(r"^([0-9a-f]+)-([0-9a-f]+) .*?\n(.*?)(?=^[0-9a-f]+-[0-9a-f]+ |\Z)", text, re.M | re.S):
        lo, hi = int(m.group(1), 16), int(m.group(2), 16)
        if hi <= address or lo >= address + size:
            continue
        body = m.group(3)
        a = re.search(r"^AnonHugePages:\s+(\d+) kB", body, re.M)
        h = re.search(r"^KernelPageSize:\s+(\d+) kB", body, re.M)
        if h and int(h.group(1)) >= 2048:                  # a hugetlb mapping: all of it
            huge += min(hi, address + size) - max(lo, address)
        elif a:
            huge += int(a.group(1)) * 1024
    return min(1.0, huge / size) if size else None


class Starved(UserError):
    """A point in which some thread never ran (a busy machine): it is run again for longer."""


class Plan:
    """The CPUs of this machine in `order`, and which ones N threads get."""

    def __init__(self, order: str = "socket", oversubscribe: bool = False) -> None:
        self.topology = topo_mod.read_topology()
        self.order_name = order
        self.cpus = topo_mod.order_cpus(self.topology, order)
        self.oversubscribe = oversubscribe
        self.package = {p.os_index: p.package for p in self.topology.pus}

    def check(self, threads: int, what: str = "--threads") -> None:
        if threads > len(self.cpus) and not self.oversubscribe:
            raise UserError(f"{what} {threads}: more threads than the {len(self.cpus)} CPUs usable here "
                            f"(with this --order); add --oversubscribe to run them anyway (they then "
                            "share CPUs, and the figures are over wall time)")

    def take(self, threads: int) -> list[int]:
        return [self.cpus[i % len(self.cpus)] for i in range(threads)]

    def sockets(self, cpus: Sequence[int]) -> int:
        return len({self.package.get(c, 0) for c in cpus})


def summarise(s: native.Samples, threads: int, chains: int, line: int, overhead_ns: float,
              wall: bool) -> tuple[float, tuple[float, float], float, tuple[float, float], int, float, float | None]:
    """A point's figures from its samples: latency (median, range), bandwidth (median, range),
    samples kept, least CPU share, and the loaders' bandwidth (None without loaders)."""
    ns = np.maximum(s.ns - overhead_ns, 0.0)
    cpu = np.maximum(s.cpu_ns - overhead_ns, 0.0)
    t = ns if wall else cpu
    ok = np.all((s.count > 0) & (t > 0), axis=0)           # samples every worker ran through
    if not ok.any():
        # No sample in which every thread ran (oversubscribed, or a busy machine): each thread's
        # whole measured time as one sample (a thread that missed a sample boundary counted
        # its work into the next sample it recorded, so its totals are whole).
        if np.any(s.count.sum(axis=1) <= 0) or np.any(t.sum(axis=1) <= 0):
            raise Starved("a thread never got to run during the point (a busy or oversubscribed "
                          "machine); give a longer --duration")
        s = native.Samples(s.count.sum(axis=1, keepdims=True), s.ns.sum(axis=1, keepdims=True),
                           s.cpu_ns.sum(axis=1, keepdims=True))
        return summarise(s, threads, chains, line, overhead_ns * ns.shape[1], wall)
    # Samples in which every thread ran nearly all the time are the ones where they surely ran
    # together: kept alone when there are any (on a shared machine there may be none).
    share_s = np.min(cpu / np.where(ns > 0, ns, 1.0), axis=0)
    clean = ok & (share_s >= SHARE_WARN)
    if clean.any() and not wall:
        ok = clean
    c, t, ns, cpu = s.count[:, ok], t[:, ok], ns[:, ok], cpu[:, ok]
    lat = (t[:threads] * chains / c[:threads]).mean(axis=0)
    rate = c * line / t * 1e9                              # bytes/s per worker and sample
    bw = rate.sum(axis=0)
    share = float(np.min(cpu / np.where(ns > 0, ns, 1.0)))
    load = float(np.median(rate[threads:].sum(axis=0))) if c.shape[0] > threads else None
    return (float(np.median(lat)), (float(lat.min()), float(lat.max())), float(np.median(bw)),
            (float(bw.min()), float(bw.max())), int(ok.sum()), min(1.0, share), load)


class Session:
    """Settings, CPU plan and the conditions every mode records."""

    def __init__(self, settings: Settings, order: str = "socket", oversubscribe: bool = False,
                 progress: Progress | None = None) -> None:
        settings.check()
        self.settings = settings
        self.plan = Plan(order, oversubscribe)
        self.progress = progress or (lambda done, total, label: None)
        self.overhead = native.timer_overhead_ns()

    def derive(self, progress: Progress | None = None, **changes: object) -> "Session":
        """The same CPUs and timer, other settings (e.g. another duration)."""
        other = copy.copy(self)
        other.settings = dataclasses.replace(self.settings, **changes)
        other.settings.check()
        if progress is not None:
            other.progress = progress
        return other

    def caches(self) -> list[topo_mod.Cache]:
        return topo_mod.caches(self.plan.cpus[0])

    def new_run(self, mode: str) -> Run:
        return Run(mode=mode, settings=self.settings, points=[], order=self.plan.order_name,
                   timer_overhead_ns=self.overhead, machine=topo_mod.machine_info(self.plan.topology),
                   caches=self.caches())

    def buffer(self, size: int, run: Run, seed_offset: int = 0) -> native.Buffer:
        s = self.settings
        b = native.Buffer(size, s.line, s.page)
        try:
            if b.fallback and b.fallback not in run.fallback:
                run.fallback = "; ".join(x for x in (run.fallback, b.fallback) if x)
            run.page_used = b.page
            stride = max(1, s.stride_bytes // s.line) if s.pattern == "stride" else 1
            group = s.tlb_group_pages * native.PAGE_BYTES[b.page]
            b.order("random" if s.pattern == "random" else "stride", stride, group, s.seed + seed_offset)
            if b.page != "4k":
                frac = _huge_fraction(b.address, b.size_bytes)
                if frac is not None:
                    run.huge_fraction = frac if run.huge_fraction is None else min(run.huge_fraction, frac)
        except BaseException:
            b.close()
            raise
        return b

    def point(self, chase: native.Buffer | None, threads: int, chains: int, size: int,
              load: native.Buffer | None = None, loaders: int = 0, delay: int = 0) -> Point:
        s = self.settings
        cpus = self.plan.take(threads + loaders)
        if chase is not None:
            chase.link(threads * chains)
        wall = threads + loaders > len(self.plan.cpus)
        for extended in range(EXTEND_TIMES + 1):
            # a thread the scheduler kept off its CPU for the whole point measured nothing: the
            # point is run again twice as long (the figures are still over the time it ran)
            before = sources.cpu_times()
            samples = native.run(chase, threads, chains, cpus, s.samples, s.duration_s / s.samples * 2 ** extended,
                                 s.warmup_s, load=load, loaders=loaders, delay=delay)
            after = sources.cpu_times()
            try:
                lat, lat_r, bw, bw_r, kept, share, load_bw = summarise(samples, threads, chains, s.line,
                                                                       self.overhead, wall)
                break
            except Starved:
                if extended == EXTEND_TIMES:
                    raise
        steal = (sources.steal_fraction(before, after, cpus)
                 if isinstance(before, dict) and isinstance(after, dict) else None)
        return Point(threads=threads, chains=chains, cpus=cpus, sockets=self.plan.sockets(cpus), size_bytes=size,
                     latency_ns=lat, latency_range_ns=lat_r, bandwidth_bytes_s=bw, bandwidth_range=bw_r,
                     samples=kept, steal=steal, cpu_share=share, loaders=loaders,
                     delay=delay if loaders else None, load_bandwidth_bytes_s=load_bw, extended=extended)


def _finish(run: Run, started: float) -> Run:
    run.elapsed_s = time.monotonic() - started
    s = run.settings
    if s.page != "4k" and run.page_used == "4k" and not run.fallback:
        run.fallback = f"--page {s.page}: 4 KiB pages were used"
    if run.page_used != "4k" and run.huge_fraction is not None and run.huge_fraction < 0.9:
        run.warnings.append(f"--page {s.page}: only {run.huge_fraction:.0%} of the buffer is in huge pages "
                            "(transparent huge pages off or memory too fragmented: "
                            "/sys/kernel/mm/transparent_hugepage/enabled)")
    if run.fallback:
        run.warnings.insert(0, run.fallback)
    stolen = [p for p in run.points if p.steal is not None and p.steal > STEAL_WARN]
    if stolen:
        worst = max(stolen, key=lambda p: p.steal or 0)
        run.warnings.append(f"steal time above {STEAL_WARN:.0%} in {len(stolen)} of {len(run.points)} points "
                            f"(up to {worst.steal:.1%}): the hypervisor ran other guests on these CPUs; "
                            "figures from a VM under load vary")
    longer = [p for p in run.points if p.extended]
    if longer:
        run.warnings.append(f"a thread never ran during {len(longer)} of {len(run.points)} points (other programs "
                            f"held its CPU); those were run again up to {2 ** max(p.extended for p in longer)} "
                            "times as long")
    shared = [p for p in run.points if p.cpu_share < SHARE_WARN]
    if shared and not run.oversubscribed:
        low = min(p.cpu_share for p in shared)
        run.warnings.append(f"other programs took these CPUs during {len(shared)} of {len(run.points)} points "
                            f"(the threads ran as little as {low:.0%} of the time); figures are over the "
                            "time the threads ran")
    return run


def _each(session: Session, run: Run, items: list, label: Callable, one: Callable) -> None:
    """One point per item, with progress; Ctrl-C keeps the points measured so far (the run
    says it was interrupted)."""
    for i, item in enumerate(items):
        session.progress(i, len(items), label(item))
        try:
            run.points.append(one(item))
        except KeyboardInterrupt:
            run.interrupted = True
            run.warnings.append(f"interrupted: {len(run.points)} of {len(items)} points measured")
            break
    session.progress(len(items), len(items), "done")


# ------------------------------------------------------------------------------ the modes
def concurrency_sweep(session: Session, threads: Sequence[int], chains: Sequence[int]) -> Run:
    """Every (threads, chains) pair, plus (1, 1) for the idle latency when not asked for."""
    s, plan = session.settings, session.plan
    for t in threads:
        plan.check(t)
    if max(chains) > native.max_chains():
        raise UserError(f"--chains {max(chains)}: at most {native.max_chains()} chains per thread")
    lines = s.size_bytes // s.line
    if max(threads) * max(chains) * 2 > lines:
        raise UserError(f"--size {s.size_bytes}: {lines} lines are too few for {max(threads)} threads x "
                        f"{max(chains)} chains (two lines per chain at least)")
    _check_memory(s.size_bytes, s.line)
    started = time.monotonic()
    run = session.new_run("concurrency")
    run.oversubscribed = max(threads) > len(plan.cpus)
    pairs = [(t, k) for t in sorted(threads) for k in sorted(chains)]
    if (1, 1) not in pairs:
        pairs.insert(0, (1, 1))
        run.idle_only = True
    with session.buffer(s.size_bytes, run) as buf:
        _each(session, run, pairs, lambda tk: f"{tk[0]} thread{'s' if tk[0] > 1 else ''} x {tk[1]} "
                                              f"chain{'s' if tk[1] > 1 else ''}",
              lambda tk: session.point(buf, tk[0], tk[1], s.size_bytes))
    return _finish(run, started)


def default_sizes(caches: Sequence[topo_mod.Cache], line: int, low: int = 4096) -> list[int]:
    """1 and 1.5 times each power of two from 4 KiB to 8 times the largest cache (at least
    256 MiB), within half the memory available."""
    top = max([DEFAULT_SIZE] + [8 * c.size_bytes for c in caches])
    avail = _mem_available()
    if avail:
        top = min(top, max(low, avail // 2))
    out, p = [], low
    while p <= top:
        out.append(p)
        if p * 3 // 2 <= top:
            out.append(p * 3 // 2)
        p *= 2
    return sorted({max(2 * line, v // line * line) for v in out})


def size_sweep(session: Session, sizes: Sequence[int]) -> Run:
    """One thread, one chain, at each working-set size (a new buffer and order for each)."""
    s = session.settings
    for z in sizes:
        if z < 2 * s.line:
            raise UserError(f"--sizes: {z} bytes hold fewer than two {s.line}-byte lines")
    _check_memory(max(sizes), s.line)
    started = time.monotonic()
    run = session.new_run("sizes")

    def one(z: int) -> Point:
        with session.buffer(z, run, seed_offset=z) as buf:
            return session.point(buf, 1, 1, buf.size_bytes)

    _each(session, run, list(sizes), lambda z: f"{z:,} bytes", one)
    return _finish(run, started)


def loaded_latency(session: Session, delays: Sequence[int], loaders: int | None = None) -> Run:
    """One chaser (one chain) on the first CPU of the order and `loaders` loaders on the next
    ones (default: every other CPU), each loader reading its slice of a second buffer line after
    line with `delay` turns of an empty loop after each line."""
    s, plan = session.settings, session.plan
    n = (len(plan.cpus) - 1) if loaders is None else loaders
    if n < 1:
        raise UserError("--loaded needs at least one loader: this machine has one usable CPU "
                        "(give --loaders 1 --oversubscribe to share it)")
    plan.check(1 + n, what="--loaded with --loaders")
    if any(d < 0 for d in delays):
        raise UserError("--delays: delays are 0 or more")
    if s.size_bytes // s.line < max(2, n):
        raise UserError(f"--size {s.size_bytes}: too small for {n} loaders")
    _check_memory(2 * s.size_bytes, s.line)
    started = time.monotonic()
    run = session.new_run("loaded")
    run.oversubscribed = 1 + n > len(plan.cpus)
    with session.buffer(s.size_bytes, run) as chase, session.buffer(s.size_bytes, run, seed_offset=1) as load:
        _each(session, run, sorted(delays), lambda d: f"delay {d}",
              lambda d: session.point(chase, 1, 1, s.size_bytes, load=load, loaders=n, delay=d))
    return _finish(run, started)


def cpu_count() -> int:
    """CPUs this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
