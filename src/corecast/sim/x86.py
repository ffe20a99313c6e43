"""x86-64 code a captured program ran, turned into what the simulator needs: its branch kinds
and uops with register dependencies (the decoder of one instruction is `x86decode`).

Lackey traces carry instruction addresses but no registers. `annotate_objects()` disassembles
each object the program ran (main executable, shared libraries) with objdump, maps its
addresses to the run's addresses (valgrind -v -v prints each object's stated and actual text
address), and decodes every instruction into uops (`x86decode.decode`).
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ..native import system_program
from . import native as N
from .x86decode import FLAGS, TMP_ADDR, TMP_LOAD, TMP_OP, Decoded, decode

__all__ = ["FLAGS", "TMP_ADDR", "TMP_LOAD", "TMP_OP", "Decoded", "decode"]

#: one instruction of `objdump -d -w`: address, bytes, text
_LINE = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f]{2}(?: [0-9a-f]{2})*)\s*\t(.*)$")


def _clear_first(uops: list[int]) -> list[int]:
    mask = ~(N.UOP_FIRST << 56) & ((1 << 64) - 1)
    return [u & mask for u in uops]


# ----------------------------------------------------------------------------------------
# objdump

def objdump() -> str | None:
    """binutils' objdump, where corecast may run it (`corecast.native.system_program`: as root,
    never one another user could have put in PATH's way)."""
    return system_program("objdump")


def objdump_available() -> bool:
    return objdump() is not None


