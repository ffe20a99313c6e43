"""The dashboard reads a stat trace of at most serve.files.MAX_TRACE_BYTES: anyone who can write
into a folder given to `corecast serve` could otherwise drop a multi-gigabyte file with a stat
header there and run the server out of memory when its owner opens it. A larger trace is one
error line, on the page as from read_trace; the read itself never goes past the bound."""
from __future__ import annotations

import asyncio
import contextlib
import resource
from pathlib import Path

import pytest

from corecast.errors import UserError
from corecast.serve import files

HEADER = b'{"type": "header", "format": "corecast-stat", "version": 1}\n'
SAMPLE = b'{"type": "sample", "time_s": 0.1}\n'


def sparse_trace(path: Path, size: int) -> Path:
    """A trace of `size` bytes that takes no disk: the header and blank lines to fill the part
    the dashboard sniffs (no NUL there), then a hole."""
    with open(path, "wb") as fh:
        fh.write(HEADER.ljust(8192, b"\n"))
        fh.truncate(size)
    return path


def test_an_oversized_trace_is_one_line_and_never_read(tmp_path):
    trace = sparse_trace(tmp_path / "big.jsonl", files.MAX_TRACE_BYTES + 1)
    assert trace.stat().st_blocks * 512 < 1 << 20             # sparse: no real disk used
    assert files.sniff(trace) == "stat-trace"                  # it is listed as a trace...
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(UserError) as err:                      # ...and opening it is refused
        files.read_trace(trace, "corecast-stat")
    msg = str(err.value)
    assert "\n" not in msg and "big.jsonl" in msg
    assert f"{files.MAX_TRACE_BYTES + 1:,} bytes, more than the {files.MAX_TRACE_BYTES:,} bytes" in msg
    # the refusal comes before the read: the server's memory did not grow by the file
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 << 10   # KiB


def test_the_bound_is_exact_and_holds_for_a_file_that_grows(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_TRACE_BYTES", 4096)
    ok = tmp_path / "ok.jsonl"
    ok.write_bytes(HEADER + SAMPLE + b" " * (4096 - len(HEADER) - len(SAMPLE) - 1) + b"\n")
    assert ok.stat().st_size == 4096
    t = files.read_trace(ok, "corecast-stat")
    assert t.times == [0.1] and t.notes == []
    ok.write_bytes(ok.read_bytes() + b"\n")                    # one byte more
    with pytest.raises(UserError, match="4,097 bytes, more than the 4,096 bytes the dashboard reads"):
        files.read_trace(ok, "corecast-stat")

    # a file that grows between the look at its size and the read: still at most bound + 1 bytes
    grown = tmp_path / "grown.jsonl"
    grown.write_bytes(HEADER)
    asked: list[int] = []
    real_opened = files.opened

    class Growing:
        def __init__(self, fh):
            self.fh = fh

        def fileno(self):
            return self.fh.fileno()

        def read(self, n=-1):
            with open(grown, "ab") as w:                       # it grows once its size was seen
                w.write(b"x" * 100_000)
            asked.append(n)
            return self.fh.read(n)

    @contextlib.contextmanager
    def opened(path, *a, **kw):
        with real_opened(path, *a, **kw) as fh:
            yield Growing(fh)
    monkeypatch.setattr(files, "opened", opened)
    with pytest.raises(UserError, match="grew while read past the 4,096 bytes the dashboard"):
        files.read_trace(grown, "corecast-stat")
    assert asked == [4097]


def test_the_page_shows_the_refusal(tmp_path):
    aiohttp = pytest.importorskip("aiohttp")
    from aiohttp.test_utils import TestClient, TestServer
    from corecast.serve.app import Dashboard
    sparse_trace(tmp_path / "big.jsonl", files.MAX_TRACE_BYTES + 1)
    dash = Dashboard([str(tmp_path)], "127.0.0.1", 0)

    async def go():
        async with TestClient(TestServer(dash.app(), host="127.0.0.1", port=0)) as client:
            dash.port = client.port
            r = await client.get(f"/?token={dash.guard.secret}", allow_redirects=False)
            assert r.status == 302
            dash.registry.scan()
            fid = next(e.id for e in dash.registry.files.values() if e.path.name == "big.jsonl")
            resp = await client.get("/api/replay", params={"file": fid})
            return resp.status, await resp.json()

    assert aiohttp
    status, doc = asyncio.run(asyncio.wait_for(go(), 60))
    assert status == 400
    assert "more than the 268,435,456 bytes the dashboard reads from a stat trace" in doc["error"]
    assert "\n" not in doc["error"]
