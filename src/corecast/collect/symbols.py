"""Addresses of a finished process turned into names: which ELF object, function, file:line, and
which global or static variable.

The sync shim records, when a process exits, its file-backed mappings (`/proc/self/maps`); the
addresses it saw (locks, call sites) are symbolized here, after the run, from the files those
mappings name:

- the object and its load bias from the mappings and the object's program headers (PT_LOAD), so
  that `.bss` (an anonymous mapping after the file's last page) is found too;
- functions and variables from the ELF symbol tables (`.symtab`, else `.dynsym`), read here in
  Python; a local (static) symbol's source file from the STT_FILE symbol before it;
- file:line of a call site from the object's DWARF line table through binutils' `addr2line`
  (present wherever gcc is), one process per object for all its addresses; without debug
  information, or without addr2line, a site has its function only.

Why after the run and not in the shim (libdw, libunwind): the shim stays small, async-signal-safe
where it writes its report, adds no library to the measured program, and costs nothing while it
runs; an address needs its object only once the run has ended, and the files are still there.

Bounds: at most MAX_MAPS mappings, MAX_SECTION_BYTES per symbol or string table, only regular
files that start with the ELF magic, addr2line for at most MAX_ADDR2LINE addresses per object
and ADDR2LINE_TIMEOUT_S seconds.
"""
from __future__ import annotations

import bisect
import os
import stat
import struct
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

from ..native import system_program

MAX_MAPS = 4096
MAX_SECTION_BYTES = 64 << 20
MAX_ADDR2LINE = 4096
ADDR2LINE_TIMEOUT_S = 20.0

PT_LOAD = 1
SHT_SYMTAB, SHT_DYNSYM = 2, 11
STT_OBJECT, STT_FUNC, STT_FILE, STT_TLS = 1, 2, 4, 6
SHN_UNDEF = 0


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    offset: int
    path: str


@dataclass(frozen=True)
class Symbol:
    value: int
    size: int
    name: str
    file: str | None          # the source file of a local (static) symbol, when the table says it
    local: bool


@dataclass
class Elf:
    """What corecast needs of one ELF file: its loadable segments and its symbols."""

    path: str
    kind: int                                   # e_type: 2 executable, 3 shared object / PIE
    loads: list[tuple[int, int, int, int]]      # (p_offset, p_vaddr, p_filesz, p_memsz)
    funcs: list[Symbol] = field(default_factory=list)
    objects: list[Symbol] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.funcs.sort(key=lambda s: s.value)
        self.objects.sort(key=lambda s: s.value)
        self._fkeys = [s.value for s in self.funcs]
        self._okeys = [s.value for s in self.objects]

    @property
    def span(self) -> tuple[int, int]:
        lo = min((v for _, v, _, _ in self.loads), default=0)
        hi = max((v + m for _, v, _, m in self.loads), default=0)
        return lo, hi

    def vaddr_of_offset(self, offset: int) -> int | None:
        """The virtual address the file offset `offset` is loaded at (before the bias)."""
        for off, vaddr, filesz, _ in self.loads:
            if off - (off % 4096) <= offset < off + max(filesz, 1):
                return vaddr - off + offset
        return None

    @staticmethod
    def _lookup(keys: list[int], syms: list[Symbol], vaddr: int) -> Symbol | None:
        i = bisect.bisect_right(keys, vaddr) - 1
        while i >= 0:
            s = syms[i]
            if s.value <= vaddr < s.value + max(s.size, 1):
                return s
            if s.size == 0 or vaddr - s.value > (1 << 24):
                return None
            i -= 1                              # a symbol inside a larger one (aliases): look back
        return None

    def function(self, vaddr: int) -> Symbol | None:
        return self._lookup(self._fkeys, self.funcs, vaddr)

    def variable(self, vaddr: int) -> Symbol | None:
        return self._lookup(self._okeys, self.objects, vaddr)


def parse_maps(lines: Iterable[str]) -> list[Mapping]:
    """The shim's `map START END OFFSET PATH` lines (hex numbers), at most MAX_MAPS."""
    out = []
    for ln in lines:
        parts = ln.split(" ", 4)
        if len(parts) < 5 or parts[0] != "map" or not parts[4].startswith("/"):
            continue                # a mapping of a file names it by its absolute path
        try:
            m = Mapping(int(parts[1], 16), int(parts[2], 16), int(parts[3], 16), parts[4].rstrip("\n"))
        except ValueError:
            continue
        out.append(m)
        if len(out) >= MAX_MAPS:
            break
    return out


def _read_section(fh, offset: int, size: int) -> bytes:
    if size < 0 or size > MAX_SECTION_BYTES:
        return b""
    fh.seek(offset)
    return fh.read(size)