def objdump_lines(path: str | Path, lo: int | None = None, hi: int | None = None) -> dict[int, tuple[int, str]]:
    """Each instruction objdump finds in `path` (file addresses), optionally only in [lo, hi):
    address -> (length, text)."""
    tool = objdump()
    if tool is None:
        return {}
    cmd = [tool, "-d", "-w", str(path)]
    if lo is not None and hi is not None:
        cmd[2:2] = [f"--start-address={lo:#x}", f"--stop-address={hi:#x}"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    except OSError:
        return {}
    out: dict[int, tuple[int, str]] = {}
    for line in res.stdout.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        text = m.group(3).strip()
        if not text or text.startswith("(bad)"):
            continue
        out[int(m.group(1), 16)] = ((len(m.group(2)) + 1) // 3, text)
    return out


def decoded(length: int, text: str) -> Decoded:
    """One instruction of objdump's, decoded into the uops the trace carries."""
    d = decode(text, length)
    d.uops = _clear_first(d.uops)
    return d


def disassemble(path: str | Path, lo: int | None = None, hi: int | None = None,
                want: set[int] | None = None) -> dict[int, Decoded]:
    """Decode the instructions objdump finds in `path` (file addresses), optionally only in
    [lo, hi) and only those in `want`."""
    return {addr: decoded(length, text) for addr, (length, text) in objdump_lines(path, lo, hi).items()
            if want is None or addr in want}


@dataclass
class LoadedObject:
    path: str
    svma: int
    avma: int

    @property
    def bias(self) -> int:
        return self.avma - self.svma


_READING = re.compile(r"Reading syms from (\S+)")
_SVMA = re.compile(r"svma 0x([0-9a-f]+), avma 0x([0-9a-f]+)")


def objects_from_valgrind_log(lines: Iterable[str]) -> list[LoadedObject]:
    """Objects valgrind loaded and where (from `valgrind -v -v` messages)."""
    objs: list[LoadedObject] = []
    current: str | None = None
    for line in lines:
        m = _READING.search(line)
        if m:
            current = m.group(1)
            continue
        m = _SVMA.search(line)
        if m and current:
            if "/valgrind/" not in current:
                objs.append(LoadedObject(current, int(m.group(1), 16), int(m.group(2), 16)))
            current = None
    return objs


@lru_cache(maxsize=256)
def exec_ranges(path: str) -> list[tuple[int, int]]:
    try:
        res = subprocess.run(["objdump", "-h", "-w", path], capture_output=True, text=True,
                             errors="replace")
    except OSError:
        return []
    ranges = []
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 7 and "CODE" in line:
            try:
                size, vma = int(parts[2], 16), int(parts[3], 16)
            except ValueError:
                continue
            ranges.append((vma, vma + size))
    return ranges


@dataclass
class Annotation:
    """Decoded instructions at run-time addresses, ready for the native annotation pass."""

    pcs: np.ndarray
    lens: np.ndarray
    brflags: np.ndarray
    uop_start: np.ndarray
    uop_count: np.ndarray
    uops: np.ndarray
    objects: list[str]

    def __len__(self) -> int:
        return len(self.pcs)


def build_annotation(objects: list[LoadedObject], pcs_seen: np.ndarray) -> Annotation:
    """Disassemble the objects that contain any of `pcs_seen` and build the lookup table."""
    pcs_seen = np.unique(pcs_seen)
    table: dict[int, Decoded] = {}
    used: list[str] = []
    for obj in objects:
        ranges = exec_ranges(obj.path)
        hit = False
        for lo, hi in ranges:
            a, b = lo + obj.bias, hi + obj.bias
            i = np.searchsorted(pcs_seen, a)
            if i < len(pcs_seen) and pcs_seen[i] < b:
                hit = True
                sel = pcs_seen[(pcs_seen >= a) & (pcs_seen < b)]
                want = {int(x) - obj.bias for x in sel.tolist()}
                for addr, d in disassemble(obj.path, lo, hi, want).items():
                    table[addr + obj.bias] = d
        if hit:
            used.append(obj.path)
    keys = np.array(sorted(table), dtype=np.uint64)
    n = len(keys)
    lens = np.zeros(n, np.uint8)
    br = np.zeros(n, np.uint8)
    start = np.zeros(n, np.uint32)
    count = np.zeros(n, np.uint8)
    flat: list[int] = []
    for i, k in enumerate(keys.tolist()):
        d = table[k]
        lens[i] = min(d.length, 255)
        br[i] = d.branch
        start[i] = len(flat)
        count[i] = len(d.uops)
        flat.extend(d.uops)
    return Annotation(keys, lens, br, start, count, np.array(flat, dtype=np.uint64), used)


class Annotator:
    """The native annotation pass over record batches."""

    def __init__(self, ann: Annotation):
        self._L = N.lib()
        self._ann = ann  # keep the arrays alive
        self._h = self._L.cc_annot_new(ann.pcs.ctypes.data, ann.lens.ctypes.data,
                                       ann.brflags.ctypes.data, ann.uop_start.ctypes.data,
                                       ann.uop_count.ctypes.data,
                                       ann.uops.ctypes.data if len(ann.uops) else None,
                                       len(ann.pcs))
        if not self._h:
            raise MemoryError("annotation table")

    def run(self, recs: np.ndarray, final: bool = False) -> np.ndarray:
        recs = N.as_records(recs)
        out = np.empty(len(recs) * 8 + 8, dtype=N.RECORD_DTYPE)
        n = self._L.cc_annotate(self._h, recs.ctypes.data, len(recs), out.ctypes.data,
                                1 if final else 0)
        return out[:n]

    def counts(self) -> tuple[int, int]:
        import ctypes as C
        f, m = C.c_uint64(), C.c_uint64()
        self._L.cc_annot_counts(self._h, C.byref(f), C.byref(m))
        return f.value, m.value

    def __del__(self) -> None:
        h = getattr(self, "_h", None)
        if h:
            self._L.cc_annot_free(h)
            self._h = None


# ----------------------------------------------------------------------------------------
# the objects a captured program loaded, and its markers' addresses in them

def symbol_address(path: str, name: str) -> int | None:
    """File address of symbol `name` in `path` (static table first, then dynamic)."""
    for args in (["nm", "--defined-only"], ["nm", "-D", "--defined-only"]):
        try:
            res = subprocess.run([*args, path], capture_output=True, text=True, errors="replace")
        except OSError:
            return None
        for line in res.stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[2].split("@")[0] == name and parts[1] in "TtWwiI":
                try:
                    return int(parts[0], 16)
                except ValueError:
                    continue
    return None


def resolve_markers(markers: Sequence[str], objects: list[LoadedObject]) -> dict[str, int | None]:
    """Run-time addresses of markers given as hex addresses or symbol names."""
    out: dict[str, int | None] = {}
    for m in markers:
        if re.fullmatch(r"0x[0-9a-fA-F]+", m):
            out[m] = int(m, 16)
            continue
        addr = None
        for obj in objects:
            a = symbol_address(obj.path, m)
            if a is not None:
                addr = a + obj.bias
                break
        out[m] = addr
    return out



_MAPS = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) \S+ \d+\s+(/\S.*)$")
_LOAD = re.compile(r"^\s*LOAD off\s+0x([0-9a-f]+) vaddr 0x([0-9a-f]+)")


@lru_cache(maxsize=256)
def _first_load(path: str) -> tuple[int, int] | None:
    """(file offset, virtual address) of an ELF file's first loadable segment."""
    try:
        res = subprocess.run(["objdump", "-p", path], capture_output=True, text=True, errors="replace")
    except OSError:
        return None
    for line in res.stdout.splitlines():
        m = _LOAD.match(line)
        if m:
            return int(m.group(1), 16), int(m.group(2), 16)
    return None


def objects_from_maps(path: str | Path, exclude: Sequence[str] = ()) -> list[LoadedObject]:
    """Objects mapped from files (as /proc/PID/maps lists them) and their load addresses: where
    each file's first mapping (offset 0) lies, against its first loadable segment's address.
    Mappings at or above the lowest one of an `exclude`d file (QEMU itself, the plugin) are the
    host's, not the program's, and are left out."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return []
    return objects_from_maps_text(text, exclude)


def objects_from_maps_text(text: str, exclude: Sequence[str] = ()) -> list[LoadedObject]:
    """`objects_from_maps` of the text of a maps file (a running process's /proc/PID/maps)."""
    skip = {os.path.realpath(e) for e in exclude}
    rows = []
    for line in text.splitlines():
        m = _MAPS.match(line)
        if m:
            rows.append((int(m.group(1), 16), int(m.group(3), 16), m.group(4).strip()))
    # The host side (QEMU, its libraries, the plugin) lies above the guest's address space:
    # everything from the lowest mapping of an excluded file up is left out.
    host = min((start for start, _, file in rows if os.path.realpath(file) in skip), default=None)
    objs: list[LoadedObject] = []
    seen: set[tuple[str, int]] = set()
    loads: dict[str, tuple[int, int] | None] = {}
    for start, offset, file in rows:
        if offset != 0 or (host is not None and start >= host):
            continue
        if file.startswith("/dev/") or os.path.realpath(file) in skip or not os.path.isfile(file):
            continue
        if (file, start) in seen:
            continue
        seen.add((file, start))
        if file not in loads:
            loads[file] = _first_load(file)
        first = loads[file]
        if first is None:
            continue
        off, vaddr = first
        objs.append(LoadedObject(file, vaddr - off, start))
    return objs
