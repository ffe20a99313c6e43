"""Compressed trace files: the records in lz4 or zstd frames (the file format is in `trace`).

A compressed trace holds, after its header, a sequence of frames, each a 16-byte frame header
and one independently compressed block of that many 16-byte records (at most `FRAME_RECORDS`):
a reader decompresses a frame at a time, in order, and never holds more of the trace than one
frame.

- Version 3 (metadata "compression": "lz4/zstd", what corecast writes): the frame header is
  `u32` bytes of the block, `u32` records, `u32` codec (1: an lz4 block, 2: a zstd frame),
  `u32` zero. The writer compresses a frame with lz4; where lz4 stores it less than
  `LZ4_ENOUGH` times smaller, it compresses it with zstd (level `LEVEL`) too and keeps the
  smaller.
- Version 2 ("compression": "zstd"; read, and written when asked for): the frame header is
  `u32` bytes of the zstd frame, `u32` records, 8 bytes zero.

Why (bench/trace_compress.py, `sort` of 20,000 shuffled lines captured through QEMU, frames of
128 Ki records, CPU time on the 2-vCPU VM): compressing a frame and decompressing it costs, a
record, without decoding (the capture `bench/sim_online.py` compares with cachegrind) 3.5 ns
with lz4 (26 times smaller) against 4.8 with zstd -1 (57), 5.5 with zstd 1 (62) and 5.4 with
zstd 3, version 2's level (71); with decoding (branch and uop records), 4.1 ns with lz4 (23
times smaller) against 4.2, 4.8 and 4.6 (76, 81 and 96 times). That time is what `sim capture`
then `sim TRACE` adds to simulating as the program runs (issue 28: within 5 times cachegrind's
time), and 23 times smaller is well past the issue's 5; the price is files 3-4 times larger
than version 2's. But lz4 stores a plain stream of rising addresses only 2.6 times smaller,
zstd -1 3.1 times and zstd 1 7.2 times: hence zstd level 1 for the frames lz4 does poorly on.
Frames of `WRITE_RECORDS` (128 Ki records, 2 MiB): no slower than frames of 1 Mi records, to
compress and decompress or end to end, and a reader holds 2 MiB of records rather than 16.
Readers take frames of any size up to `FRAME_RECORDS`, so traces written before (version 2: 1
Mi records a frame, zstd level 3) read the same.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import IO, Any, Iterator

import numpy as np

from ..errors import UserError
from . import native as N
from .native import RECORD_DTYPE

COMPRESSION = "lz4/zstd"             # version 3's; version 2's is "zstd"
LZ4, ZSTD = 1, 2                     # a version-3 frame's codec
LZ4_ENOUGH = 8                       # below this ratio, zstd is tried for the frame too
LEVEL = 1                            # zstd's
FRAME_RECORDS = 1 << 20              # the most records a frame may hold (16 MiB)
WRITE_RECORDS = 1 << 17              # the most records of a frame corecast writes (2 MiB)
#: A write of at least this many records, with no frame being filled, is compressed where it
#: lies (in frames of at most WRITE_RECORDS); only smaller writes are gathered into a frame.
IN_PLACE_RECORDS = 1 << 14
#: The most bytes a frame of FRAME_RECORDS records compresses to (lz4's LZ4_COMPRESSBOUND, over
#: zstd's ZSTD_COMPRESSBOUND): a frame header naming more is damaged, not a buffer to allocate.
MAX_FRAME_BYTES = FRAME_RECORDS * 16 + FRAME_RECORDS * 16 // 255 + 16
_FRAME_HEAD = np.dtype([("size", "<u4"), ("records", "<u4"), ("codec", "<u4"), ("zero", "<u4")])


class FrameWriter:
    """Cuts records into frames of at most `records` and writes each compressed to `fh` (`version`
    3, or 2: zstd only, at `level`): the records of a write of at least `in_place` (a slice of
    the ring, in a capture) are compressed where they lie, in frames of `records` and one of
    what is left; smaller writes are copied into a frame until it is full."""

    def __init__(self, fh: IO[bytes], level: int = LEVEL, records: int = WRITE_RECORDS, version: int = 3,
                 in_place: int = IN_PLACE_RECORDS, census: tuple[np.ndarray, np.ndarray] | None = None):
        """`census`: the arrays of `cc_trace_census` (256 u64 kind counts, 65,536 u8 thread
        marks), kept for every record taken, by the time `write` returns: as a frame compressed
        in place is compressed (one C call: the compressor finds the records in the cache), and
        as a small write is copied into the frame being filled."""
        if not 0 < records <= FRAME_RECORDS:
            raise ValueError(f"a frame holds 1 to {FRAME_RECORDS} records, not {records}")
        self.fh, self.level, self.per_frame, self.version = fh, level, records, version
        self.in_place = min(records, in_place)
        self._L = N.lib()
        self._buf = np.empty(records, RECORD_DTYPE)
        self._words = self._buf.view(np.uint64)
        self._n = 0
        self.frames = 0
        self.stored = 0                  # bytes written (frame headers included)
        self.zstd_frames = 0             # version 3: frames zstd stored
        nbytes = records * RECORD_DTYPE.itemsize
        self._dst = np.empty(self._L.cc_zstd_bound(nbytes), np.uint8)
        self._lz = np.empty(self._L.cc_lz4_bound(nbytes), np.uint8) if version == 3 else None
        self._census = census
        self._ctx = self._L.cc_zc_new(level)
        if not self._ctx:
            raise MemoryError("zstd compression context")

    def write(self, records: np.ndarray) -> None:
        """Take the records (the caller may reuse its array at once)."""
        recs = np.ascontiguousarray(records)
        per = self.per_frame
        while len(recs):
            if self._n == 0 and len(recs) >= self.in_place:
                self._frame(recs[:per], self._census)
                recs = recs[per:]
                continue
            take = min(len(recs), per - self._n)
            # as 64-bit words: numpy copies a record array field by field, several times slower
            self._words[2 * self._n:2 * (self._n + take)] = recs[:take].view(np.uint64)
            if self._census is not None:
                self._L.cc_trace_census(self._buf[self._n:].ctypes.data, take, self._census[0].ctypes.data,
                                        self._census[1].ctypes.data)
            self._n += take
            recs = recs[take:]
            if self._n == per:
                self._frame(self._buf)

    def flush(self) -> None:
        if self._n:
            self._frame(self._buf[:self._n])

    def _zstd(self, recs: np.ndarray) -> int:
        return self._L.cc_zc_compress(self._ctx, self._dst.ctypes.data, len(self._dst), recs.ctypes.data, recs.nbytes)

    def _frame(self, recs: np.ndarray, census: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Compress and write one frame; `census`: count its records into these too."""
        if self._lz is None:
            if census is not None:
                self._L.cc_trace_census(recs.ctypes.data, len(recs), census[0].ctypes.data, census[1].ctypes.data)
            k, out = self._zstd(recs), self._dst
            head = struct.pack("<IIQ", k, len(recs), 0)
        else:
            if census is not None:
                k = self._L.cc_lz4_census(self._lz.ctypes.data, len(self._lz), recs.ctypes.data, len(recs),
                                          census[0].ctypes.data, census[1].ctypes.data)
            else:
                k = self._L.cc_lz4_compress(self._lz.ctypes.data, len(self._lz), recs.ctypes.data, recs.nbytes)
            out, codec = self._lz, LZ4
            if not k or k * LZ4_ENOUGH > recs.nbytes:
                z = self._zstd(recs)
                if z and (not k or z < k):
                    k, out, codec = z, self._dst, ZSTD
                    self.zstd_frames += 1
            head = struct.pack("<IIII", k, len(recs), codec, 0)
        if not k:
            raise MemoryError("could not compress a frame of the trace")
        self.fh.write(head)
        self.fh.write(memoryview(out)[:k])
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
    """The frames of a compressed trace file: where each starts, its size, records and codec."""

    path: str
    offsets: np.ndarray
    sizes: np.ndarray
    counts: np.ndarray
    codecs: np.ndarray
    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def chunks(self, size: int, reuse: bool = False) -> Iterator[tuple[np.ndarray, bool]]:
        """The records, a frame at a time, in slices of at most `size`, each with whether its
        frame was checked to hold only known kinds (checked as the frame is decompressed, while
        it is in the cache; per iteration, so two readers of one trace never see each other's);
        `reuse`: every frame into the same array (a slice is valid until the next is asked for)."""
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
                for off, k, n, codec in zip(self.offsets.tolist(), self.sizes.tolist(), self.counts.tolist(),
                                            self.codecs.tolist()):
                    if len(buf) < k:
                        buf = np.empty(k, np.uint8)
                    fh.seek(off)
                    if fh.readinto(memoryview(buf)[:k]) != k:
                        raise UserError(f"{self.path}: truncated trace (a frame ends past the end of the file)")
                    if reuse and len(keep) < n:
                        keep = np.empty(n, RECORD_DTYPE)
                    out = keep[:n] if reuse else np.empty(n, RECORD_DTYPE)
                    if codec == LZ4:
                        got = L.cc_lz4_records(out.ctypes.data, n, buf.ctypes.data, k)
                    else:
                        got = L.cc_zd_records(ctx, out.ctypes.data, n, buf.ctypes.data, k)
                    if got == -1:
                        raise UserError(f"{self.path}: damaged trace (a frame at byte {off:,} does not "
                                        f"decompress to its {n:,} records)")
                    known = got == 0
                    for i in range(0, n, size):
                        yield out[i:i + size], known
        finally:
            L.cc_zd_free(ctx)

    def read_all(self) -> np.ndarray:
        parts = [p for p, _ in self.chunks(FRAME_RECORDS)]
        return np.concatenate(parts) if parts else np.zeros(0, RECORD_DTYPE)