def read_elf(path: str) -> Elf | None:
    """The ELF file at `path` (64-bit little-endian), or None when it is not one or cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return _read_elf_cached(path, st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=64)
def _read_elf_cached(path: str, mtime_ns: int, size: int) -> Elf | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            return _parse_elf(fh, path)
    except (OSError, struct.error, ValueError, IndexError):
        return None


def _parse_elf(fh, path: str) -> Elf | None:
    ident = fh.read(64)
    if len(ident) < 64 or ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
        return None                                  # not a 64-bit little-endian ELF file
    (e_type, _machine, _version, _entry, e_phoff, e_shoff, _flags, _ehsize, e_phentsize, e_phnum,
     e_shentsize, e_shnum, _shstrndx) = struct.unpack_from("<HHIQQQIHHHHHH", ident, 16)
    loads = []
    if e_phnum and e_phentsize >= 56 and e_phnum <= 4096:
        fh.seek(e_phoff)
        ph = fh.read(e_phentsize * e_phnum)
        for i in range(e_phnum):
            p_type, _fl, p_offset, p_vaddr, _pa, p_filesz, p_memsz, _al = struct.unpack_from(
                "<IIQQQQQQ", ph, i * e_phentsize)
            if p_type == PT_LOAD:
                loads.append((p_offset, p_vaddr, p_filesz, p_memsz))
    if not loads:
        return None
    sections = []
    if e_shnum and e_shentsize >= 64 and e_shnum <= 65535:
        fh.seek(e_shoff)
        sh = fh.read(e_shentsize * e_shnum)
        for i in range(min(e_shnum, len(sh) // e_shentsize)):
            (_name, sh_type, _fl, _addr, sh_offset, sh_size, sh_link, _info, _al,
             sh_entsize) = struct.unpack_from("<IIQQQQIIQQ", sh, i * e_shentsize)
            sections.append((sh_type, sh_offset, sh_size, sh_link, sh_entsize))
    funcs: list[Symbol] = []
    objects: list[Symbol] = []
    for want in (SHT_SYMTAB, SHT_DYNSYM):
        for sh_type, off, size, link, entsize in sections:
            if sh_type != want or entsize < 24 or link >= len(sections):
                continue
            data = _read_section(fh, off, size)
            strtab = _read_section(fh, sections[link][1], sections[link][2])
            _symbols(data, entsize, strtab, funcs, objects)
        if funcs or objects:
            break                   # .symtab has everything .dynsym has
    return Elf(path=path, kind=e_type, loads=loads, funcs=funcs, objects=objects)


def _name(strtab: bytes, at: int) -> str:
    if at >= len(strtab):
        return ""
    end = strtab.find(b"\0", at)
    return strtab[at:end if end >= 0 else len(strtab)].decode("utf-8", "replace")


def _symbols(data: bytes, entsize: int, strtab: bytes, funcs: list[Symbol], objects: list[Symbol]) -> None:
    current_file: str | None = None
    for i in range(len(data) // entsize):
        st_name, st_info, _other, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", data, i * entsize)
        typ, bind = st_info & 0xF, st_info >> 4
        if typ == STT_FILE:
            current_file = _name(strtab, st_name) or None
            continue
        if st_shndx == SHN_UNDEF or typ not in (STT_FUNC, STT_OBJECT):
            continue
        name = _name(strtab, st_name)
        if not name:
            continue
        local = bind == 0
        sym = Symbol(st_value, st_size, name, current_file if local else None, local)
        (funcs if typ == STT_FUNC else objects).append(sym)


# ============================================================================ a process's addresses
@dataclass(frozen=True)
class Located:
    """An address inside an object: the object's path and the address as the object sees it."""

    path: str
    vaddr: int


class AddressSpace:
    """The objects of one exited process, from its recorded mappings."""

    def __init__(self, maps: Sequence[Mapping]):
        self.ranges: list[tuple[int, int, str, int]] = []      # (start, end, path, bias)
        seen: dict[str, int] = {}
        for m in sorted(maps, key=lambda m: (m.path, m.offset)):
            if m.path in seen or m.path.endswith(" (deleted)"):
                continue
            elf = read_elf(m.path)
            if elf is None:
                continue
            v = elf.vaddr_of_offset(m.offset)
            if v is None:
                continue
            bias = m.start - v
            seen[m.path] = bias
            lo, hi = elf.span
            self.ranges.append((bias + lo, bias + hi, m.path, bias))
        self.ranges.sort()

    def locate(self, addr: int) -> Located | None:
        for start, end, path, bias in self.ranges:
            if start <= addr < end:
                return Located(path, addr - bias)
        return None


@dataclass
class Site:
    """A code address symbolized: its function and, with debug information, its file and line."""

    object: str | None = None
    offset: int | None = None
    function: str | None = None
    file: str | None = None
    line: int | None = None


#: Where a compiler's and the C/C++ library's headers live: an inlined frame in one of them (a
#: `std::mutex::lock()` expanded into `pthread_mutex_lock`) is not where the program takes a lock.
SYSTEM_HEADERS = ("/usr/include/", "/usr/local/include/", "/usr/lib/gcc/", "/usr/lib/llvm")


