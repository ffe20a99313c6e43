"""Miss-rate curves of a trace in one pass (the C side is native/mrc/mrc.c).

- **Exact, fully associative LRU**: the LRU stack distance of every access (Mattson et al.'s
  stack algorithm, counted with a Fenwick tree as Olken did) gives, in one pass, the misses of
  a fully associative LRU cache of *every* size: an access hits a cache of S lines exactly when
  fewer than S distinct lines were touched since the previous access to its line.
- **SHARDS** (Waldspurger, Park, Garthwaite, Ahmad, FAST'15): only lines whose hash falls under a
  threshold are tracked (spatial sampling at rate R); distances are scaled by 1/R and each
  sampled access stands for 1/R accesses; the difference between the expected and the actual
  number of sampled accesses is credited to the smallest distance (their SHARDS_adj), which
  removes most of the bias of a fixed-rate sample. **Fixed-size SHARDS** (the paper's bounded
  variant, `max_lines`): at most that many lines are tracked; when one more would be, the
  tracked line of the largest hash leaves and the threshold falls to its hash, so memory is
  bounded whatever the footprint and the rate adapts to it; each reuse counts 1/R of the rate it
  was tracked at, at distance d/R lines (SHARDS_adj as above, in estimated accesses).
- **Set-associative LRU** caches of several sizes simulated together in one pass.

Per-thread curves come from one analyser per thread id beside the shared one. Every access moves
its lines in the stack; which are counted is a second mask (`count="exposed"`: the fetches, loads
and read-modify-writes a core waits for, as the CPI stack's events count them), and each stream
counts its instructions, so a curve also reads as misses per 1K instructions.

Definitions used in reports: the *knee* is the size where the curve is farthest below the chord
from its smallest to its largest size, on a log2 size axis (Kneedle, Satopää et al. 2011); a
*working set* is a quarter-octave band of reuse distances holding at least 10% of all reuses
and more than each neighbour, reported as the cache size at which all of that band's reuses hit.
"""
from __future__ import annotations

import ctypes as C
import math
import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from ..errors import UserError
from ..native import load_library
from .native import KIND_FETCH, KIND_LOAD, KIND_MODIFY, KIND_STORE
from .trace import KIND_NAMES, Trace

KINDS = {"data": (1 << KIND_LOAD) | (1 << KIND_STORE) | (1 << KIND_MODIFY),
         "instr": 1 << KIND_FETCH}
KINDS["all"] = KINDS["data"] | KINDS["instr"]
#: The accesses a core waits for, as the simulator's exposed misses and the CPI stack's events
#: count them: fetches, loads and read-modify-writes (a store's miss is buffered).
EXPOSED = (1 << KIND_FETCH) | (1 << KIND_LOAD) | (1 << KIND_MODIFY)
COUNTS = ("all", "exposed")
MODULUS_BITS = 24          # SHARDS: hash values in [0, 2^24); threshold = rate * 2^24
MAX_SAMPLE_LINES = 1 << 26  # fixed-size SHARDS: at most this many lines tracked (2 GiB of state)
_P = C.c_void_p


