"""ctypes bindings of the chase kernel (native/chase/chase.c, libcorecast_chase.so).

A shared library rather than a program: one process keeps the buffer and its order for a whole
sweep and relinks the chains for each point in O(chains) (building a 256 MiB random order takes
a good part of a second), and the results come back as arrays rather than text to parse.
The calls release the GIL (ctypes does) and last one point each (a fraction of a second), so
Ctrl-C is seen between points.
"""
from __future__ import annotations

import ctypes as C
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...errors import UserError
from ...native import load_library

PAGES = {"4k": 0, "2m": 1, "thp": 2}
PAGE_NAMES = {v: k for k, v in PAGES.items()}
PAGE_BYTES = {"4k": 4096, "2m": 2 << 20, "thp": 2 << 20}
_MSG = 512


@lru_cache(maxsize=1)
def lib() -> C.CDLL:
    L = load_library("libcorecast_chase.so")
    P, S, U64 = C.c_void_p, C.c_size_t, C.c_uint64
    L.cc_chase_new.restype = P
    L.cc_chase_new.argtypes = [S, S, C.c_int, C.c_char_p, S]
    L.cc_chase_free.argtypes = [P]
    L.cc_chase_info.argtypes = [P, C.POINTER(U64)]
    L.cc_chase_order.argtypes = [P, C.c_int, S, S, U64]
    L.cc_chase_order.restype = C.c_int
    L.cc_chase_link.argtypes = [P, S]
    L.cc_chase_link.restype = C.c_int
    L.cc_chase_max_chains.restype = C.c_int
    L.cc_chase_verify.argtypes = [P, P]
    L.cc_chase_verify.restype = C.c_int
    L.cc_chase_run.argtypes = [P, C.c_int, C.c_int, P, C.c_int, U64, C.POINTER(C.c_int), C.c_int,
                               U64, U64, P, P, P, C.c_char_p, S]
    L.cc_chase_run.restype = C.c_int
    L.cc_timer_overhead_ns.argtypes = [C.c_int]
    L.cc_timer_overhead_ns.restype = C.c_double
    L.cc_pingpong.argtypes = [C.c_int, C.c_int, C.c_int, C.c_int, P, P, C.c_char_p, S]
    L.cc_pingpong.restype = C.c_int
    return L


def max_chains() -> int:
    """Chains per thread the kernel has a loop for."""
    return int(lib().cc_chase_max_chains())


class Buffer:
    """A buffer of lines with its cyclic order (close() or a `with` block frees it)."""

    def __init__(self, size_bytes: int, line: int, page: str) -> None:
        msg = C.create_string_buffer(_MSG)
        self._h = lib().cc_chase_new(size_bytes, line, PAGES[page], msg, _MSG)
        if not self._h:
            raise UserError(f"--size {size_bytes}: {msg.value.decode() or 'cannot allocate the buffer'}")
        #: the fallback taken, in one line ("" when the page kind asked for was obtained)
        self.fallback = msg.value.decode()
        info = (C.c_uint64 * 4)()
        lib().cc_chase_info(self._h, info)
        self.address, self.size_bytes, page_used, self.lines = int(info[0]), int(info[1]), int(info[2]), int(info[3])
        self.page = PAGE_NAMES[page_used]
        self.line = line
        self.chains = 0

    def order(self, pattern: str, stride_lines: int, group_bytes: int, seed: int) -> None:
        kind = 0 if pattern == "random" else 1
        if lib().cc_chase_order(self._h, kind, stride_lines, group_bytes, seed) != 0:
            raise UserError("cannot build the chains (out of memory)")
        self.chains = 1

    def link(self, chains: int) -> None:
        if chains > self.lines:
            raise UserError(f"{chains} chains in a buffer of {self.lines} lines: give a larger --size "
                            "or fewer chains or threads")
        if chains != self.chains:
            if lib().cc_chase_link(self._h, chains) != 0:
                raise UserError("cannot link the chains (out of memory)")
            self.chains = chains

    def verify(self) -> list[int] | None:
        """The length of every chain when they are disjoint cycles covering every line once
        (None otherwise): a check of the chain construction, for tests."""
        out = np.zeros(max(1, self.chains), dtype=np.uint64)
        if lib().cc_chase_verify(self.handle, out.ctypes.data) != 0:
            return None
        return [int(v) for v in out]

    @property
    def handle(self) -> int:
        if not self._h:
            raise ValueError("buffer closed")
        return self._h

    def close(self) -> None:
        if self._h:
            lib().cc_chase_free(self._h)
            self._h = None

    def __enter__(self) -> "Buffer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


@dataclass
class Samples:
    """One run: count[worker, sample] (dereferences for a chaser, lines for a loader), ns (wall
    time) and cpu_ns (the time the thread ran) [worker, sample]; 0 where a worker did not run
    through a sample."""

    count: np.ndarray
    ns: np.ndarray
    cpu_ns: np.ndarray


def run(chase: Buffer | None, threads: int, chains: int, cpus: list[int], samples: int, sample_s: float,
        warmup_s: float, load: Buffer | None = None, loaders: int = 0, delay: int = 0) -> Samples:
    """Run `threads` chasers (chase linked with threads x chains chains) and `loaders` loaders
    pinned to `cpus` (one per worker; -1 leaves one unpinned)."""
    workers = threads + loaders
    if len(cpus) != workers:
        raise ValueError("one CPU per worker")
    count = np.zeros((workers, samples), dtype=np.uint64)
    ns = np.zeros((workers, samples), dtype=np.uint64)
    cpu_ns = np.zeros((workers, samples), dtype=np.uint64)
    arr = (C.c_int * workers)(*cpus)
    msg = C.create_string_buffer(_MSG)
    rc = lib().cc_chase_run(chase.handle if chase else None, threads, chains, load.handle if load else None,
                            loaders, delay, arr, samples, int(sample_s * 1e9), int(warmup_s * 1e9),
                            count.ctypes.data, ns.ctypes.data, cpu_ns.ctypes.data, msg, _MSG)
    if rc != 0:
        raise UserError(msg.value.decode() or "the run failed")
    return Samples(count.astype(float), ns.astype(float), cpu_ns.astype(float))


def timer_overhead_ns(trials: int = 21) -> float:
    """The cost of the clock reads at one sample boundary here, ns (see chase.c)."""
    return float(lib().cc_timer_overhead_ns(trials))


def pingpong(cpu_a: int, cpu_b: int, rounds: int, samples: int) -> tuple[np.ndarray, np.ndarray]:
    """ns per one-way cache-line transfer between cpu_a and cpu_b, one value per sample, and
    whether the scheduler switched either thread out during each sample (bool per sample)."""
    out = np.zeros(samples, dtype=float)
    disturbed = np.zeros(samples, dtype=np.uint8)
    msg = C.create_string_buffer(_MSG)
    if lib().cc_pingpong(cpu_a, cpu_b, rounds, samples, out.ctypes.data, disturbed.ctypes.data, msg, _MSG) != 0:
        raise UserError(msg.value.decode() or "the ping-pong failed")
    return out, disturbed.astype(bool)
