"""Compressed trace files: the records in zstd frames (the file format is in `trace`).

A version-2 trace holds, after its header, a sequence of frames, each a 16-byte frame header
(`u32` bytes of the compressed frame, `u32` records in it, 8 bytes zero) and one independent
zstd frame of that many 16-byte records (at most `FRAME_RECORDS`): a reader decompresses a frame
at a time, in order, and never holds more of the trace than one frame. zstd rather than lz4 by
measurement (bench/trace_compress.py, on a captured `sort` of 20,000 lines: zstd at level 3
stores the records 140 times smaller at the same compression speed as lz4's 25 times, and
decompresses at 1.7 ns a record against lz4's 1.0).

corecast writes frames of `WRITE_RECORDS` (128 Ki records, 2 MiB) at zstd level 1, by
measurement (bench/trace_compress.py): a frame that fits in a core's cache is compressed as it
is filled and read back while the simulator takes it (written and read back in 0.7 of the time
of frames of 1 Mi records at level 3, on a captured `sort`, 67 times smaller instead of 78).
Negative levels are faster still on such a trace (-1: 61 times smaller, a tenth less time) but
keep a plain stream of addresses only 3 times smaller, where level 1 keeps it 7 times smaller.
Readers take frames of any size up to `FRAME_RECORDS`, so traces written before (1 Mi records,
level 3) read the same, and these read in a corecast that wrote those.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import IO, Any, Iterator

import numpy as np

from ..errors import UserError
from . import native as N
from .native import RECORD_DTYPE

COMPRESSION = "zstd"
LEVEL = 1
FRAME_RECORDS = 1 << 20              # the most records a frame may hold (16 MiB)
WRITE_RECORDS = 1 << 17              # the records of a frame corecast writes (2 MiB)
#: The most bytes a frame of FRAME_RECORDS records compresses to (zstd's ZSTD_COMPRESSBOUND for
#: inputs of 128 KiB and more): a frame header naming more is damaged, not a buffer to allocate.
MAX_FRAME_BYTES = FRAME_RECORDS * 16 + (FRAME_RECORDS * 16 >> 8)
_FRAME_HEAD = np.dtype([("size", "<u4"), ("records", "<u4"), ("zero", "<u8")])


class FrameWriter:
    """Cuts records into frames of `records` and writes each compressed to `fh` as it fills: a
    whole frame's worth of the records given is compressed where it lies, the rest is copied
    into the frame being filled."""

    def __init__(self, fh: IO[bytes], level: int = LEVEL, records: int = WRITE_RECORDS):
        if not 0 < records <= FRAME_RECORDS:
            raise ValueError(f"a frame holds 1 to {FRAME_RECORDS} records, not {records}")
        self.fh, self.level, self.per_frame = fh, level, records
        self._L = N.lib()
        self._buf = np.empty(records, RECORD_DTYPE)
        self._words = self._buf.view(np.uint64)
        self._n = 0
        self.frames = 0
        self.stored = 0                  # bytes written (frame headers included)
        self._dst = np.empty(self._L.cc_zstd_bound(records * RECORD_DTYPE.itemsize), np.uint8)
        self._ctx = self._L.cc_zc_new(level)
        if not self._ctx:
            raise MemoryError("zstd compression context")

    def write(self, records: np.ndarray) -> None:
        """Take the records (the caller may reuse its array at once)."""
        recs = np.ascontiguousarray(records)
        per = self.per_frame
        while len(recs):
            if self._n == 0 and len(recs) >= per:
                self._frame(recs[:per])
                recs = recs[per:]
                continue
            take = min(len(recs), per - self._n)
            # as 64-bit words: numpy copies a record array field by field, several times slower
            self._words[2 * self._n:2 * (self._n + take)] = recs[:take].view(np.uint64)
            self._n += take
            recs = recs[take:]
            if self._n == per:
                self._frame(self._buf)

    def flush(self) -> None:
        if self._n:
            self._frame(self._buf[:self._n])

    def _frame(self, recs: np.ndarray) -> None:
        k = self._L.cc_zc_compress(self._ctx, self._dst.ctypes.data, len(self._dst), recs.ctypes.data, recs.nbytes)
        if not k:
            raise MemoryError("zstd could not compress a frame of the trace")
        self.fh.write(struct.pack("<IIQ", k, len(recs), 0))
        self.fh.write(memoryview(self._dst)[:k])
        self.frames += 1
        self.stored += _FRAME_HEAD.itemsize + k
        self._n = 0

    def close(self) -> None:
        ctx, self._ctx = getattr(self, "_ctx", None), None
        if ctx:
            self._L.cc_zc_free(ctx)

    def __del__(self) -> None:
        self.close()


@dataclass
class Frames:
    """The frames of a compressed trace file: where each starts, its size and records."""

    path: str
    offsets: np.ndarray
    sizes: np.ndarray
    counts: np.ndarray
    #: After each slice of `chunks`: whether its frame was checked to hold only known kinds
    #: (the check is made as the frame is decompressed, while it is in the cache).
    kinds_known: bool = False

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def chunks(self, size: int, reuse: bool = False) -> Iterator[np.ndarray]:
        """The records, a frame at a time, in slices of at most `size`; `reuse`: every frame
        into the same array (a slice is valid until the next is asked for)."""
        L = N.lib()
        buf = np.empty(0, np.uint8)
        keep = np.empty(0, RECORD_DTYPE)
        try:
            fh = open(self.path, "rb")
        except OSError as err:
            raise UserError(f"{self.path}: cannot read: {err.strerror}") from None
        ctx = L.cc_zd_new()
        if not ctx:
            fh.close()
            raise MemoryError("zstd decompression context")
        try:
            with fh:
                for off, k, n in zip(self.offsets.tolist(), self.sizes.tolist(), self.counts.tolist()):
                    if len(buf) < k:
                        buf = np.empty(k, np.uint8)
                    fh.seek(off)
                    if fh.readinto(memoryview(buf)[:k]) != k:
                        raise UserError(f"{self.path}: truncated trace (a frame ends past the end of the file)")
                    if reuse and len(keep) < n:
                        keep = np.empty(n, RECORD_DTYPE)
                    out = keep[:n] if reuse else np.empty(n, RECORD_DTYPE)
                    got = L.cc_zd_records(ctx, out.ctypes.data, n, buf.ctypes.data, k)
                    if got == -1:
                        raise UserError(f"{self.path}: damaged trace (a frame at byte {off:,} does not "
                                        f"decompress to its {n:,} records)")
                    self.kinds_known = got == 0
                    for i in range(0, n, size):
                        yield out[i:i + size]
        finally:
            L.cc_zd_free(ctx)

    def read_all(self) -> np.ndarray:
        parts = list(self.chunks(FRAME_RECORDS))
        return np.concatenate(parts) if parts else np.zeros(0, RECORD_DTYPE)


def index(path: str, offset: int, size: int, promised: Any) -> Frames:
    """Walk the frame headers of a compressed trace (`offset`: where the first one is; `size`:
    the file's size), checking that they tile the file and hold the records the header
    promises."""
    offs, sizes, counts = [], [], []
    pos = offset
    try:
        with open(path, "rb") as fh:
            while pos < size:
                fh.seek(pos)
                raw = fh.read(_FRAME_HEAD.itemsize)
                if len(raw) < _FRAME_HEAD.itemsize:
                    raise UserError(f"{path}: truncated trace (a frame header is cut off at byte {pos:,})")
                h = np.frombuffer(raw, _FRAME_HEAD)[0]
                k, n = int(h["size"]), int(h["records"])
                if k == 0 or n == 0 or n > FRAME_RECORDS or k > MAX_FRAME_BYTES or int(h["zero"]) != 0:
                    raise UserError(f"{path}: damaged trace (a bad frame header at byte {pos:,})")
                pos += _FRAME_HEAD.itemsize
                if pos + k > size:
                    raise UserError(f"{path}: truncated trace (the frame at byte {pos - 16:,} ends past the end "
                                    "of the file)")
                offs.append(pos)
                sizes.append(k)
                counts.append(n)
                pos += k
    except OSError as err:
        raise UserError(f"{path}: cannot read: {err.strerror}") from None
    fr = Frames(path, np.array(offs, np.int64), np.array(sizes, np.int64), np.array(counts, np.int64))
    if isinstance(promised, int) and promised != fr.total:
        raise UserError(f"{path}: the header promises {promised:,} records but the file holds {fr.total:,} "
                        f"({'truncated' if fr.total < promised else 'extra data after them'})")
    return fr