@lru_cache(maxsize=1)
def lib() -> C.CDLL:
    L = load_library("libcorecast_mrc.so")
    L.cc_sd_new.restype = _P
    L.cc_sd_new.argtypes = [C.c_int, C.c_uint64, C.c_int]
    L.cc_sd_free.argtypes = [_P]
    L.cc_sd_run.restype = C.c_int
    L.cc_sd_run.argtypes = [_P, _P, C.c_size_t, C.c_uint32, C.c_uint32, C.c_int]
    L.cc_sd_lines.restype = C.c_int
    L.cc_sd_lines.argtypes = [_P, _P, C.c_size_t]
    L.cc_sd_counts.restype = C.c_size_t
    L.cc_sd_counts.argtypes = [_P, _P]
    L.cc_sd_hist.argtypes = [_P, _P, C.c_size_t]
    L.cc_sd_set_max.restype = C.c_int
    L.cc_sd_set_max.argtypes = [_P, C.c_size_t]
    L.cc_sd_wcounts.restype = C.c_size_t
    L.cc_sd_wcounts.argtypes = [_P, C.POINTER(C.c_uint64), C.POINTER(C.c_double)]
    L.cc_sd_whist.argtypes = [_P, _P, C.c_size_t]
    L.cc_mrc_simd.restype = C.c_int
    L.cc_mrc_simd.argtypes = [C.c_int]
    L.cc_scan.restype = C.c_uint64
    L.cc_scan.argtypes = [_P, C.c_size_t]
    L.cc_sa_new.restype = _P
    L.cc_sa_new.argtypes = [C.c_int, C.c_int, _P, _P]
    L.cc_sa_free.argtypes = [_P]
    L.cc_sa_run.restype = C.c_int
    L.cc_sa_run.argtypes = [_P, _P, C.c_size_t, C.c_uint32, C.c_uint32, C.c_int]
    L.cc_sa_counts.argtypes = [_P, _P, _P]
    return L


def _line_shift(line: int) -> int:
    if line < 1 or line & (line - 1):
        raise UserError(f"--line {line}: the line size must be a power of two")
    return line.bit_length() - 1


def _kindmask(accesses: str) -> int:
    try:
        return KINDS[accesses]
    except KeyError:
        raise UserError(f"--accesses {accesses}: choose data, instr or all") from None


class BadKind(Exception):
    """A batch holds a record of no known kind (the passes here check the kinds as they read
    them, so that the trace need not be read once more to check them first)."""

    def __init__(self, records: np.ndarray):
        super().__init__("a record of no known kind")
        self.index = int(np.argmax(records["kind"] >= len(KIND_NAMES)))
        self.kind = int(records["kind"][self.index])


@dataclass
class Histogram:
    """Reuse distances of one stream of accesses (sampled ones when rate < 1)."""

    line: int
    rate: float
    offered: int            # accesses counted (sampled or not)
    sampled: int            # accesses tracked
    cold: int               # tracked first touches
    lines: int              # distinct tracked lines
    counts: np.ndarray      # counts[d]: tracked reuses at distance d (in tracked lines)
    instructions: int = 0   # fetch records of the stream's thread(s), sampled or not
    #: fixed-size SHARDS: counts[d] are estimated accesses at distance d in lines (not tracked
    #: ones), `cold` likewise, and `rate` is the rate at the end
    weighted: bool = False

    @property
    def lines_per_unit(self) -> float:
        """Lines one unit of the histogram's distance stands for."""
        return 1.0 if self.weighted else 1.0 / self.rate

    @property
    def footprint_bytes(self) -> float:
        """Distinct lines touched, in bytes (estimated from the sample when rate < 1)."""
        return self.lines / self.rate * self.line

    def misses(self, sizes_bytes: Sequence[float]) -> np.ndarray:
        """Estimated misses of a fully associative LRU cache of each size."""
        sizes = np.asarray(sizes_bytes, dtype=float)
        counts = self.counts.astype(float)
        if self.weighted:                # in estimated accesses and lines already
            counts = counts.copy() if len(counts) else np.zeros(1)
            counts[0] += self.offered - (counts.sum() + self.cold)        # SHARDS_adj
            tail = np.concatenate([np.cumsum(counts[::-1])[::-1], [0.0]])
            first_miss = np.clip(np.ceil(sizes / self.line - 1e-9).astype(np.int64), 0, len(counts))
            return np.clip(self.cold + tail[first_miss], 0.0, float(self.offered))
        if self.rate < 1.0 and len(counts):
            counts = counts.copy()
            counts[0] += self.offered * self.rate - self.sampled     # SHARDS_adj
        # reuses at sampled distance d miss a cache of S lines when d / rate >= S
        tail = np.concatenate([np.cumsum(counts[::-1])[::-1], [0.0]])
        cap = sizes / self.line * self.rate
        first_miss = np.clip(np.ceil(cap - 1e-9).astype(np.int64), 0, len(counts))
        misses = (self.cold + tail[first_miss]) / self.rate
        return np.clip(misses, 0.0, float(self.offered))

    def miss_ratio(self, sizes_bytes: Sequence[float]) -> np.ndarray:
        if not self.offered:
            return np.full(len(sizes_bytes), np.nan)
        return self.misses(sizes_bytes) / self.offered


