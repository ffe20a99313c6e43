"""Traces: corecast's compact binary format, readers, writers and converters.

File layout (little-endian)::

    offset 0   8 bytes   magic b"CCTRACE1"
    offset 8   uint32    data offset (where records start; a multiple of 16)
    offset 12  uint32    length of the JSON metadata
    offset 16  JSON      metadata (format, version, source, command, threads, has_branches,
                         has_uops, markers, stack range, notes), space-padded
    data offset ...      version 1: records, 16 bytes each, until the end of the file;
                         version 2 (metadata "compression": "zstd"): the records in zstd
                         frames of at most 1 Mi records each, every frame after a 16-byte
                         frame header (its bytes, its records), until the end of the file;
                         version 3 ("compression": "lz4/zstd", what corecast writes): the
                         same, each frame an lz4 block or a zstd frame as its header says
                         (`zframes`); all three are read

A record (`RECORD_DTYPE`): `addr` u64, `aux` u32, `tid` u16, `kind` u8, `size` u8.

| kind | addr | size | aux |
| --- | --- | --- | --- |
| 0 fetch | instruction address | instruction length | - |
| 1 load, 2 store, 3 modify | data address | bytes | - |
| 4 branch | branch address | flags: 1 taken, 2 conditional, 4 indirect, 8 call, 16 return | target - address (int32; 0 if it does not fit) |
| 5 marker | marker id (a transaction starts) | - | - |
| 6 uop | packed: bytes 0-3 source registers, 4-5 destination registers (0xff none), 6 unit (0 alu, 1 load, 2 store, 3 branch, 4 fp), 7 flags (1 first uop of its instruction, 2 placeholder) | - | - |

Branch and uop records of an instruction follow its fetch record; a branch record comes right
before the fetch of the instruction that followed the branch (only then is the outcome known).

Converters: valgrind lackey `--trace-mem=yes` text (parsed natively), Dinero "din" text, and
CSV (`tid,kind,addr,size[,taken,target]`).

Size: under 700 lines, one subject: the record layout and the file format, with the writer,
the readers (memory-mapped, or a compressed frame at a time through `zframes`) and the three
converters into that format, each short; split apart they would each carry the layout again.
"""
from __future__ import annotations

import csv
import ctypes as C
import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO, Any, Iterator, Sequence

import numpy as np

from .. import outputs
from ..errors import UserError, need_regular_file
from ..parsing import json_document
from . import native as N
from .native import RECORD_DTYPE

MAGIC = b"CCTRACE1"
FORMAT = "corecast-trace"
VERSION = 3                 # the newest this corecast reads; it writes 3 (compressed), reads 1 and 2 too
#: What each compressed version's metadata names as its compression.
COMPRESSIONS = {2: "zstd", 3: "lz4/zstd"}
#: The most bytes of JSON metadata a trace header may hold (corecast writes under a kilobyte, a
#: capture a line per loaded object).
MAX_META_BYTES = 16 << 20
HEADER_RESERVE = 4096
KIND_NAMES = ("fetch", "load", "store", "modify", "branch", "marker", "uop")
_KIND_BY_NAME = {n: i for i, n in enumerate(KIND_NAMES)}
_KIND_BY_NAME.update({"i": 0, "l": 1, "s": 2, "m": 3, "b": 4, "ifetch": 0, "read": 1,
                      "write": 2, "instr": 0, "instruction": 0})