def addr2line(path: str, vaddrs: Sequence[int]) -> dict[int, tuple[str | None, str | None, int | None]]:
    """(function, file, line) of each address in the object at `path`, from its DWARF line table,
    through binutils' addr2line; empty where it is missing, times out or fails. Where the address
    lies in code inlined from a system header (`SYSTEM_HEADERS`), the file and line are those of
    the first frame it was inlined into that is the program's own: a C++ program's every
    `std::mutex::lock()` read `gthr-default.h:749`, its own line only in addr2line's inline chain."""
    tool = system_program("addr2line")         # never a user's, nor the current folder's, as root
    todo = sorted(set(vaddrs))[:MAX_ADDR2LINE]
    if not tool or not todo:
        return {}
    try:
        p = subprocess.run([tool, "-a", "-i", "-f", "-C", "-e", path, *(hex(a) for a in todo)], capture_output=True,
                           text=True, timeout=ADDR2LINE_TIMEOUT_S, errors="replace",
                           env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return {}
    if p.returncode != 0:
        return {}
    # -a: each address's line ("0x000…"), then its frames as (function, file:line) pairs, the
    # innermost first (-i)
    blocks: dict[int, list[tuple[str, str]]] = {}
    frames: list[str] | None = None
    for raw in p.stdout.splitlines():
        text = raw.strip()
        if text.startswith("0x") and len(text) > 2 and all(c in "0123456789abcdef" for c in text[2:]):
            frames = blocks.setdefault(int(text, 16), [])
        elif frames is not None:
            frames.append(text)              # type: ignore[arg-type]
    out = {}
    for a in todo:
        got = blocks.get(a)
        if not got or len(got) < 2:
            continue
        pairs = [(_where(got[i + 1]), got[i]) for i in range(0, len(got) - 1, 2)]
        fn = got[0]
        file, line = pairs[0][0]
        if file and file.startswith(SYSTEM_HEADERS):
            # the frame's function is the one whose code holds its file:line
            own = next(((w, f) for w, f in pairs[1:] if w[0] and not w[0].startswith(SYSTEM_HEADERS)), None)
            if own is not None:
                (file, line), fn = own
        out[a] = (None if fn in ("??", "") else fn, file, line)
    if len(out) < len(todo):
        return {}                            # output not as asked: no guess
    return out


def _where(text: str) -> tuple[str | None, int | None]:
    """addr2line's "file:line (discriminator N)" as (file, line); (None, None) where unknown."""
    where = text.split(" (discriminator", 1)[0]
    file, _, num = where.rpartition(":")
    line = int(num) if num.isdigit() and int(num) > 0 else None
    return (None if file in ("??", "") or line is None else file), line


def symbolize_sites(space: AddressSpace, addrs: Iterable[int]) -> dict[int, Site]:
    """Each call site (a return address) symbolized; the call instruction is the byte before it."""
    located: dict[int, Located] = {}
    for a in set(addrs):
        loc = space.locate(a)
        if loc is not None:
            located[a] = loc
    by_obj: dict[str, list[int]] = {}
    for loc in located.values():
        by_obj.setdefault(loc.path, []).append(max(loc.vaddr - 1, 0))
    lines = {path: addr2line(path, vs) for path, vs in by_obj.items()}
    out: dict[int, Site] = {}
    for a in set(addrs):
        loc = located.get(a)
        if loc is None:
            out[a] = Site()
            continue
        elf = read_elf(loc.path)
        sym = elf.function(loc.vaddr - 1) if elf is not None else None
        fn, file, line = lines.get(loc.path, {}).get(max(loc.vaddr - 1, 0), (None, None, None))
        # addr2line names the nearest symbol before an address it has no debug information for
        # (an exported function of a stripped library, far from the code): only with a line
        if not file:
            fn = None
        out[a] = Site(object=loc.path, offset=loc.vaddr, function=fn or (sym.name if sym else None),
                      file=file, line=line)
    return out


@dataclass
class Variable:
    """A data address symbolized: the global or static it lies in, and where in it."""

    object: str | None = None
    name: str | None = None
    offset: int = 0                 # bytes into the variable
    size: int = 0
    file: str | None = None         # the source file of a static


def symbolize_variable(space: AddressSpace, addr: int) -> Variable:
    loc = space.locate(addr)
    if loc is None:
        return Variable()
    elf = read_elf(loc.path)
    sym = elf.variable(loc.vaddr) if elf is not None else None
    if sym is None:
        return Variable(object=loc.path)
    return Variable(object=loc.path, name=demangle(sym.name), offset=loc.vaddr - sym.value, size=sym.size,
                    file=sym.file)


@lru_cache(maxsize=4096)
def demangle(name: str) -> str:
    """A C++ symbol's name as its source wrote it (`_ZL1m`, a static `std::mutex m`, is `m`;
    `_ZN5queue4lockE` is `queue::lock`), through binutils' c++filt; the name as it is where it
    is not mangled or c++filt is missing, fails or times out."""
    if not name.startswith("_Z") or len(name) > 4096:
        return name
    tool = system_program("c++filt")
    if not tool:
        return name
    try:
        p = subprocess.run([tool, "--", name], capture_output=True, text=True, timeout=ADDR2LINE_TIMEOUT_S,
                           errors="replace", env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return name
    out = p.stdout.strip()
    return out if p.returncode == 0 and out and "\n" not in out else name


def short(path: str | None) -> str:
    return Path(path).name if path else ""
