"""Trace files, the lackey parser, din and CSV converters."""
from __future__ import annotations

import numpy as np
import pytest

from corecast.errors import UserError
from corecast.sim import synth
from corecast.sim.native import (KIND_FETCH, KIND_LOAD, KIND_MARKER, KIND_MODIFY, KIND_STORE,
                                 RECORD_DTYPE)
from corecast.sim.trace import (LackeyParser, Trace, TraceWriter, convert, load,
                                parse_lackey_text, read_csv, read_din, read_trace, write_csv,
                                write_trace)

LACKEY = """==123== Lackey, an example Valgrind tool
==123== Command: ./a.out
--123--   SCHED[1]:  acquired lock (thread_wrapper(starting new thread))
I  04016b0,3
 S 1ffefffd58,8
I  04016b3,5
 L 04222cac,4
 M 0421f0d8,4
--123--   SCHED[2]:  acquired lock (VG_(client_syscall)[async])
I  0401000,2
 L 7ff000010,16
==123== 
"""


def test_record_layout():
    assert RECORD_DTYPE.itemsize == 16


def test_parse_lackey_lines_threads_and_messages():
    p = LackeyParser()
    recs = p.feed(LACKEY.encode(), final=True)
    assert recs["kind"].tolist() == [KIND_FETCH, KIND_STORE, KIND_FETCH, KIND_LOAD,
                                     KIND_MODIFY, KIND_FETCH, KIND_LOAD]
    assert recs["addr"].tolist() == [0x4016B0, 0x1FFEFFFD58, 0x4016B3, 0x4222CAC, 0x421F0D8,
                                     0x401000, 0x7FF000010]
    assert recs["size"].tolist() == [3, 8, 5, 4, 4, 2, 16]
    assert recs["tid"].tolist() == [0, 0, 0, 0, 0, 1, 1]
    st = p.stats()
    assert st.trace_lines == 7 and st.bad_lines == 0 and st.threads == 2
    assert any("Command: ./a.out" in m for m in st.messages)
    assert not any("SCHED" in m for m in st.messages)


def test_parse_lackey_markers():
    recs = parse_lackey_text(LACKEY, markers=[0x4016B3])
    kinds = recs["kind"].tolist()
    i = kinds.index(KIND_MARKER)
    assert recs["addr"][i] == 0x4016B3 and kinds[i + 1] == KIND_FETCH
    assert recs["addr"][i + 1] == 0x4016B3


def test_parse_lackey_in_pieces_matches_whole():
    text = ("".join(f"I  {0x400000 + 4 * i:08x},4\n L {0x10000 + 8 * i:08x},8\n"
                    for i in range(5000))).encode()
    whole = parse_lackey_text(text)
    p = LackeyParser()
    parts = [p.feed(text[i:i + 997]) for i in range(0, len(text), 997)]
    parts.append(p.feed(b"", final=True))
    pieces = np.concatenate(parts)
    assert len(whole) == 10000
    assert np.array_equal(whole, pieces)


def test_parse_lackey_bad_lines_counted():
    p = LackeyParser()
    recs = p.feed(b"I  0400000,4\nhello world\n L zz,8\n S 1000,\n L 2000,8\n", final=True)
    assert len(recs) == 2
    st = p.stats()
    assert st.bad_lines == 3 and st.first_bad_line == 2


def test_parse_lackey_final_line_without_newline():
    assert len(parse_lackey_text("I  0400000,4\n L 1000,8")) == 2


def test_trace_file_roundtrip(tmp_path):
    recs = synth.pingpong(10, 3)
    p = write_trace(tmp_path / "t.cctrace", Trace(recs, {"source": "test", "note": "x"}))
    tr = read_trace(p)
    assert np.array_equal(np.asarray(tr.records), recs)
    assert tr.meta["source"] == "test" and tr.meta["threads"] == 3
    assert tr.meta["has_branches"] is False and tr.meta["records"] == len(recs)
    assert tr.summary()["store"] == 30


def test_writer_incremental_and_large_meta(tmp_path):
    recs = synth.stream(1000)
    with TraceWriter(tmp_path / "w.cctrace", {"source": "w"}) as w:
        w.write(recs[:500])
        w.write(recs[500:])
    tr = read_trace(tmp_path / "w.cctrace")
    assert np.array_equal(np.asarray(tr.records), recs)
    big = TraceWriter(tmp_path / "b.cctrace")
    big.write(recs)
    big.close({"objects": ["/x" * 50] * 200})       # more than the reserved header
    tr = read_trace(tmp_path / "b.cctrace")
    assert len(tr.meta["objects"]) == 200 and np.array_equal(np.asarray(tr.records), recs)