class StackDistances:
    """One pass of LRU stack distances (exact at rate 1, SHARDS below)."""

    def __init__(self, line: int = 64, rate: float = 1.0, max_lines: int | None = None):
        if not (0.0 < rate <= 1.0) or not math.isfinite(rate):
            raise UserError(f"--sample {rate}: the sampling rate must be in (0, 1]")
        if max_lines is not None and not 1 <= max_lines <= MAX_SAMPLE_LINES:
            raise UserError(f"--sample-max {max_lines}: from 1 to {MAX_SAMPLE_LINES:,} lines")
        self.max_lines = max_lines
        self.line, self.rate = line, rate
        threshold = (1 << MODULUS_BITS) if rate >= 1.0 else max(1, round(rate * (1 << MODULUS_BITS)))
        self.rate = threshold / (1 << MODULUS_BITS)
        self._L = lib()
        self._h = self._L.cc_sd_new(_line_shift(line), threshold, MODULUS_BITS)
        if not self._h:
            raise MemoryError("cannot allocate the stack-distance analyser")
        if max_lines is not None and self._L.cc_sd_set_max(self._h, max_lines):
            raise MemoryError("cannot allocate the fixed-size sample")

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            self._L.cc_sd_free(h)

    def feed(self, records: np.ndarray, kindmask: int = KINDS["all"], tid: int = -1,
             countmask: int | None = None) -> None:
        """Counts a batch of records: those of the kinds in `kindmask` move their lines in the
        stack, those also in `countmask` (default: all of them) are counted. BadKind at a record
        of no known kind."""
        recs = np.ascontiguousarray(records)
        rc = self._L.cc_sd_run(self._h, recs.ctypes.data, len(recs), kindmask,
                               kindmask if countmask is None else countmask, tid)
        if rc == -2:
            raise BadKind(recs)
        if rc:
            raise MemoryError("out of memory counting stack distances")

    def feed_lines(self, lines: Iterable[int]) -> None:
        arr = np.ascontiguousarray(np.asarray(list(lines) if not isinstance(lines, np.ndarray) else lines,
                                              dtype=np.uint64))
        if self._L.cc_sd_lines(self._h, arr.ctypes.data, len(arr)):
            raise MemoryError("out of memory counting stack distances")

    def histogram(self) -> Histogram:
        c = (C.c_uint64 * 5)()
        n = self._L.cc_sd_counts(self._h, c)
        if self.max_lines is not None:
            thr, w = C.c_uint64(), (C.c_double * 2)()
            n = self._L.cc_sd_wcounts(self._h, C.byref(thr), w)
            counts = np.zeros(n, dtype=float)
            if n:
                self._L.cc_sd_whist(self._h, counts.ctypes.data, n)
            self.rate = min(1.0, thr.value / (1 << MODULUS_BITS))
            return Histogram(self.line, self.rate, int(c[0]), int(c[1]), w[1], int(c[3]), counts, int(c[4]),
                             weighted=True)
        counts = np.zeros(n, dtype=np.uint64)
        if n:
            self._L.cc_sd_hist(self._h, counts.ctypes.data, n)
        return Histogram(self.line, self.rate, int(c[0]), int(c[1]), int(c[2]), int(c[3]), counts, int(c[4]))


