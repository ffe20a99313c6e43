"""Synthetic traces with known answers: streams, random working sets, shared-write ping-pong
between threads, transactions with private stacks, and uop dependency chains.

Every generator returns a numpy array of `RECORD_DTYPE`; `Trace(records)` wraps it. Unless
`fetch=False`, each data access is preceded by the fetch of the instruction that makes it
(4-byte instructions in a small loop), so per-1K-instruction figures are defined.
"""
from __future__ import annotations

from typing import Iterable, Iterator, Sequence


import numpy as np

from . import native as N
from .native import RECORD_DTYPE

CODE_BASE = 0x400000
HEAP_BASE = 0x10000000
STACK_TOP = 0x7FFF0000


def _interleave_fetch(data: np.ndarray, loop: int = 4, pc: int = CODE_BASE,
                      tid: np.ndarray | int = 0) -> np.ndarray:
    """Put an instruction fetch before every data record."""
    n = len(data)
    out = np.zeros(2 * n, dtype=RECORD_DTYPE)
    out["kind"][0::2] = N.KIND_FETCH
    out["size"][0::2] = 4
    out["addr"][0::2] = pc + 4 * (np.arange(n, dtype=np.uint64) % np.uint64(loop))
    out["tid"][0::2] = data["tid"]
    out[1::2] = data
    return out


#: Accesses (or instructions) per slice of the sliced generators: a multiple of 4, so that the
#: fetch loop's addresses (4 instructions) continue across slices.
SLICE = 1 << 20


def _whole(parts: Iterator[np.ndarray]) -> np.ndarray:
    out = list(parts)
    return np.concatenate(out) if len(out) != 1 else out[0]


def stream(n: int, stride: int = 8, size: int = 8, base: int = HEAP_BASE, kind: str = "load",
           tid: int = 0, fetch: bool = True) -> np.ndarray:
    """`n` accesses walking forward `stride` bytes at a time."""
    return _whole(stream_chunks(n, stride, size, base, kind, tid, fetch))


def stream_chunks(n: int, stride: int = 8, size: int = 8, base: int = HEAP_BASE, kind: str = "load",
                  tid: int = 0, fetch: bool = True, chunk: int = SLICE) -> Iterator[np.ndarray]:
    """`stream` in slices of `chunk` accesses, made as they are consumed (the same records)."""
    code = {"load": N.KIND_LOAD, "store": N.KIND_STORE, "modify": N.KIND_MODIFY}[kind]
    for lo in range(0, max(n, 1), chunk):
        k = min(chunk, n - lo)
        d = np.zeros(k, dtype=RECORD_DTYPE)
        d["addr"] = np.uint64(base) + np.arange(lo, lo + k, dtype=np.uint64) * np.uint64(stride)
        d["kind"] = code
        d["size"] = size
        d["tid"] = tid
        yield _interleave_fetch(d) if fetch else d


def random_accesses(n: int, working_set: int, size: int = 8, base: int = HEAP_BASE,
                    write_fraction: float = 0.0, seed: int = 1, tid: int = 0,
                    fetch: bool = True) -> np.ndarray:
    """`n` accesses at uniformly random `size`-aligned addresses in `working_set` bytes."""
    return _whole(random_chunks(n, working_set, size, base, write_fraction, seed, tid, fetch))


def random_chunks(n: int, working_set: int, size: int = 8, base: int = HEAP_BASE,
                  write_fraction: float = 0.0, seed: int = 1, tid: int = 0, fetch: bool = True,
                  chunk: int = SLICE) -> Iterator[np.ndarray]:
    """`random_accesses` in slices of `chunk` accesses, made as they are consumed: each slice
    draws its addresses, then its stores, from one generator (up to `chunk` accesses the records
    are those of one draw of n)."""
    rng = np.random.default_rng(seed)
    slots = max(1, working_set // size)
    for lo in range(0, max(n, 1), chunk):
        k = min(chunk, n - lo)
        d = np.zeros(k, dtype=RECORD_DTYPE)
        d["addr"] = np.uint64(base) + rng.integers(0, slots, k, dtype=np.uint64) * np.uint64(size)
        kinds = np.full(k, N.KIND_LOAD, dtype=np.uint8)
        if write_fraction > 0:
            kinds[rng.random(k) < write_fraction] = N.KIND_STORE
        d["kind"] = kinds
        d["size"] = size
        d["tid"] = tid
        yield _interleave_fetch(d) if fetch else d


def pingpong(rounds: int, threads: int = 2, pattern: str = "write", addr: int = HEAP_BASE,
             false_sharing: bool = False, fetch: bool = True) -> np.ndarray:
    """Threads take turns on one cache line: in each round thread 0 writes, then every other
    thread `pattern`s ("write" or "read") -- the line a shared counter or flag.

    With `false_sharing` each thread uses its own 8-byte word of the same line."""
    parts = list(pingpong_chunks(rounds, threads, pattern, addr, false_sharing, fetch))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=RECORD_DTYPE)