@dataclass
class Trace:
    """A trace: records (a numpy array, memory-mapped when read from a file) and metadata."""

    records: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    frames: Any = None       # a compressed file's frames (zframes.Frames): `records` is then
                             # read whole only when asked for; `chunks` reads a frame at a time

    def __getattr__(self, name: str) -> Any:
        if name == "records" and self.__dict__.get("frames") is not None:
            recs = self.frames.read_all()
            self.records = recs
            return recs
        raise AttributeError(name)

    def __len__(self) -> int:
        if self.frames is not None:
            return self.frames.total
        return len(self.records)

    def chunks(self, size: int = 1 << 20, checked: bool = True, reuse: bool = False) -> Iterator[np.ndarray]:
        """The records in slices; a record of no known kind (a damaged file) is a UserError.
        `checked=False` leaves that check to a consumer that reads the kinds anyway (the miss-rate
        passes of corecast.sim.mrc): the check is a pass over the slice, as long as a fast
        consumer's. The pages of a memory-mapped slice are mapped in one call before it is handed
        over; a compressed file is decompressed a frame at a time (and its kinds checked then;
        `reuse`: every frame into the same array, so that a slice is valid until the next is
        asked for)."""
        framed = self.frames is not None and "records" not in self.__dict__
        if framed:
            parts: Iterator[tuple[np.ndarray, bool]] = self.frames.chunks(size, reuse)
        else:
            parts = ((self.records[i:i + size], False) for i in range(0, len(self.records), size))
        mapped = self.frames is None and isinstance(self.records, np.memmap)
        i = 0
        for part, known in parts:
            if mapped:
                _prefault(part)
            if checked and len(part) and not known and \
                    int(part["kind"].max()) >= len(KIND_NAMES):
                bad = int(np.argmax(part["kind"] >= len(KIND_NAMES)))
                raise UserError(f"{self.path or 'trace'}: record {i + bad}: kind {int(part['kind'][bad])} "
                                "is not a record kind (a damaged or foreign file)")
            i += len(part)
            yield part

    @property
    def instructions(self) -> int:
        return sum(int(np.count_nonzero(c["kind"] == N.KIND_FETCH)) for c in self.chunks(1 << 22, checked=False))

    def summary(self) -> dict[str, Any]:
        kinds = np.zeros(256, np.int64)
        tids = np.zeros(1 << 16, np.int64)
        for c in self.chunks(1 << 22, checked=False):
            kinds += np.bincount(c["kind"], minlength=256)
            tids += np.bincount(c["tid"], minlength=1 << 16)
        return {"records": len(self),
                **{KIND_NAMES[i]: int(kinds[i]) for i in range(len(KIND_NAMES))},
                "threads": int(np.count_nonzero(tids))}


def wrapping_access(records: np.ndarray, first: int = 0) -> str | None:
    """The first fetch, load, store or modify of `records` whose last byte passes 2^64 - 1 (it
    would wrap to address 0), said in a line ("record N: a load of 8 bytes at 0x... passes the
    top of the address space"), or None. No program makes one: the simulator refuses it rather
    than count it clamped, as within one line."""
    near = np.flatnonzero((records["addr"] > np.uint64((1 << 64) - 256)) & (records["kind"] <= N.KIND_MODIFY))
    for j in near:
        addr, size = int(records["addr"][j]), max(1, int(records["size"][j]))
        if addr + size - 1 >= 1 << 64:
            return (f"record {first + int(j)}: a {KIND_NAMES[int(records['kind'][j])]} of {size} bytes at "
                    f"{addr:#x} passes the top of the address space (its last byte would wrap to address 0)")
    return None


def make_records(n: int) -> np.ndarray:
    return np.zeros(n, dtype=RECORD_DTYPE)


# ----------------------------------------------------------------------------------------
# binary files

