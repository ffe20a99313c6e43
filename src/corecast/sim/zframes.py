"""Compressed trace files: the records in zstd frames (the file format is in `trace`).

A version-2 trace holds, after its header, a sequence of frames, each a 16-byte frame header
(`u32` bytes of the compressed frame, `u32` records in it, 8 bytes zero) and one independent
zstd frame of that many 16-byte records (at most `FRAME_RECORDS`): a reader decompresses a frame
at a time, in order, and never holds more of the trace than one frame. zstd rather than lz4 by
measurement (bench/trace_compress.py, on a captured `sort` of 20,000 lines: zstd at level 3
stores the records 140 times smaller at the same compression speed as lz4's 25 times, and
decompresses at 1.7 ns a record against lz4's 1.0).
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
LEVEL = 3
FRAME_RECORDS = 1 << 20              # 16 MiB of records a frame
#: The most bytes a frame of FRAME_RECORDS records compresses to (zstd's ZSTD_COMPRESSBOUND for
#: inputs of 128 KiB and more): a frame header naming more is damaged, not a buffer to allocate.
MAX_FRAME_BYTES = FRAME_RECORDS * 16 + (FRAME_RECORDS * 16 >> 8)
_FRAME_HEAD = np.dtype([("size", "<u4"), ("records", "<u4"), ("zero", "<u8")])


class FrameWriter:
    """Cuts records into frames and writes each compressed to `fh` as it fills (the records are
    copied once, as 64-bit words, into the frame being filled)."""

    def __init__(self, fh: IO[bytes], level: int = LEVEL):
        self.fh, self.level = fh, level
        self._L = N.lib()
        self._buf = np.empty(2 * FRAME_RECORDS, np.uint64)      # a record is two words
        self._n = 0
        self.frames = 0
        self.stored = 0                  # bytes written (frame headers included)
        self._dst = np.empty(self._L.cc_zstd_bound(FRAME_RECORDS * RECORD_DTYPE.itemsize), np.uint8)

    def write(self, records: np.ndarray) -> None:
        """Take the records (copied: the caller may reuse its array at once)."""
        words = np.ascontiguousarray(records).view(np.uint64)
        while len(words):
            take = min(len(words) // 2, FRAME_RECORDS - self._n)
            self._buf[2 * self._n:2 * (self._n + take)] = words[:2 * take]
            self._n += take
            words = words[2 * take:]
            if self._n == FRAME_RECORDS:
                self._frame()

    def flush(self) -> None:
        if self._n:
            self._frame()

    def _frame(self) -> None:
        nbytes = self._n * RECORD_DTYPE.itemsize
        k = self._L.cc_zstd_compress(self._dst.ctypes.data, len(self._dst), self._buf.ctypes.data, nbytes, self.level)
        if not k:
            raise MemoryError("zstd could not compress a frame of the trace")
        self.fh.write(struct.pack("<IIQ", k, self._n, 0))
        self.fh.write(memoryview(self._dst)[:k])
        self.frames += 1
        self.stored += _FRAME_HEAD.itemsize + k
        self._n = 0


@dataclass
class Frames:
    """The frames of a compressed trace file: where each starts, its size and records."""

    path: str
    offsets: np.ndarray
    sizes: np.ndarray
    counts: np.ndarray

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def chunks(self, size: int) -> Iterator[np.ndarray]:
        """The records, a frame at a time, in slices of at most `size`."""
        L = N.lib()
        buf = np.empty(0, np.uint8)
        try:
            fh = open(self.path, "rb")
        except OSError as err:
            raise UserError(f"{self.path}: cannot read: {err.strerror}") from None
        with fh:
            for off, k, n in zip(self.offsets.tolist(), self.sizes.tolist(), self.counts.tolist()):
                if len(buf) < k:
                    buf = np.empty(k, np.uint8)
                fh.seek(off)
                if fh.readinto(memoryview(buf)[:k]) != k:
                    raise UserError(f"{self.path}: truncated trace (a frame ends past the end of the file)")
                out = np.empty(n, RECORD_DTYPE)
                if L.cc_zstd_decompress(out.ctypes.data, out.nbytes, buf.ctypes.data, k):
                    raise UserError(f"{self.path}: damaged trace (a frame at byte {off:,} does not "
                                    f"decompress to its {n:,} records)")
                for i in range(0, n, size):
                    yield out[i:i + size]

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