def test_bad_trace_files(tmp_path):
    p = tmp_path / "junk.cctrace"
    p.write_bytes(b"hello")
    with pytest.raises(UserError, match="not a corecast trace"):
        read_trace(p)
    good = write_trace(tmp_path / "g.cctrace", Trace(synth.stream(10)))
    data = good.read_bytes()
    (tmp_path / "trunc.cctrace").write_bytes(data[:-5])
    with pytest.raises(UserError, match="truncated"):
        read_trace(tmp_path / "trunc.cctrace")
    with pytest.raises(UserError, match="no such trace"):
        load(tmp_path / "missing")


def test_din(tmp_path):
    p = tmp_path / "t.din"
    p.write_text("2 400000\n0 1000 8\n1 2000\n3 0\n")
    recs = read_din(p)
    assert recs["kind"].tolist() == [KIND_FETCH, KIND_LOAD, KIND_STORE]
    assert recs["size"].tolist() == [4, 8, 4]
    (tmp_path / "bad.din").write_text("0 1000\n7 1000\n")
    with pytest.raises(UserError, match=r"bad\.din:2: unknown din label 7"):
        read_din(tmp_path / "bad.din")


def test_csv_roundtrip(tmp_path):
    recs = np.concatenate([synth.pingpong(3, 2), parse_lackey_text(LACKEY)])
    write_csv(recs, tmp_path / "t.csv")
    back = read_csv(tmp_path / "t.csv")
    for f in ("addr", "tid", "kind", "size"):
        assert back[f].tolist() == recs[f].tolist()
    (tmp_path / "bad.csv").write_text("kind,addr\nfetch,0x10\njump,0x20\n")
    with pytest.raises(UserError, match=r"bad\.csv:3: column 'kind'"):
        read_csv(tmp_path / "bad.csv")
    (tmp_path / "nokind.csv").write_text("addr\n1\n")
    with pytest.raises(UserError, match="column 'kind' missing"):
        read_csv(tmp_path / "nokind.csv")


def test_convert_detects_format(tmp_path):
    (tmp_path / "a.lackey").write_text(LACKEY)
    path, info = convert(tmp_path / "a.lackey", tmp_path / "a.cctrace")
    assert info["format"] == "lackey" and info["threads"] == 2
    tr = read_trace(path)
    assert len(tr) == 7 and tr.meta["threads"] == 2
    (tmp_path / "x.txt").write_text("what is this\n")
    with pytest.raises(UserError, match="cannot tell the trace format"):
        convert(tmp_path / "x.txt", tmp_path / "x.cctrace")
    (tmp_path / "empty.lackey").write_text("==1== nothing\n")
    with pytest.raises(UserError, match="no lackey trace lines"):
        convert(tmp_path / "empty.lackey", tmp_path / "e.cctrace", "lackey")


def test_load_text_directly(tmp_path):
    (tmp_path / "a.lackey").write_text(LACKEY)
    tr = load(tmp_path / "a.lackey")
    assert len(tr) == 7 and tr.meta["source"] == "lackey"


# ---------------------------------------------------------------- damaged files (issue 15)
def _some_records(n: int) -> np.ndarray:
    from corecast.sim import native as N
    r = np.zeros(n, dtype=N.RECORD_DTYPE)
    r["kind"] = N.KIND_LOAD
    r["size"] = 8
    r["addr"] = np.arange(n, dtype=np.uint64) * 8
    return r


def test_header_promising_more_records_than_the_file_holds(tmp_path):
    from corecast.sim.trace import Trace, read_trace, write_trace
    p = write_trace(tmp_path / "t.cctrace", Trace(_some_records(200_000), {}), compress=False)
    data = p.read_bytes()
    (tmp_path / "cut.cctrace").write_bytes(data[:len(data) - 199_000 * 16])
    with pytest.raises(UserError, match="promises 200,000 records but the file holds 1,000"):
        read_trace(tmp_path / "cut.cctrace")