class SetAssociative:
    """Several set-associative LRU caches simulated together."""

    def __init__(self, sizes_bytes: Sequence[int], ways: int, line: int = 64):
        shift = _line_shift(line)
        if ways < 1:
            raise UserError(f"--assoc {ways}: the associativity must be at least 1")
        sets = []
        for s in sizes_bytes:
            n = int(s) // (line * ways)
            if n < 1 or n * line * ways != int(s) or n & (n - 1):
                raise UserError(f"a {fmt_bytes(s)} cache with {ways} ways of {line}-byte lines has "
                                f"{int(s) / (line * ways):g} sets: choose sizes giving a power of two")
            sets.append(n)
        self.sizes = [int(s) for s in sizes_bytes]
        self.ways, self.line = ways, line
        # a tag and a stamp (8 bytes each) per simulated line, for every size: asked before
        # allocating, so that an absurd size (--sizes 1024TiB) is one line, not an allocation
        need = sum(sets) * ways * 16
        phys = _physical_memory()
        why = f"more than this machine's {fmt_bytes(phys)} of memory" if phys and need > phys else ""
        self._h = None
        if not why:
            self._L = lib()
            s_arr = np.asarray(sets, dtype=np.uint64)
            w_arr = np.full(len(sets), ways, dtype=np.uint64)
            self._h = self._L.cc_sa_new(shift, len(sets), s_arr.ctypes.data, w_arr.ctypes.data)
            why = "" if self._h else "which could not be allocated"
        if why:
            raise UserError(f"--sizes {', '.join(fmt_bytes(x) for x in self.sizes)} with --assoc {ways}: the "
                            f"simulated caches need {fmt_bytes(need)} (16 bytes a line), {why}; "
                            "choose smaller sizes")

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            self._L.cc_sa_free(h)

    def feed(self, records: np.ndarray, kindmask: int = KINDS["all"], tid: int = -1,
             countmask: int | None = None) -> None:
        recs = np.ascontiguousarray(records)
        if self._L.cc_sa_run(self._h, recs.ctypes.data, len(recs), kindmask,
                             kindmask if countmask is None else countmask, tid) == -2:
            raise BadKind(recs)

    def counts(self) -> tuple[np.ndarray, np.ndarray]:
        acc = np.zeros(len(self.sizes), dtype=np.uint64)
        miss = np.zeros(len(self.sizes), dtype=np.uint64)
        self._L.cc_sa_counts(self._h, acc.ctypes.data, miss.ctypes.data)
        return acc, miss


# ---------------------------------------------------------------------------- the analysis

@dataclass
class Curve:
    """One miss-rate curve: a stream of accesses (all threads, or one) at the given sizes."""

    scope: str                       # "shared" or "thread N"
    sizes_bytes: list[int]
    miss_ratio: list[float]
    misses: list[float]
    accesses: int
    footprint_bytes: float
    knee_bytes: int | None
    working_sets_bytes: list[int]
    histogram: Histogram | None = field(default=None, repr=False)
    set_associative: dict[str, Any] | None = None
    instructions: int = 0            # of the stream's thread(s): misses per 1K instructions

    @property
    def mpki(self) -> list[float | None]:
        """Misses per 1,000 instructions at each size (None without instructions)."""
        return [1000.0 * m / self.instructions if self.instructions else None for m in self.misses]

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("scope", "sizes_bytes", "miss_ratio", "misses", "mpki",
                                          "accesses", "instructions", "footprint_bytes", "knee_bytes",
                                          "working_sets_bytes")}
        if self.set_associative is not None:
            d["set_associative"] = self.set_associative
        return d


@dataclass
class MrcResult:
    line: int
    accesses_kind: str
    sample_rate: float
    sample_error: str | None
    curves: list[Curve]
    counted: str = "all"             # "exposed": only the misses a core waits for are counted

    def to_dict(self) -> dict[str, Any]:
        return {"format": "corecast-mrc", "line": self.line, "accesses": self.accesses_kind,
                "counted": self.counted, "sample_rate": self.sample_rate,
                "sample_error": self.sample_error, "curves": [c.to_dict() for c in self.curves]}


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:g} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{n:g} B"


def resolution_bytes(line: int, rate: float) -> int:
    """The smallest cache a sample at this rate can speak for: 1/rate lines (one sampled line
    stands for that many), as a power of two; one line when nothing is sampled away."""
    if rate >= 1.0:
        return line
    return 1 << math.ceil(math.log2(line / rate))