def index(path: str, offset: int, size: int, promised: Any, version: int = 3) -> Frames:
    """Walk the frame headers of a compressed trace (`offset`: where the first one is; `size`:
    the file's size; `version`: 2 or 3), checking that they tile the file and hold the records
    the header promises."""
    offs, sizes, counts, codecs = [], [], [], []
    pos = offset
    try:
        with open(path, "rb") as fh:
            while pos < size:
                fh.seek(pos)
                raw = fh.read(_FRAME_HEAD.itemsize)
                if len(raw) < _FRAME_HEAD.itemsize:
                    raise UserError(f"{path}: truncated trace (a frame header is cut off at byte {pos:,})")
                h = np.frombuffer(raw, _FRAME_HEAD)[0]
                k, n, codec = int(h["size"]), int(h["records"]), int(h["codec"])
                if version < 3:
                    codec, bad = ZSTD, int(h["codec"]) != 0
                else:
                    bad = codec not in (LZ4, ZSTD)
                if bad or k == 0 or n == 0 or n > FRAME_RECORDS or k > MAX_FRAME_BYTES or int(h["zero"]) != 0:
                    raise UserError(f"{path}: damaged trace (a bad frame header at byte {pos:,})")
                pos += _FRAME_HEAD.itemsize
                if pos + k > size:
                    raise UserError(f"{path}: truncated trace (the frame at byte {pos - 16:,} ends past the end "
                                    "of the file)")
                offs.append(pos)
                sizes.append(k)
                counts.append(n)
                codecs.append(codec)
                pos += k
    except OSError as err:
        raise UserError(f"{path}: cannot read: {err.strerror}") from None
    fr = Frames(path, np.array(offs, np.int64), np.array(sizes, np.int64), np.array(counts, np.int64),
                np.array(codecs, np.int64))
    if isinstance(promised, int) and promised != fr.total:
        raise UserError(f"{path}: the header promises {promised:,} records but the file holds {fr.total:,} "
                        f"({'truncated' if fr.total < promised else 'extra data after them'})")
    return fr