def test_compressed_traces_read_as_written_and_damage_is_one_line(tmp_path):
    """A trace is written compressed (version 3: frames of 128 Ki records, of at most 1 Mi when
    read; a plain stream of addresses, which lz4 compresses poorly, in zstd frames), read back
    record for record, also into one reused array, much smaller than 16 bytes a record; a file
    cut short, a frame header broken, a frame's bytes damaged or a frame missing each end in one
    line naming the file; a version-1 trace (16 bytes a record) still reads. (The frames carry
    no checksum, as the records of version 1 did not: damage inside a frame is found by zstd or
    by the kinds' check.)"""
    from corecast.sim import zframes
    from corecast.sim.trace import Trace, read_trace, write_trace
    recs = _some_records(2_500_000)
    recs["tid"] = np.arange(len(recs)) % 3
    p = write_trace(tmp_path / "t.cctrace", Trace(recs, {"source": "test"}))
    t = read_trace(p)
    assert t.meta["version"] == 3 and t.meta["compression"] == "lz4/zstd" and t.meta["threads"] == 3
    assert len(t) == len(recs) and t.frames.counts.tolist() == [1 << 17] * 19 + [2_500_000 - 19 * (1 << 17)]
    assert set(t.frames.codecs.tolist()) == {zframes.ZSTD}
    assert np.array_equal(np.concatenate(list(t.chunks(1 << 19))), recs)
    reused = [c.copy() for c in t.chunks(1 << 16, reuse=True)]
    assert np.array_equal(np.concatenate(reused), recs) and len(reused) == 2 * 19 + 1
    assert np.array_equal(t.records, recs)                       # read whole when asked for
    assert p.stat().st_size * 5 < recs.nbytes
    v1 = write_trace(tmp_path / "v1.cctrace", Trace(recs[:1000], {}), compress=False)
    assert v1.stat().st_size == 4096 + 16_000 and np.array_equal(read_trace(v1).records, recs[:1000])
    data = p.read_bytes()
    first = int(t.frames.offsets[0])
    (tmp_path / "cut.cctrace").write_bytes(data[:len(data) - 100])
    with pytest.raises(UserError, match="cut.cctrace: truncated trace"):
        read_trace(tmp_path / "cut.cctrace")
    head = bytearray(data)
    head[first - 16:first - 12] = (0).to_bytes(4, "little")
    (tmp_path / "head.cctrace").write_bytes(bytes(head))
    with pytest.raises(UserError, match="head.cctrace: damaged trace \\(a bad frame header"):
        read_trace(tmp_path / "head.cctrace")
    body = bytearray(data)
    body[first + 100:first + 140] = bytes(40)
    (tmp_path / "body.cctrace").write_bytes(bytes(body))
    with pytest.raises(UserError, match="body.cctrace: (damaged trace \\(a frame at byte|record \\d+: kind)"):
        list(read_trace(tmp_path / "body.cctrace").chunks())    # zstd's error, or the kinds' check
    big = tmp_path / "big.cctrace"            # a frame header naming 64 MiB, in a (sparse) file that long:
    with open(big, "wb") as fh:               # refused, not read into a buffer of that size
        fh.write(data[:first - 16] + (64 << 20).to_bytes(4, "little") + data[first - 12:first])
        fh.truncate(first + (64 << 20))
    with pytest.raises(UserError, match=f"big.cctrace: damaged trace \\(a bad frame header at byte {first - 16:,}\\)"):
        read_trace(big)
    assert zframes.MAX_FRAME_BYTES < 17 << 20
    second = int(t.frames.offsets[1])
    (tmp_path / "gap.cctrace").write_bytes(data[:first - 16] + data[second - 16:])
    with pytest.raises(UserError, match="promises 2,500,000 records but the file holds 2,368,928"):
        read_trace(tmp_path / "gap.cctrace")
    assert zframes.FRAME_RECORDS == 1 << 20