def auto_sizes(line: int, footprint_bytes: float, rate: float = 1.0) -> list[int]:
    """Powers of two from 1 KiB (or the sample's resolution) to the first at or above the
    footprint."""
    lo = max(line, 1024, resolution_bytes(line, rate))
    hi = max(lo, 1 << max(0, math.ceil(math.log2(max(footprint_bytes, 1)))))
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= 2
    return out


def knee(sizes: Sequence[float], ratios: Sequence[float]) -> int | None:
    """The size farthest below the chord of the curve on a log2 size axis (None: no bend)."""
    x = np.log2(np.asarray(sizes, dtype=float))
    y = np.asarray(ratios, dtype=float)
    if len(x) < 3 or not np.all(np.isfinite(y)) or y[0] - y[-1] <= 1e-12:
        return None
    chord = y[0] + (y[-1] - y[0]) * (x - x[0]) / (x[-1] - x[0])
    gap = chord - y
    i = int(np.argmax(gap))
    return int(sizes[i]) if gap[i] > 1e-12 else None


def working_sets(h: Histogram, share: float = 0.10) -> list[int]:
    """Sizes (bytes) at which a large group of reuses turns into hits (see the module doc)."""
    counts = h.counts.astype(float)
    if not len(counts) or counts.sum() <= 0:
        return []
    d = np.arange(len(counts)) * h.lines_per_unit + 1.0          # lines needed to hit
    band = np.floor(4 * np.log2(d)).astype(int)                  # quarter octaves
    mass = np.bincount(band, weights=counts)
    reach = np.zeros(len(mass))                                  # lines that make the band hit
    np.maximum.at(reach, band[counts > 0], d[counts > 0])
    total = mass.sum()
    out = []
    for b in range(len(mass)):
        left = mass[b - 1] if b > 0 else 0.0
        right = mass[b + 1] if b + 1 < len(mass) else 0.0
        if mass[b] >= share * total and mass[b] > left and mass[b] >= right:
            out.append(int(math.ceil(reach[b] - 1e-9)) * h.line)
    return out


def sample_error_note(rate: float, line: int, tracked_lines: int,
                      sizes: Sequence[int]) -> str | None:
    """What the sampling costs in accuracy, as measured here."""
    if rate >= 1.0:
        return None
    res = resolution_bytes(line, rate)
    note = (f"SHARDS at rate {rate:.4g}: each tracked access stands for {1 / rate:.0f}; from "
            f"{fmt_bytes(res)} up the mean absolute error of the curve was under 0.02 (miss ratio) "
            f"at rate 0.01 on the traces tested (tests/test_sim_mrc.py)")
    small = [s for s in sizes if s < res]
    if small:
        note += (f"; sizes under {fmt_bytes(res)} ({len(small)} asked) are below what one sampled "
                 "line stands for: their points are rough")
    if tracked_lines < 100:
        note += f"; only {tracked_lines} distinct lines were sampled: too few to trust the curve"
    return note


def analyse(source: Trace | Iterable[np.ndarray], *, sizes: Sequence[int] | None = None, line: int = 64,
            accesses: str = "all", rate: float = 1.0, assoc: int | None = None,
            per_thread: bool = False, count: str = "all", sample_max: int | None = None) -> MrcResult:
    """The miss-rate curves of a trace (or of record arrays given in order), in one pass.

    `accesses` (all, data, instr) picks the stream of a cache (unified, data, instruction);
    `count="exposed"` counts only the accesses a core waits for -- fetches, loads and
    read-modify-writes -- as the simulator's events do, while stores still move their lines to the
    top of the stack (the curve that feeds a CPI stack, corecast.model.misscurve).
    `sample_max` makes the sample fixed-size SHARDS: at most that many lines tracked, the rate
    falling from `rate` as the footprint asks."""
    if isinstance(source, Trace):
        chunks: Iterable[np.ndarray] = source.chunks(1 << 20, checked=False)
        where = source.path or "trace"
    else:
        chunks, where = source, "trace"
    start = [0, 0]                      # where the chunk being fed begins, and the next one

    def counted() -> Iterator[np.ndarray]:
        for chunk in chunks:
            start[0], start[1] = start[1], start[1] + len(chunk)
            yield chunk

    try:
        return _analyse(counted(), sizes=sizes, line=line, accesses=accesses, rate=rate, assoc=assoc,
                        per_thread=per_thread, count=count, sample_max=sample_max)
    except BadKind as err:
        raise UserError(f"{where}: record {start[0] + err.index}: kind {err.kind} is not a record "
                        "kind (a damaged or foreign file)") from None