class TraceWriter:
    """Write a trace file incrementally: `w.write(records)`, then `w.close(meta)`.

    The file is written through corecast.outputs: the records go to a temporary file beside it
    (made with O_EXCL|O_NOFOLLOW; for a device or a pipe, an unnamed one), and `close` writes the
    header and renames it into place (or copies it to the device), so a trace file is whole or
    absent (a full disk or a crash leaves no half file under the name) and names it on standard
    error (`what`, or a count of the records). `abort` (or leaving a `with` block by an
    exception) removes the temporary file.

    The records are written compressed (version 3, lz4 or zstd frames: `zframes`; `version=2`
    writes zstd frames only, the format corecast wrote before, readable by a corecast that
    reads no version 3), unless `compress` is False (version 1, 16 bytes a record as they are:
    a temporary trace another pass reads at once).

    `census=False`: the writer does not count the kinds and threads of what it writes; the caller
    knows them and says so with `counted` before `close` (a QEMU capture without decoding: its
    records are the plugin's fetches and data accesses, whose instructions and threads the ring
    counts; the census was 0.65 ns of the 3.3 a record that writing the trace costs)."""

    def __init__(self, path: str | Path, meta: dict[str, Any] | None = None, *, what: str | None = None,
                 announce: bool = True, compress: bool = True, version: int = 3, census: bool = True):
        from . import zframes
        if compress and version not in COMPRESSIONS:
            raise ValueError(f"trace version {version}: corecast writes {sorted(COMPRESSIONS)} compressed")
        self.path = Path(path)
        self.meta = dict(meta or {})
        self.what = what
        self.count = 0
        self.kinds = np.zeros(len(KIND_NAMES), dtype=np.int64)
        self._kinds = np.zeros(256, dtype=np.uint64)          # the native census: every kind byte,
        self._tids = np.zeros(1 << 16, dtype=np.uint8)        # and which thread ids occur
        self._census = census
        self._threads: int | None = None                      # census=False: as `counted` says
        self._out = outputs.Output(path, binary=True, seekable=True, announce=announce)
        self._fh: Any = self._out.open()
        self._fh.write(b"\0" * HEADER_RESERVE)
        self.version = version if compress else 1
        # a compressed trace's census is taken by the frame writer, as it compresses (zframes)
        self._frames = zframes.FrameWriter(self._fh, version=version,
                                           census=(self._kinds, self._tids) if census else None,
                                           **({"level": 3} if version == 2 else {})) if compress else None

    @property
    def tids(self) -> set[int]:
        """The threads of the records written."""
        return set(np.flatnonzero(self._tids).tolist())

    def write(self, records: np.ndarray) -> None:
        if self._fh is None:
            raise ValueError("writer closed")
        records = N.as_records(records)
        if not len(records):
            return
        try:
            if self._frames is not None:
                self._frames.write(records)
            else:
                self._fh.write(records.tobytes())
        except UserError:
            self._fh = None
            raise
        self.count += len(records)
        if not self._census:
            return
        if self._frames is None:
            N.lib().cc_trace_census(records.ctypes.data, len(records), self._kinds.ctypes.data, self._tids.ctypes.data)
        self.kinds = self._kinds[:len(KIND_NAMES)].astype(np.int64)

    def counted(self, instructions: int, threads: int, branches: int = 0, uops: int = 0) -> None:
        """A writer made with `census=False`: what its census would have found in the records
        written (the fetches, the threads, and the branch and uop records)."""
        self.kinds[N.KIND_FETCH], self.kinds[N.KIND_BRANCH], self.kinds[N.KIND_UOP] = instructions, branches, uops
        self._threads = threads

    def close(self, meta: dict[str, Any] | None = None, what: str | None = None) -> Path:
        if self._fh is None:
            return self.path
        if meta:
            self.meta.update(meta)
        if self._frames is not None:
            try:
                self._frames.flush()
            except UserError:
                self._fh = None
                raise
            finally:
                self._frames.close()
        m = _standard_meta(self.meta, self.version)
        m.setdefault("threads", len(self.tids) if self._census else (self._threads or 0))
        m["has_branches"] = bool(self.kinds[N.KIND_BRANCH])
        m["has_uops"] = bool(self.kinds[N.KIND_UOP])
        m["records"] = self.count
        header = _header(m, HEADER_RESERVE)
        fh, self._fh = self._fh, None
        if header is None:  # metadata too large for the reserved space: move the records up
            fh.seek(HEADER_RESERVE)
            data = fh.read()
            header = _header(m, None)
            assert header is not None
            fh.seek(0)
            fh.write(header)
            fh.write(data)
            fh.truncate()
        else:
            fh.seek(0)
            fh.write(header)
        self._out.what = what or self.what or f"{self.count:,} records"
        self._out.commit()
        return self.path

    def abort(self) -> None:
        """Give the file up: nothing is left under its name or beside it."""
        self._fh = None
        if self._frames is not None:
            self._frames.close()
        self._out.abort()

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is not None and not issubclass(exc_type, KeyboardInterrupt):
            self.abort()
        else:
            self.close()


def _standard_meta(meta: dict[str, Any], version: int = 1) -> dict[str, Any]:
    m: dict[str, Any] = {"format": FORMAT, "version": version}
    if version in COMPRESSIONS:
        m["compression"] = COMPRESSIONS[version]
    m.update({k: v for k, v in meta.items() if k not in ("format", "version", "compression")})
    return m