def test_version_2_traces_and_lz4_frames_read_as_written(tmp_path, monkeypatch):
    """A version-2 trace as corecast wrote it before (zstd frames of 1 Mi records, level 3), one
    in version-2 frames of 128 Ki records, and version 3 read record for record, and the kinds
    are counted alike; records that repeat (a loop's fetches and loads) go in lz4 frames, more
    than 8 times smaller; the writer's census (records of each kind, threads) is that of the
    records, whichever way they were cut into writes; a frame of a codec no version-3 trace
    names is a damaged trace."""
    import functools
    from corecast.sim import zframes
    from corecast.sim.trace import TraceWriter, read_trace
    rng = np.random.default_rng(7)
    loop = _some_records(1024)                          # 16 KiB: within lz4's window
    loop["kind"] = rng.integers(0, 7, len(loop))
    loop["addr"] = rng.integers(0x400000, 0x500000, len(loop), dtype=np.uint64)
    recs = np.tile(loop, 2240)
    recs["tid"] = np.repeat(rng.integers(0, 5, len(recs) // 100_000 + 1), 100_000)[:len(recs)]
    recs["tid"][1_234_567] = 9                          # a thread met once, inside a write
    old = functools.partial(zframes.FrameWriter, level=3, records=1 << 20, in_place=1 << 20)
    for name, version, frame in (("old", 2, old), ("v2", 2, zframes.FrameWriter), ("v3", 3, zframes.FrameWriter)):
        monkeypatch.setattr(zframes, "FrameWriter", frame)
        with TraceWriter(tmp_path / f"{name}.cctrace", {}, version=version) as w:
            for i in range(0, len(recs), 300_001):
                w.write(recs[i:i + 300_001])
        assert w.kinds.tolist() == np.bincount(recs["kind"], minlength=7).tolist()
        assert w.tids == set(np.unique(recs["tid"]).tolist()) and 9 in w.tids
        t = read_trace(tmp_path / f"{name}.cctrace")
        assert t.meta["version"] == version and t.meta["compression"] == ("zstd" if version == 2 else "lz4/zstd")
        assert t.frames.counts.tolist() == ([1 << 20, 1 << 20, len(recs) - (2 << 20)] if name == "old" else
                                            [1 << 17, 1 << 17, 300_001 - (2 << 17)] * 7 + [1 << 17, len(recs) - 7 * 300_001 - (1 << 17)])
        assert set(t.frames.codecs.tolist()) == {zframes.ZSTD if version == 2 else zframes.LZ4}
        assert np.array_equal(np.concatenate([c.copy() for c in t.chunks(1 << 18, reuse=True)]), recs)
        assert t.summary()["threads"] == len(w.tids) and t.meta["has_uops"]
        assert (tmp_path / f"{name}.cctrace").stat().st_size * 8 < recs.nbytes
    data = bytearray((tmp_path / "v3.cctrace").read_bytes())
    first = int(t.frames.offsets[0])
    body = bytearray(data)
    body[first + 100:first + 400] = bytes(range(256)) + bytes(44)      # inside an lz4 block
    (tmp_path / "body.cctrace").write_bytes(bytes(body))
    with pytest.raises(UserError, match="body.cctrace: (damaged trace \\(a frame at byte|record \\d+: kind)"):
        list(read_trace(tmp_path / "body.cctrace").chunks())
    data[first - 8:first - 4] = (3).to_bytes(4, "little")
    (tmp_path / "codec.cctrace").write_bytes(bytes(data))
    with pytest.raises(UserError, match=f"codec.cctrace: damaged trace \\(a bad frame header at byte {first - 16:,}"):
        read_trace(tmp_path / "codec.cctrace")


def test_records_of_no_known_kind_are_refused(tmp_path):
    from corecast.sim.trace import Trace, read_trace, write_trace
    recs = _some_records(65_536)
    rng = np.random.default_rng(1)
    raw = rng.integers(0, 256, len(recs) * 16, dtype=np.uint8).view(recs.dtype)
    p = write_trace(tmp_path / "r.cctrace", Trace(raw, {}))
    tr = read_trace(p)
    with pytest.raises(UserError, match="is not a record kind"):
        for _ in tr.chunks():
            pass


def test_a_second_reader_of_the_trace_never_vouches_for_the_first(tmp_path):
    # whether a frame's kinds were checked is the reader's own: a reader that went on to a good
    # frame once made the other, still in a bad frame, skip its check
    from corecast.sim.trace import Trace, read_trace, write_trace
    recs = _some_records(1 << 18)
    p = write_trace(tmp_path / "t.cctrace", Trace(recs, {}))
    tr = read_trace(p)
    per = int(tr.frames.counts[0])
    assert len(tr.frames.counts) >= 2
    recs["kind"][per - 10] = 9                      # in the second half of the first frame
    p = write_trace(tmp_path / "bad.cctrace", Trace(recs, {}))
    tr = read_trace(p)
    first = tr.chunks(per // 2)
    next(first)                                     # the first half: good
    for _ in tr.chunks(per // 2, checked=False):    # another reader, through the good frames too
        pass
    with pytest.raises(UserError, match=f"record {per - 10}: kind 9 is not a record kind"):
        next(first)


def test_writer_leaves_nothing_behind_when_the_disk_fills(tmp_path, monkeypatch):
    import errno
    from corecast.sim.trace import TraceWriter
    w = TraceWriter(tmp_path / "full.cctrace", {})
    w.write(_some_records(10))

    class Full:
        def write(self, b):
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self):
            pass

    w._fh._fh = Full()                              # the file under corecast.outputs' guard
    with pytest.raises(UserError, match="full.cctrace: cannot write: No space left on device"):
        w.write(_some_records(10))
        w.close()                                   # compressed: the frame goes out at close
    assert list(tmp_path.iterdir()) == []
    raw = TraceWriter(tmp_path / "raw.cctrace", {}, compress=False)
    raw.write(_some_records(10))
    raw._fh._fh = Full()
    with pytest.raises(UserError, match="raw.cctrace: cannot write: No space left on device"):
        raw.write(_some_records(10))                # version 1: at once
    assert list(tmp_path.iterdir()) == []


def test_writer_is_atomic_and_an_exception_removes_the_part(tmp_path):
    from corecast.sim.trace import TraceWriter, read_trace
    out = tmp_path / "a.cctrace"
    with TraceWriter(out, {}) as w:
        w.write(_some_records(5))
        assert not out.exists()                       # not under its name until it is whole
    assert len(read_trace(out).records) == 5
    with pytest.raises(RuntimeError):
        with TraceWriter(tmp_path / "b.cctrace", {}) as w:
            w.write(_some_records(5))
            raise RuntimeError("stop")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.cctrace"]


def test_pingpong_is_made_in_bounded_memory():
    """`sim gen pingpong --threads 2000` built every record as a Python tuple first (24 GB at
    -n 100000); the chunks are made as they are consumed."""
    import tracemalloc
    made = 0
    tracemalloc.start()
    try:
        for part in synth.pingpong_chunks(2000, 2000, "read"):
            made += part.nbytes
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert made == 2000 * 2000 * 2 * 16                     # every record, with its fetch
    assert peak < 50e6 and made > 100e6


def test_pingpong_cli_streams_and_bounds_threads(cli, tmp_path):
    from corecast.sim.trace import read_trace
    out = tmp_path / "pp.cctrace"
    r = cli("sim", "gen", "pingpong", "-n", "1000", "--threads", "300", "-o", out)
    assert r.code == 0, r.err
    tr = read_trace(out)
    assert len(tr.records) == 1000 * 300 * 2 and tr.meta["threads"] == 300
    r = cli("sim", "gen", "pingpong", "-n", "10", "--threads", "70000", "-o", tmp_path / "x.cctrace")
    assert r.code == 2 and "2 to 65,536 threads" in r.err


def _transactions_one_at_a_time(count, per_tx, seed):
    """The generator as it was: a transaction at a time (the reference for the sliced one)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        m = np.zeros(1, dtype=RECORD_DTYPE)
        m["kind"], m["addr"] = KIND_MARKER, 1
        out.append(m)
        which = rng.integers(0, 3, per_tx)
        sp = synth.STACK_TOP - 8 * rng.integers(1, 2048 // 8, per_tx).astype(np.uint64)
        sh = synth.HEAP_BASE + 8 * rng.integers(0, 4096 // 8, per_tx).astype(np.uint64)
        pv = synth.HEAP_BASE + 0x1000000 + k * (1 << 16) + 8 * rng.integers(0, (1 << 16) // 8, per_tx).astype(np.uint64)
        d = np.zeros(per_tx, dtype=RECORD_DTYPE)
        d["addr"] = np.where(which == 0, sp, np.where(which == 1, sh, pv))
        d["kind"] = np.where(which == 1, KIND_LOAD, KIND_STORE)
        d["size"] = 8
        out.append(synth._interleave_fetch(d))
    return np.concatenate(out)


@pytest.mark.parametrize("count, per_tx, seed", [(1, 200, 1), (37, 150, 3), (300, 200, 1), (3, 1, 2)])
def test_transactions_sliced_are_the_records_of_one_at_a_time(count, per_tx, seed):
    """`sim gen transactions` took 18 s and 1.9 GB for its default 100,000 transactions, one
    numpy call at a time; made in slices, the records are the same."""
    ref = _transactions_one_at_a_time(count, per_tx, seed)
    assert np.array_equal(synth.transactions(count, per_tx=per_tx, seed=seed), ref)
    parts = list(synth.transactions_chunks(count, per_tx=per_tx, seed=seed, chunk_records=1000))
    assert len(parts) > 1 or count * (2 * per_tx + 1) <= 1000
    assert np.array_equal(np.concatenate(parts), ref)


@pytest.mark.slow
def test_transactions_are_made_in_bounded_memory():
    import tracemalloc
    made = 0
    tracemalloc.start()
    try:
        for part in synth.transactions_chunks(20_000):
            made += part.nbytes
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert made == 20_000 * 401 * 16
    assert peak < 100e6 and made > 120e6


@pytest.mark.parametrize("n", [1, 3, 4, 5, 64, 1031])
def test_frame_kind_check_finds_an_unknown_kind_anywhere_and_only_there(n):
    """The reader checks a frame's kinds as it decompresses it, four records at a time (the
    largest byte at each position of a record) and the rest one by one: an unknown kind in any
    record is found, in the vector part and the tail, and a record whose other bytes are all
    0xff (size 255, thread 65535, aux 2^32 - 1, the address) is not one."""
    from corecast.sim import native as N
    L = N.lib()
    full = _some_records(n)
    full["aux"], full["tid"], full["size"] = 0xFFFFFFFF, 0xFFFF, 0xFF
    full["addr"] = np.uint64(0xFFFFFFFFFFFFFFFF)
    full["kind"] = np.arange(n) % N.KIND_UOP + 1 if n > 1 else N.KIND_UOP     # every known kind, up to 6
    def check(recs):
        dst = np.empty(L.cc_lz4_bound(recs.nbytes), np.uint8)
        k = L.cc_lz4_compress(dst.ctypes.data, len(dst), recs.ctypes.data, recs.nbytes)
        assert k > 0
        out = np.empty(len(recs), N.RECORD_DTYPE)
        got = L.cc_lz4_records(out.ctypes.data, len(recs), dst.ctypes.data, k)
        assert np.array_equal(out, recs)
        return got
    assert check(full) == 0
    for at in sorted({0, n // 2, n - 1, max(0, n - 4)}):
        for kind in (7, 0x80, 0xFF):
            bad = full.copy()
            bad["kind"][at] = kind
            assert check(bad) == -2, (at, kind)


def test_writer_without_census_takes_the_callers_counts(tmp_path):
    """`census=False` (a QEMU capture without decoding): the records and frames are those a
    census-taking writer writes, and the header's threads, branches and uops are what the caller
    says with `counted` -- the same header as the census gives for the same records."""
    from corecast.sim.trace import read_trace
    recs = _some_records(300_000)
    recs["kind"] = np.arange(len(recs)) % 4                  # fetches, loads, stores, modifies
    recs["tid"] = np.arange(len(recs)) // 100_000            # three threads
    headers = {}
    for census in (True, False):
        with TraceWriter(tmp_path / f"{census}.cctrace", {"source": "qemu"}, census=census) as w:
            for i in range(0, len(recs), 70_000):
                w.write(recs[i:i + 70_000])
            if not census:
                w.counted(int(np.count_nonzero(recs["kind"] == KIND_FETCH)), 3)
        assert int(w.kinds[KIND_FETCH]) == 75_000
        t = read_trace(tmp_path / f"{census}.cctrace")
        assert np.array_equal(t.frames.read_all(), recs)
        headers[census] = t.meta
    assert headers[True] == headers[False]
    assert headers[False]["threads"] == 3 and not headers[False]["has_branches"] and not headers[False]["has_uops"]
    assert (tmp_path / "True.cctrace").read_bytes() == (tmp_path / "False.cctrace").read_bytes()


@pytest.mark.parametrize("version", ['"1e999"', '{"a": 1}', "1e999", "true", "0", "-7", "2.5"])
def test_a_trace_version_of_the_wrong_kind_is_one_line(tmp_path, version):
    # the header's JSON said the version; `int(...)` of a text, an object or 1e999 was an
    # internal error (exit status 1), not one line
    import re
    from corecast.sim.trace import Trace, read_trace, write_trace
    p = write_trace(tmp_path / "t.cctrace", Trace(_some_records(100), {}), compress=False)
    data = p.read_bytes()
    offset, jlen = (int(v) for v in np.frombuffer(data[8:16], "<u4"))
    blob = data[16:16 + jlen].decode()
    assert re.search(r'"version": *\d+', blob)
    body = re.sub(r'"version": *\d+', f'"version": {version}', blob).encode()
    start = (16 + len(body) + 15) // 16 * 16
    head = data[:8] + np.array([start, len(body)], "<u4").tobytes() + body
    bad = tmp_path / "bad.cctrace"
    bad.write_bytes(head + b" " * (start - len(head)) + data[offset:])
    assert read_trace(p).meta["version"] >= 1
    with pytest.raises(UserError, match="is not one this corecast reads"):
        read_trace(bad)
