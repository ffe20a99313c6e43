"""The dashboard's scan of its folders is bounded and off the event loop: anyone who can write
into a folder given to `corecast serve` could otherwise freeze every request and live stream
(a 60 MB JSON file hard-linked hundreds of times, each name parsed whole on the loop) or make
each request open thousands of files again. A scan reads at most serve.files.JSON_SNIFF_BYTES
of a file, opens a file that did not change (nor another name of it) once, looks at a bounded
number of names per folder, and runs in a worker thread that requests share."""
from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")

from corecast.serve import files  # noqa: E402
from corecast.serve.app import Dashboard  # noqa: E402

from conftest import run_api  # noqa: E402

BIG = 20 << 20


def rchar() -> int:
    """Bytes this process read so far, all threads, any call (the kernel's count)."""
    with open("/proc/self/io") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("rchar:"))


def big_array(path: Path) -> Path:
    """About BIG bytes of a JSON array (rows, no metadata, no note)."""
    row = "[8, 1.25, 3.5]"
    path.write_text("[" + ",".join([row] * (BIG // (len(row) + 1))) + "]\n")
    return path


def big_object(path: Path) -> Path:
    """About BIG bytes of a JSON object whose first member fills it and that has no note: the most
    a look for notes.meters can be made to read."""
    n = BIG // 24
    path.write_text('{"columns": {' + ",".join(f'"c{i:07d}": {{"unit": "s"}}' for i in range(n)) + '}, "rows": []}\n')
    return path


def counting_sniff(monkeypatch) -> list[Path]:
    """The paths serve.files.sniff opens from now on."""
    seen: list[Path] = []
    real = files.sniff

    def sniff(p):
        seen.append(Path(p))
        return real(p)
    monkeypatch.setattr(files, "sniff", sniff)
    return seen


# ------------------------------------------------------------------ (1) bounded reads, the loop free
@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs /proc/self/io")
def test_a_large_json_hard_linked_many_times_is_read_once_and_only_its_prefix(tmp_path, monkeypatch):
    folder = tmp_path / "served"
    folder.mkdir()
    arr = big_array(tmp_path / "array.json")
    obj = big_object(tmp_path / "object.json")
    for i in range(50):                                  # hard links: no disk, a name each
        os.link(arr, folder / f"a{i:02d}.json")
        os.link(obj, folder / f"o{i:02d}.json")
    per_file = files.JSON_SNIFF_BYTES + 2 * files.HEAD_BYTES     # head, prefix, tail
    slack = 1 << 20                                              # /proc, the folder, the rest

    # the reference: one name, sniffed alone, reads its prefix, not the file
    before = rchar()
    assert files.sniff(obj) == "dataset" and files.sniff(arr) == "dataset"
    read = rchar() - before
    assert read <= 2 * per_file + slack and read < BIG // 2

    dash = Dashboard([str(folder)], "127.0.0.1", 0)
    opened = counting_sniff(monkeypatch)
    before = rchar()
    dash.registry.scan()
    read = rchar() - before
    shown = {e.path.name: e.kind for e in dash.registry.files.values()}
    assert len(shown) == 100 and set(shown.values()) == {"dataset"}
    assert len(opened) == 2                              # one name of each file: the others are the same file
    assert read <= 2 * per_file + slack and read < BIG // 2, f"{read:,} bytes read for 100 names"


def test_the_loop_answers_while_a_scan_runs_and_requests_share_it(tmp_path, monkeypatch):
    from corecast.serve import meters
    # the boards in /dev/shm are not this test's (other runs make and remove them meanwhile)
    monkeypatch.setattr(meters, "status", lambda: (False, "not in this test"))
    big_array(tmp_path / "big.json")
    dash = Dashboard([str(tmp_path)], "127.0.0.1", 0)
    entered, release = threading.Event(), threading.Event()
    real_sniff = files.sniff

    def slow_sniff(p):                                   # a scan that takes as long as the test wants
        entered.set()
        release.wait(20)
        return real_sniff(p)
    monkeypatch.setattr(files, "sniff", slow_sniff)
    scans: list[int] = []
    real_scan = dash.registry.scan

    def scan():
        scans.append(1)
        real_scan()
    dash.registry.scan = scan

    async def fetch(client):
        first = asyncio.ensure_future(client.get("/api/state"))
        second = asyncio.ensure_future(client.get("/api/state"))
        assert await asyncio.to_thread(entered.wait, 20)             # the scan is running, in its thread
        page = await client.get("/")                                 # the loop answers meanwhile
        other = await client.get("/api/registry")
        waiting = [r.done() for r in (first, second)]
        release.set()
        a, b = await first, await second
        return page.status, other.status, waiting, (a.status, b.status), await a.json(), await b.json()

    page, other, done, status, a, b = run_api(dash, fetch)
    release.set()
    assert page == 200 and other == 200 and status == (200, 200), (status, a, b)
    assert done == [False, False], "a request finished while the scan it needs was still running"
    assert [f["name"] for f in a["files"]] == [f["name"] for f in b["files"]] == ["big.json"]
    assert a["left_out"] == []
    assert scans == [1]                                  # the second request waited for the first's scan


# ------------------------------------------------------------------ (2) what failed is not opened again
def test_an_unchanged_file_that_is_none_of_the_kinds_is_not_opened_again(tmp_path, monkeypatch):
    for i in range(200):
        (tmp_path / f"x{i:03d}.csv").touch()                         # empty: not a Dataset
    (tmp_path / "binary.json").write_bytes(b"{\x00}")
    (tmp_path / "ok.csv").write_text("cores,throughput\n1,10\n2,19\n")
    dash = Dashboard([str(tmp_path)], "127.0.0.1", 0)
    opened = counting_sniff(monkeypatch)
    dash.registry.scan()
    assert len(opened) == 202
    assert [e.path.name for e in dash.registry.files.values()] == ["ok.csv"]

    opened.clear()
    dash.registry.scan()
    dash.registry.scan()
    assert opened == []                                  # nothing changed: nothing opened

    (tmp_path / "x007.csv").write_text("cores,throughput\n1,10\n")   # it changed: looked at again
    dash.registry.scan()
    assert opened == [tmp_path / "x007.csv"]
    assert sorted(e.path.name for e in dash.registry.files.values()) == ["ok.csv", "x007.csv"]


def test_a_new_sidecar_makes_a_csv_a_recording(tmp_path):
    """The cache's key has the sidecar's too: a CSV's note may be written beside it later."""
    csv = tmp_path / "m.csv"
    csv.write_text("cores,elapsed_s\n")
    dash = Dashboard([str(tmp_path)], "127.0.0.1", 0)
    (tmp_path / "m.csv.meta.json").write_text('{"notes": {"meters": {}}}')
    dash.registry.scan()
    assert [(e.path.name, e.kind) for e in dash.registry.files.values()] == [("m.csv", "meters-recording")]


def test_a_large_recording_is_told_by_its_prefix_and_a_cut_one_is_not(tmp_path, monkeypatch):
    """corecast writes notes before the rows: a recording larger than the bound is still one; one
    cut short (it does not end as an object does) is a plain Dataset, as when it was parsed whole."""
    monkeypatch.setattr(files, "JSON_SNIFF_BYTES", 64 << 10)
    from corecast.dataset import Dataset
    ds = Dataset(cores=[4] * 20_000, metrics={"elapsed_s": [0.1 * i for i in range(20_000)]},
                 notes={"meters": {"blackboard": "b", "unavailable": {}}})
    text = ds.to_json()
    assert len(text) > 4 * files.JSON_SNIFF_BYTES
    (tmp_path / "rec.json").write_text(text)
    (tmp_path / "cut.json").write_text(text[:-200])
    (tmp_path / "late.json").write_text(text.replace('"notes"', '"other"', 1)[:-2] + ', "notes": {"meters": {}}}\n')
    assert files.sniff(tmp_path / "rec.json") == "meters-recording"
    assert files.sniff(tmp_path / "cut.json") == "dataset"
    assert files.sniff(tmp_path / "late.json") == "dataset"          # past the rows: not looked for


# ------------------------------------------------------------------ (3) the entry cap
def test_a_folder_scan_looks_at_a_bounded_number_of_names(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_FOLDER_ENTRIES", 5)
    monkeypatch.setattr(files, "MAX_FOLDER_NAMES", 50)
    many, other = tmp_path / "many", tmp_path / "other"
    many.mkdir()
    other.mkdir()
    for i in range(8):
        (many / f"d{i}.csv").write_text("cores,throughput\n1,10\n")
    for i in range(60):
        (other / f"n{i:02d}.txt").touch()                # not of the kinds shown, but names all the same
    dash = Dashboard([str(many), str(other)], "127.0.0.1", 0)

    async def fetch(client):
        return await (await client.get("/api/state")).json()

    st = run_api(dash, fetch)
    names = [f["name"] for f in st["files"]]
    assert len(names) == 5 and names == sorted(names) and set(names) <= {f"d{i}.csv" for i in range(8)}
    assert st["left_out"] == [
        f"{many}: more than 5 files: only the first 5 the folder lists are shown, the rest are left out",
        f"{other}: more than 50 names: only the first 50 the folder lists were looked at, the rest are left out"]

    monkeypatch.setattr(files, "MAX_FOLDER_ENTRIES", 10_000)    # within the bounds: all, and no note
    monkeypatch.setattr(files, "MAX_FOLDER_NAMES", 100_000)
    dash.registry.scan()
    assert len(dash.registry.files) == 8 and dash.registry.notes == []


# ------------------------------------------------------------------ (4) the boards in /dev/shm
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the test gives files to another uid")
def test_the_board_list_opens_no_other_users_file_and_reads_a_bounded_number_of_names(tmp_path, monkeypatch):
    """Anyone can make files in /dev/shm. The board list (read on every /api/state) opened each
    corecast-* name to look for the magic: 100,000 names planted by another user kept a
    worker 2.6 s per request, more without bound. Now another user's file is left out from its
    directory entry, never opened, and at most MAX_SHM_NAMES names are read, with a note."""
    from corecast.meters import board as B
    from corecast.meters import layout
    from corecast.serve import meters as M
    monkeypatch.setattr(B, "SHM", tmp_path)
    for i in range(30):
        p = tmp_path / f"corecast-planted{i:02d}"
        p.write_bytes(layout.MAGIC + b"\0" * 256)
        os.chown(p, 54321, 54321)                          # another user's: never a board to trust
    (tmp_path / "corecast-mine").write_bytes(layout.MAGIC + b"\0" * 256)     # ours, but damaged
    opened: list[str] = []
    real = B.read_head

    def read_head(path, n):
        opened.append(Path(path).name)
        return real(path, n)
    monkeypatch.setattr(B, "read_head", read_head)
    found = M.boards()
    assert opened == ["corecast-mine"]
    assert [b["name"] for b in found] == ["mine"] and found[0]["stale"]
    notes: list[str] = []
    assert len(M.boards(notes)) == 1 and notes == []

    monkeypatch.setattr(M, "MAX_SHM_NAMES", 10)
    assert len(M.boards(notes)) <= 1
    assert notes == [f"{tmp_path}: more than 10 names: only the first 10 were looked at for blackboards"]