def _analyse(chunks: Iterable[np.ndarray], *, sizes: Sequence[int] | None, line: int, accesses: str,
             rate: float, assoc: int | None, per_thread: bool, count: str,
             sample_max: int | None = None) -> MrcResult:
    mask = _kindmask(accesses)
    if count not in COUNTS:
        raise UserError(f"--count {count}: choose all or exposed")
    cmask = mask & EXPOSED if count == "exposed" else mask
    _line_shift(line)
    if sizes is not None:
        sizes = sorted({int(s) for s in sizes})
        if not sizes or sizes[0] < line:
            raise UserError(f"cache sizes must be at least one line ({line} bytes)")
    shared = StackDistances(line, rate, sample_max)
    threads: dict[int, StackDistances] = {}
    sa_shared = SetAssociative(sizes, assoc, line) if assoc and sizes else None
    sa_threads: dict[int, SetAssociative] = {}
    pending_sa = assoc is not None and sizes is None
    if pending_sa:
        raise UserError("--assoc needs --sizes (set-associative points are simulated one size each)")
    for chunk in chunks:
        shared.feed(chunk, mask, countmask=cmask)
        if sa_shared is not None:
            sa_shared.feed(chunk, mask, countmask=cmask)
        if per_thread and len(chunk):
            for tid in np.unique(chunk["tid"]):
                t = int(tid)
                if t not in threads:
                    threads[t] = StackDistances(line, rate, sample_max)
                    if assoc and sizes:
                        sa_threads[t] = SetAssociative(sizes, assoc, line)
                threads[t].feed(chunk, mask, t, countmask=cmask)
                if t in sa_threads:
                    sa_threads[t].feed(chunk, mask, t, countmask=cmask)
    hs = shared.histogram()
    if hs.offered == 0:
        what = {"all": "memory", "data": "data", "instr": "instruction"}[accesses]
        raise UserError(f"the trace has no {what} accesses" + (" a core waits for" if count == "exposed" else ""))
    grid = list(sizes) if sizes is not None else auto_sizes(line, hs.footprint_bytes, shared.rate)
    curves = [_curve("shared", hs, grid, sa_shared)]
    for t in sorted(threads):
        curves.append(_curve(f"thread {t}", threads[t].histogram(), grid, sa_threads.get(t)))
    return MrcResult(line, accesses, shared.rate, sample_error_note(shared.rate, line, hs.lines, grid),
                     curves, count)


def _curve(scope: str, h: Histogram, grid: list[int], sa: SetAssociative | None) -> Curve:
    misses = h.misses(grid)
    ratio = misses / h.offered if h.offered else np.full(len(grid), np.nan)
    fine = auto_sizes(h.line, h.footprint_bytes, h.rate)
    k = knee(fine, h.miss_ratio(fine)) if len(fine) >= 3 else None
    sa_d = None
    if sa is not None:
        acc, miss = sa.counts()
        sa_d = {"ways": sa.ways, "sizes_bytes": sa.sizes,
                "miss_ratio": [float(m) / float(a) if a else None for a, m in zip(acc, miss)],
                "misses": [int(m) for m in miss], "accesses": [int(a) for a in acc]}
    return Curve(scope, list(grid), [float(v) for v in ratio], [float(v) for v in misses], h.offered,
                 float(h.footprint_bytes), k, working_sets(h), h, sa_d, h.instructions)