def _header(meta: dict[str, Any], size: int | None) -> bytes | None:
    blob = json.dumps(meta, sort_keys=True, default=str).encode()
    need = 16 + len(blob)
    if size is None:
        size = max(HEADER_RESERVE, (need + 15) // 16 * 16)
    if need > size:
        return None
    head = MAGIC + np.uint32(size).tobytes() + np.uint32(len(blob)).tobytes() + blob
    return head + b" " * (size - len(head))


def write_trace(path: str | Path, trace: Trace, what: str | None = None, compress: bool = True,
                version: int = 3) -> Path:
    """Write a whole trace to `path`, compressed (`version` 3, or 2) unless `compress` is False
    (version 1: the records as they are), through corecast.outputs, which names it."""
    with TraceWriter(path, dict(trace.meta), what=what or f"{len(trace):,} records", compress=compress,
                     version=version) as w:
        for part in trace.chunks(1 << 20, checked=False):
            w.write(part)
    return Path(path)


def is_trace_file(path: str | Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(8) == MAGIC
    except OSError:
        return False


_MADV_POPULATE_READ = 22      # Linux 5.14: map a range's pages now, in one call


@lru_cache(maxsize=1)
def _libc() -> Any:
    libc = C.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [C.c_void_p, C.c_size_t, C.c_int]
    return libc


def _prefault(part: np.ndarray) -> None:
    """Maps the pages of a slice of a memory-mapped trace in one call (taking a page fault for
    each of them costs about as much as a fast pass over the records); ignored where the kernel
    does not know the call."""
    if not len(part):
        return
    start = part.ctypes.data & ~4095
    _libc().madvise(start, part.ctypes.data + part.nbytes - start, _MADV_POPULATE_READ)


#: Why a trace must be a regular file.
_IN_PLACE = "a trace is read in place, and text traces twice"


def read_trace(path: str | Path) -> Trace:
    """Open a corecast trace file (records memory-mapped)."""
    path = Path(path)
    need_regular_file(path, "trace file", _IN_PLACE)
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(16)
            if len(head) < 16 or head[:8] != MAGIC:
                raise UserError(f"{path}: not a corecast trace (no CCTRACE1 header); convert "
                                "lackey, din or CSV text with `corecast sim convert`")
            offset = int(np.frombuffer(head, "<u4", 1, 8)[0])
            jlen = int(np.frombuffer(head, "<u4", 1, 12)[0])
            if offset < 16 + jlen or offset % 16 or offset > size or jlen > MAX_META_BYTES:
                raise UserError(f"{path}: damaged trace header")
            blob = fh.read(jlen)
    except OSError as err:
        raise UserError(f"{path}: cannot read: {err.strerror}") from None
    try:
        meta = json_document(blob, f"{path}: trace metadata")
    except ValueError:
        raise UserError(f"{path}: damaged trace metadata") from None
    if not isinstance(meta, dict):
        raise UserError(f"{path}: damaged trace metadata (not a JSON object)")
    version = meta.get("version", 1)
    if meta.get("format") != FORMAT or isinstance(version, bool) or not isinstance(version, int) \
            or not 1 <= version <= VERSION:
        raise UserError(f"{path}: trace format {str(meta.get('format'))[:40]} version "
                        f"{str(meta.get('version'))[:40]} is not one this corecast reads")
    if meta.get("compression") is not None or version >= 2:
        if COMPRESSIONS.get(version) != meta.get("compression"):
            raise UserError(f"{path}: trace compression {meta.get('compression')!r} is not one this corecast reads "
                            f"in a version-{version} trace")
        from . import zframes
        t = Trace(np.zeros(0, dtype=RECORD_DTYPE), meta, str(path), zframes.index(str(path), offset, size,
                                                                                 meta.get("records"), version))
        del t.records                     # read whole only when asked for (Trace.__getattr__)
        return t
    nbytes = size - offset
    if nbytes % RECORD_DTYPE.itemsize:
        raise UserError(f"{path}: truncated trace ({nbytes % RECORD_DTYPE.itemsize} stray bytes "
                        "at the end)")
    n = nbytes // RECORD_DTYPE.itemsize
    promised = meta.get("records")
    if isinstance(promised, int) and promised != n:
        raise UserError(f"{path}: the header promises {promised:,} records but the file holds {n:,} "
                        f"({'truncated' if n < promised else 'extra data after them'})")
    if n == 0:
        recs = np.zeros(0, dtype=RECORD_DTYPE)
    else:
        recs = np.memmap(path, dtype=RECORD_DTYPE, mode="r", offset=offset, shape=(n,))
    return Trace(recs, meta, str(path))


# ----------------------------------------------------------------------------------------
# lackey text

@dataclass
class LackeyStats:
    lines: int = 0
    trace_lines: int = 0
    bad_lines: int = 0
    first_bad_line: int = 0
    messages: list[str] = field(default_factory=list)
    threads: int = 1


class LackeyParser:
    """Incremental parser of lackey text: feed bytes, get record arrays.

    `markers`: instruction addresses whose execution starts a transaction (a marker record
    is put before their fetch). Thread switches come from `--trace-sched=yes` lines."""

    def __init__(self, markers: Sequence[int] = (), keep_messages: int = 4 << 20):
        self._L = N.lib()
        self.st = N.LackeyState()
        self._markers = np.array(sorted(set(int(m) for m in markers)), dtype=np.uint64)
        if len(self._markers):
            self.st.markers = self._markers.ctypes.data_as(C.POINTER(C.c_uint64))
            self.st.nmarkers = len(self._markers)
        self._msg = C.create_string_buffer(keep_messages)
        self.st.msg = C.cast(self._msg, C.c_char_p)
        self.st.msg_cap = keep_messages
        self._rest = b""

    def feed(self, data: bytes, final: bool = False) -> np.ndarray:
        buf = self._rest + data if self._rest else data
        raw = np.frombuffer(buf, dtype=np.uint8) if buf else np.zeros(1, np.uint8)
        out_parts = []
        pos = 0
        nout = C.c_size_t()
        while True:
            remaining = len(buf) - pos
            # a trace line is at least 7 bytes ("I  0,1\n") and may bring a marker record
            cap = remaining // 3 + 16
            out = np.empty(cap, dtype=RECORD_DTYPE)
            used = self._L.cc_lackey_parse(C.byref(self.st), C.c_void_p(raw.ctypes.data + pos),
                                           remaining, 1 if final else 0, out.ctypes.data, cap,
                                           C.byref(nout))
            if nout.value:
                out_parts.append(out[:nout.value])
            pos += used
            if used == 0 or pos >= len(buf) or nout.value + 2 <= cap:
                break
        self._rest = buf[pos:]
        if not out_parts:
            return np.zeros(0, dtype=RECORD_DTYPE)
        return out_parts[0] if len(out_parts) == 1 else np.concatenate(out_parts)

    def stats(self) -> LackeyStats:
        text = self._msg.raw[:self.st.msg_len].decode("utf-8", "replace")
        return LackeyStats(lines=self.st.lines, trace_lines=self.st.trace_lines,
                           bad_lines=self.st.bad_lines, first_bad_line=self.st.first_bad_line,
                           messages=text.splitlines(), threads=self.st.max_tid + 1)


def convert_lackey(src: str | Path | IO[bytes], out: str | Path, *,
                   markers: Sequence[int] = (), meta: dict[str, Any] | None = None,
                   chunk_bytes: int = 16 << 20, what: str | None = None) -> tuple[Path, LackeyStats]:
    """Convert lackey text (a file path or binary stream) into a trace file."""
    parser = LackeyParser(markers)
    name = str(src) if isinstance(src, (str, Path)) else getattr(src, "name", "<stream>")
    fh: IO[bytes]
    own = isinstance(src, (str, Path))
    try:
        fh = open(src, "rb") if own else src  # type: ignore[arg-type]
    except OSError as err:
        raise UserError(f"{src}: cannot read: {err.strerror}") from None
    try:
        w = TraceWriter(out, meta, what=what)
        try:
            while True:
                data = fh.read(chunk_bytes)
                if not data:
                    w.write(parser.feed(b"", final=True))
                    break
                w.write(parser.feed(data))
        except BaseException:
            w.abort()
            raise
    finally:
        if own:
            fh.close()
    st = parser.stats()
    if st.trace_lines == 0:
        w.abort()
        raise UserError(f"{name}: no lackey trace lines found ({st.lines} lines read; expected "
                        "lines like 'I  04016b0,3' from valgrind --tool=lackey --trace-mem=yes)")
    info = {"source": "lackey", "lackey_lines": st.lines, "bad_lines": st.bad_lines,
            "markers": [hex(m) for m in sorted(set(markers))]}
    if st.threads > 1:
        info["threads"] = st.threads
    w.close({**info, **(meta or {})})
    return Path(out), st


def parse_lackey_text(text: str | bytes, markers: Sequence[int] = ()) -> np.ndarray:
    """Parse a whole lackey text (for small inputs and tests)."""
    p = LackeyParser(markers)
    data = text.encode() if isinstance(text, str) else text
    return p.feed(data, final=True)


# ----------------------------------------------------------------------------------------
# other text formats

def _open_text(path: str | Path) -> IO[str]:
    try:
        return open(path, "r", encoding="utf-8", errors="replace")
    except OSError as err:
        raise UserError(f"{path}: cannot read: {err.strerror}") from None


def read_din(path: str | Path, default_size: int = 4) -> np.ndarray:
    """Dinero III/IV "din" text: `label address [size]` per line; label 0 read, 1 write,
    2 instruction fetch (3 escape and 4 flush lines are skipped)."""
    kinds = {0: N.KIND_LOAD, 1: N.KIND_STORE, 2: N.KIND_FETCH}
    addrs: list[int] = []
    ks: list[int] = []
    sizes: list[int] = []
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            try:
                label = int(parts[0])
                addr = int(parts[1], 16)
                size = int(parts[2]) if len(parts) > 2 else default_size
            except (ValueError, IndexError):
                raise UserError(f"{path}:{lineno}: not a din line (label hex-address [size]): "
                                f"{line.strip()[:60]!r}") from None
            if label in (3, 4):
                continue
            if label not in kinds:
                raise UserError(f"{path}:{lineno}: unknown din label {label} (0 read, 1 write, "
                                "2 fetch)")
            if not 0 < size < 256:
                raise UserError(f"{path}:{lineno}: size {size} out of range 1..255")
            addrs.append(addr)
            ks.append(kinds[label])
            sizes.append(size)
    recs = make_records(len(addrs))
    recs["addr"] = np.array(addrs, dtype=np.uint64)
    recs["kind"] = ks
    recs["size"] = sizes
    return recs


def read_csv(path: str | Path) -> np.ndarray:
    """CSV with a header naming `kind,addr` and optionally `tid,size,taken,target`. `kind` is
    fetch, load, store, modify, branch or marker; addresses may be decimal or 0x-hex."""
    rows_addr: list[int] = []
    rows = []
    with _open_text(path) as fh:
        reader = csv.DictReader(line for line in fh if not line.startswith("#"))
        fields_ = reader.fieldnames or []
        for need in ("kind", "addr"):
            if need not in fields_:
                raise UserError(f"{path}: column '{need}' missing (header: "
                                f"{', '.join(fields_) or 'none'})")
        for i, row in enumerate(reader, 2):
            try:
                kind = _KIND_BY_NAME[row["kind"].strip().lower()]
            except KeyError:
                raise UserError(f"{path}:{i}: column 'kind': unknown kind {row['kind']!r}") from None
            try:
                addr = int(row["addr"], 0)
                tid = int(row.get("tid") or 0)
                size = int(row.get("size") or (4 if kind != N.KIND_MARKER else 0))
                taken = int(row.get("taken") or 0)
                target = int(row.get("target") or "0", 0)
            except ValueError as err:
                raise UserError(f"{path}:{i}: {err}") from None
            if not 0 <= size < 256:
                raise UserError(f"{path}:{i}: column 'size': {size} out of range 0..255")
            aux = 0
            if kind == N.KIND_BRANCH:
                flags = N.BR_COND | (N.BR_TAKEN if taken else 0)
                size = flags
                d = target - addr if target else 0
                aux = d & 0xFFFFFFFF if -2**31 <= d < 2**31 else 0
            rows_addr.append(addr)
            rows.append((aux, tid, kind, size))
    recs = make_records(len(rows))
    if rows:
        recs["addr"] = np.array(rows_addr, dtype=np.uint64)
        arr = np.array(rows, dtype=np.int64)
        recs["aux"] = arr[:, 0]
        recs["tid"] = arr[:, 1]
        recs["kind"] = arr[:, 2]
        recs["size"] = arr[:, 3]
    return recs


def write_csv(records: np.ndarray, out: IO[str] | str | Path, limit: int | None = None, what: str = "") -> None:
    """Write records as CSV (`tid,kind,addr,size,taken,target`; uops as packed hex); a path is
    written through corecast.outputs."""
    if isinstance(out, (str, Path)):
        with outputs.writing(out, what=what or f"{len(records):,} records as CSV") as fh:
            write_csv(records, fh, limit)
        return
    out.write("tid,kind,addr,size,taken,target\n")
    recs = records if limit is None else records[:limit]
    for r in recs:
        kind = int(r["kind"])
        name = KIND_NAMES[kind] if kind < len(KIND_NAMES) else str(kind)
        addr = int(r["addr"])
        if kind == N.KIND_BRANCH:
            d = int(np.int32(np.uint32(r["aux"])))
            taken = 1 if int(r["size"]) & N.BR_TAKEN else 0
            tgt = hex(addr + d) if int(r["aux"]) else ""
            out.write(f"{int(r['tid'])},{name},{hex(addr)},0,{taken},{tgt}\n")
        else:
            out.write(f"{int(r['tid'])},{name},{hex(addr)},{int(r['size'])},,\n")


def convert(src: str | Path, out: str | Path, fmt: str = "auto", *,
            markers: Sequence[int] = ()) -> tuple[Path, dict[str, Any]]:
    """Convert a text trace (lackey, din, csv) into a corecast trace file."""
    src = Path(src)
    need_regular_file(src, "file", _IN_PLACE)
    outputs.check(out)
    if fmt == "auto":
        fmt = _guess_format(src)
    if fmt == "lackey":
        path, st = convert_lackey(src, out, markers=markers,
                                  meta={"converted_from": str(src)}, what="from lackey text")
        info: dict[str, Any] = {"format": "lackey", "lines": st.lines,
                                "trace_lines": st.trace_lines, "bad_lines": st.bad_lines,
                                "first_bad_line": st.first_bad_line, "threads": st.threads}
        return path, info
    if fmt == "din":
        recs = read_din(src)
    elif fmt == "csv":
        recs = read_csv(src)
    else:
        raise UserError(f"unknown trace format '{fmt}' (lackey, din, csv)")
    if len(markers):
        raise UserError("--marker works with lackey text only; put marker rows in the CSV")
    write_trace(out, Trace(recs, {"source": fmt, "converted_from": str(src)}), what=f"from {fmt} text")
    return Path(out), {"format": fmt, "records": int(len(recs))}


def _guess_format(path: Path) -> str:
    with open(path, "rb") as fh:
        head = fh.read(4096).decode("utf-8", "replace")
    lines = [ln for ln in head.splitlines() if ln.strip()]
    if any(ln.startswith(("I  ", " L ", " S ", " M ", "==", "--")) for ln in lines[:20]):
        return "lackey"
    if lines and "kind" in lines[0] and "," in lines[0]:
        return "csv"
    if lines and all(ln.split()[0] in ("0", "1", "2", "3", "4") for ln in lines[:20]
                     if not ln.startswith("#")):
        return "din"
    raise UserError(f"{path}: cannot tell the trace format; give --from lackey|din|csv")


def load(path: str | Path) -> Trace:
    """A trace from a corecast trace file, or converted in memory from lackey/din/csv text."""
    path = Path(path)
    need_regular_file(path, "trace file", _IN_PLACE)
    if not os.access(path, os.R_OK):
        raise UserError(f"{path}: permission denied")
    if is_trace_file(path):
        return read_trace(path)
    fmt = _guess_format(path)
    if fmt == "lackey":
        with open(path, "rb") as fh:
            p = LackeyParser()
            parts = []
            while True:
                data = fh.read(16 << 20)
                if not data:
                    parts.append(p.feed(b"", final=True))
                    break
                parts.append(p.feed(data))
        recs = np.concatenate(parts) if parts else make_records(0)
        return Trace(recs, {"source": "lackey", "threads": p.stats().threads}, str(path))
    recs = read_din(path) if fmt == "din" else read_csv(path)
    return Trace(recs, {"source": fmt}, str(path))
