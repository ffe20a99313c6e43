"""The QEMU user-mode capture back end (native/qemu/capture_plugin.c, sim/capture.py):
the same records lackey gives, from the same program, much faster."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from corecast.errors import UserError
from corecast.sim import native as N
from corecast.sim.capture import capture, choose_backend, objects_from_maps, qemu_path
from corecast.sim.engine import SimOptions, simulate
from corecast.sim.trace import read_trace

HERE = Path(__file__).resolve().parent
SRC = HERE / "data" / "sim" / "cgprog.c"
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}

pytestmark = pytest.mark.skipif(qemu_path() is None or shutil.which("gcc") is None,
                                reason="needs qemu-x86_64 and gcc (setup/debian-packages.txt)")


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("q")
    exe = d / "cgprog"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(SRC)], check=True)
    return exe


@pytest.fixture(scope="module")
def traces(program, tmp_path_factory):
    d = tmp_path_factory.mktemp("qtrace")
    out = {}
    for be in ("qemu", "lackey"):
        if be == "lackey" and shutil.which("valgrind") is None:
            continue
        info = capture([str(program)], d / f"{be}.cctrace", annotate=False, env=ENV, backend=be)
        assert info.exit_status == 0
        out[be] = (info, read_trace(d / f"{be}.cctrace"))
    return out


def test_records_are_the_programs(traces):
    info, tr = traces["qemu"]
    recs = np.concatenate(list(tr.chunks(1 << 22)))
    kinds = np.bincount(recs["kind"], minlength=7)
    assert info.instructions == kinds[N.KIND_FETCH] > 500_000
    assert kinds[N.KIND_LOAD] > 10_000 and kinds[N.KIND_STORE] > 10_000
    assert kinds[N.KIND_MODIFY] > 1_000            # the program's read-modify-writes, merged
    assert tr.meta["source"] == "qemu" and tr.meta["exit_status"] == 0
    fetch = recs[recs["kind"] == N.KIND_FETCH]
    assert 1 <= fetch["size"].min() and fetch["size"].max() <= 15   # x86 instruction lengths
    assert any(o["path"].endswith("cgprog") for o in tr.meta["objects"])


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_same_program_same_data_misses_as_lackey(traces):
    """Data-cache misses agree within 1%; instruction counts differ by the C library's start-up,
    which picks its string routines by the CPU it is shown (QEMU's and valgrind's differ)."""
    (qi, qt), (li, lt) = traces["qemu"], traces["lackey"]
    assert abs(qi.instructions / li.instructions - 1) < 0.05
    m = {"name": "d1", "frequency_hz": 1e9, "cache": [
        {"level": 1, "kind": "data", "size": 16384, "ways": 4, "line_size": 64},
        {"level": 1, "kind": "instruction", "size": 32768, "ways": 8, "line_size": 64}]}
    from corecast.sim.machine import parse_machine
    miss = {}
    for be, (_, tr) in traces.items():
        res = simulate(tr.path, parse_machine(m), options=SimOptions(tlb=False))
        d = res.cache("L1D")["misses"]
        miss[be] = sum(d.values())
    assert abs(miss["qemu"] / miss["lackey"] - 1) < 0.01, miss


def test_hex_marker_without_annotation(program, tmp_path):
    nm = subprocess.run(["nm", str(program)], capture_output=True, text=True).stdout
    addr = next(int(line.split()[0], 16) for line in nm.splitlines() if line.endswith(" handle"))
    # the program is position-independent: find where it was loaded from a first capture
    first = capture([str(program)], tmp_path / "a.cctrace", annotate=False, env=ENV, backend="qemu")
    bias = next(int(o["bias"], 16) for o in read_trace(first.path).meta["objects"]
                if o["path"].endswith("cgprog"))
    info = capture([str(program)], tmp_path / "b.cctrace", annotate=False, env=ENV, backend="qemu",
                   markers=[hex(addr + bias)])
    recs = np.concatenate(list(read_trace(info.path).chunks(1 << 22)))
    marks = np.flatnonzero(recs["kind"] == N.KIND_MARKER)
    assert len(marks) == 40                       # REQUESTS calls of handle()
    assert np.all(recs["kind"][marks + 1] == N.KIND_FETCH)
    assert np.all(recs["addr"][marks + 1] == addr + bias)


def test_objects_from_maps_leaves_the_host_out(tmp_path):
    maps = tmp_path / "maps"
    exe = shutil.which("true")
    maps.write_text(
        f"4000000000-4000003000 r--p 00000000 fe:00 1   {exe}\n"
        f"4000003000-4000004000 r-xp 00003000 fe:00 1   {exe}\n"
        f"5600000000-5600100000 r--p 00000000 fe:00 2   /usr/bin/qemu-x86_64\n"
        f"7f00000000-7f00003000 r--p 00000000 fe:00 3   {exe}\n")
    objs = objects_from_maps(maps, exclude=["/usr/bin/qemu-x86_64"])
    assert [(o.path, o.avma) for o in objs] == [(exe, 0x4000000000)]


def test_backend_choice():
    assert choose_backend("auto") == "qemu"
    assert choose_backend("lackey") == "lackey"
    with pytest.raises(UserError, match="choose auto, qemu or lackey"):
        choose_backend("pin")


def test_failing_program_gives_a_trace_and_its_status(tmp_path):
    info = capture(["sh", "-c", "exit 3"], tmp_path / "f.cctrace", annotate=False, env=ENV, backend="qemu")
    assert info.exit_status == 3
    assert any("status 3" in w for w in info.warnings)