def pingpong_chunks(rounds: int, threads: int = 2, pattern: str = "write", addr: int = HEAP_BASE,
                    false_sharing: bool = False, fetch: bool = True,
                    chunk_records: int = 1 << 18) -> Iterator[np.ndarray]:
    """`pingpong` in slices of about `chunk_records` records, made as they are consumed: memory
    stays bounded whatever rounds x threads is (2,000 threads used to fill 24 GB)."""
    if pattern not in ("write", "read"):
        raise ValueError("pattern is 'write' or 'read'")
    t = np.arange(threads, dtype=np.uint64)
    one_addr = np.full(threads, addr, dtype=np.uint64) + (np.uint64(8) * t if false_sharing else np.uint64(0))
    one_kind = np.where((t == 0) | (pattern == "write"), N.KIND_STORE, N.KIND_LOAD).astype(np.uint8)
    per = max(4, (max(1, chunk_records // threads) // 4) * 4)   # whole rounds, a multiple of 4
    done = 0
    while done < rounds:
        k = min(per, rounds - done)
        d = np.zeros(k * threads, dtype=RECORD_DTYPE)
        d["addr"] = np.tile(one_addr, k)
        d["tid"] = np.tile(t.astype(np.uint16), k)
        d["kind"] = np.tile(one_kind, k)
        d["size"] = 8
        yield _interleave_fetch(d) if fetch else d
        done += k


def transactions(count: int, per_tx: int = 200, stack_bytes: int = 2048,
                 shared_bytes: int = 4096, private_bytes: int = 1 << 16,
                 stack_top: int = STACK_TOP, seed: int = 1, marker: int = 1) -> np.ndarray:
    """One thread serving `count` transactions, each starting with a marker record: pushes and
    pops on its stack (the same stack addresses in every transaction), reads of a shared
    read-only table, and writes to a per-transaction private buffer -- the shape of a
    memcached request. Split across cores by transaction, the stack is the only thing the
    transactions share for writing, so stack hashing removes every coherence event."""
    parts = list(transactions_chunks(count, per_tx, stack_bytes, shared_bytes, private_bytes,
                                     stack_top, seed, marker))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=RECORD_DTYPE)


def transactions_chunks(count: int, per_tx: int = 200, stack_bytes: int = 2048,
                        shared_bytes: int = 4096, private_bytes: int = 1 << 16,
                        stack_top: int = STACK_TOP, seed: int = 1, marker: int = 1,
                        chunk_records: int = 1 << 20) -> Iterator[np.ndarray]:
    """`transactions` in slices of about `chunk_records` records (whole transactions), made as
    they are consumed: memory stays bounded (100,000 transactions held 1.9 GB at once). The
    random numbers are drawn in the same order as one transaction at a time, so the records
    are the same for a seed however they are sliced."""
    rng = np.random.default_rng(seed)
    per = 2 * per_tx + 1                      # the marker, then a fetch before every access
    batch = max(1, chunk_records // per)
    n_stack, n_shared, n_private = stack_bytes // 8, shared_bytes // 8, private_bytes // 8
    done = 0
    while done < count:
        k = min(batch, count - done)
        which = np.empty((k, per_tx), dtype=np.int64)
        sp = np.empty((k, per_tx), dtype=np.uint64)
        sh = np.empty((k, per_tx), dtype=np.uint64)
        pv = np.empty((k, per_tx), dtype=np.uint64)
        for j in range(k):                    # the draws of one transaction, in their order
            which[j] = rng.integers(0, 3, per_tx)
            sp[j] = rng.integers(1, n_stack, per_tx)
            sh[j] = rng.integers(0, n_shared, per_tx)
            pv[j] = rng.integers(0, n_private, per_tx)
        tx = np.arange(done, done + k, dtype=np.uint64)[:, None]
        addr = np.where(which == 0, np.uint64(stack_top) - np.uint64(8) * sp,
                        np.where(which == 1, np.uint64(HEAP_BASE) + np.uint64(8) * sh,
                                 np.uint64(HEAP_BASE + 0x1000000) + tx * np.uint64(private_bytes)
                                 + np.uint64(8) * pv))
        kind = np.where(which == 1, N.KIND_LOAD, N.KIND_STORE).astype(np.uint8)
        out = np.zeros((k, per), dtype=RECORD_DTYPE)
        out["kind"][:, 0] = N.KIND_MARKER
        out["addr"][:, 0] = marker
        out["kind"][:, 1::2] = N.KIND_FETCH
        out["size"][:, 1::2] = 4
        out["addr"][:, 1::2] = CODE_BASE + 4 * (np.arange(per_tx, dtype=np.uint64) % np.uint64(4))
        out["kind"][:, 2::2] = kind
        out["addr"][:, 2::2] = addr
        out["size"][:, 2::2] = 8
        yield out.reshape(-1)
        done += k


# ----------------------------------------------------------------------------------------
# uops for the issue-rate model

def pack_uop(srcs: Sequence[int] = (), dsts: Sequence[int] = (), unit: int = N.UNIT_ALU,
             first: bool = True, placeholder: bool = False) -> int:
    """The `addr` word of a uop record: up to 4 source and 2 destination registers (0-254)."""
    if len(srcs) > 4 or len(dsts) > 2:
        raise ValueError("a uop has at most 4 sources and 2 destinations")
    w = 0
    regs = list(srcs) + [N.REG_NONE] * (4 - len(srcs))
    for i, r in enumerate(regs):
        if not 0 <= r <= 255:
            raise ValueError(f"register {r} out of range")
        w |= (r & 0xFF) << (8 * i)
    regs = list(dsts) + [N.REG_NONE] * (2 - len(dsts))
    for i, r in enumerate(regs):
        w |= (r & 0xFF) << (8 * (4 + i))
    w |= (unit & 0xFF) << 48
    flags = (N.UOP_FIRST if first else 0) | (N.UOP_PLACEHOLDER if placeholder else 0)
    return w | (flags << 56)


def unpack_uop(word: int) -> tuple[list[int], list[int], int, int]:
    srcs = [(word >> (8 * i)) & 0xFF for i in range(4)]
    dsts = [(word >> (8 * (4 + i))) & 0xFF for i in range(2)]
    return ([r for r in srcs if r != N.REG_NONE], [r for r in dsts if r != N.REG_NONE],
            (word >> 48) & 0xFF, (word >> 56) & 0xFF)


def program(instructions: Iterable[Sequence[tuple[Sequence[int], Sequence[int], int]]],
            pc: int = CODE_BASE, tid: int = 0) -> np.ndarray:
    """A trace of instructions given as lists of uops `(srcs, dsts, unit)`: each instruction
    becomes a fetch record followed by its uop records."""
    rows: list[tuple[int, int, int]] = []
    for i, uops in enumerate(instructions):
        rows.append((pc + 4 * i, N.KIND_FETCH, 4))
        for j, (srcs, dsts, unit) in enumerate(uops):
            rows.append((pack_uop(srcs, dsts, unit, first=(j == 0)), N.KIND_UOP, 0))
    d = np.zeros(len(rows), dtype=RECORD_DTYPE)
    if rows:
        d["addr"] = np.array([r[0] for r in rows], dtype=np.uint64)
        d["kind"] = [r[1] for r in rows]
        d["size"] = [r[2] for r in rows]
        d["tid"] = tid
    return d


#: Dependency chains a trace can hold: one register each, 0-254 (255 means none).
MAX_CHAINS = N.REG_NONE


def chains(n: int, width: int = 1, unit: int = N.UNIT_ALU) -> np.ndarray:
    """`n` single-uop instructions forming `width` independent dependency chains, interleaved:
    instruction i reads and writes register i mod width. One chain runs at 1 instruction per
    cycle; `width` chains at up to `width` per cycle."""
    return _whole(chains_chunks(n, width, unit))


def chains_chunks(n: int, width: int = 1, unit: int = N.UNIT_ALU, pc: int = CODE_BASE,
                  chunk: int = SLICE) -> Iterator[np.ndarray]:
    """`chains` in slices of `chunk` instructions, made as they are consumed (the records of
    `program` with those instructions)."""
    if not 1 <= width <= MAX_CHAINS:
        raise ValueError(f"{width} chains: 1 to {MAX_CHAINS} (a register each)")
    words = np.array([pack_uop([r], [r], unit) for r in range(width)], dtype=np.uint64)
    for lo in range(0, max(n, 1), chunk):
        k = min(chunk, n - lo)
        i = np.arange(lo, lo + k, dtype=np.uint64)
        d = np.zeros(2 * k, dtype=RECORD_DTYPE)
        d["addr"][0::2] = np.uint64(pc) + np.uint64(4) * i
        d["kind"][0::2] = N.KIND_FETCH
        d["size"][0::2] = 4
        d["addr"][1::2] = words[i % np.uint64(width)]
        d["kind"][1::2] = N.KIND_UOP
        yield d


def independent(n: int, unit: int = N.UNIT_ALU) -> np.ndarray:
    """`n` instructions with no register dependencies."""
    return program([[((), (i % 200,), unit)] for i in range(n)])
