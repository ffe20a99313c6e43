"""Proof against valgrind's cachegrind: the same real program, the same L1/LL configuration,
the same miss counts.

The program (tests/data/sim/cgprog.c) runs once under lackey (our capture) and once under
cachegrind per configuration. Cachegrind simulates I1, D1 and a unified LL, each LRU,
write-allocate, the LL filled on every miss with no back-invalidation (corecast's
"non-inclusive"), and a line-straddling miss sends the whole access on to the LL (corecast's
`straddle_all`). It counts a read-modify-write as a data read. With that configuration every
one of cachegrind's nine counters must match exactly.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from corecast.sim.capture import capture
from corecast.sim.engine import SimOptions, simulate
from corecast.sim.machine import parse_machine

HERE = Path(__file__).resolve().parent
SRC = HERE / "data" / "sim" / "cgprog.c"

pytestmark = pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("gcc") is None,
                                reason="needs valgrind and gcc (setup/debian-packages.txt)")

# Both runs get the same small environment: the dynamic loader's work (and so the
# instruction count) depends on the environment, which pytest changes from test to test.
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}

CONFIGS = [
    # (I1, D1, LL) as size, ways, line
    ((32768, 8, 64), (32768, 8, 64), (1048576, 16, 64)),
    ((8192, 2, 64), (16384, 4, 64), (131072, 8, 64)),
]


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cg")
    exe = d / "cgprog"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(SRC)], check=True)
    return exe


@pytest.fixture(scope="module")
def trace(program, tmp_path_factory):
    out = tmp_path_factory.mktemp("cgtrace") / "cgprog.cctrace"
    info = capture([str(program)], out, annotate=False, env=ENV)
    assert info.exit_status == 0
    return out


def cachegrind(program: Path, cfg, tmp: Path) -> dict[str, int]:
    (i1, d1, ll) = cfg
    out = tmp / "cg.out"
    subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--branch-sim=no",
                    f"--I1={i1[0]},{i1[1]},{i1[2]}", f"--D1={d1[0]},{d1[1]},{d1[2]}",
                    f"--LL={ll[0]},{ll[1]},{ll[2]}", f"--cachegrind-out-file={out}",
                    str(program)], check=True, capture_output=True, env=ENV)
    events = summary = None
    for line in out.read_text().splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:"):
            summary = [int(x) for x in line.split()[1:]]
    assert events and summary
    return dict(zip(events, summary))


def machine(cfg):
    (i1, d1, ll) = cfg
    return parse_machine({"name": "cachegrind-like", "frequency_hz": 1e9, "cache": [
        {"level": 1, "kind": "instruction", "size": i1[0], "ways": i1[1], "line_size": i1[2]},
        {"level": 1, "kind": "data", "size": d1[0], "ways": d1[1], "line_size": d1[2]},
        {"level": 2, "kind": "unified", "size": ll[0], "ways": ll[1], "line_size": ll[2],
         "policy": "non-inclusive"}]})


def ours(res) -> dict[str, int]:
    l1i, l1d, ll = res.cache("L1I"), res.cache("L1D"), res.cache("L2")
    return {
        "Ir": l1i["accesses"]["fetch"], "I1mr": l1i["misses"]["fetch"],
        "ILmr": ll["misses"]["fetch"],
        "Dr": l1d["accesses"]["load"] + l1d["accesses"]["modify"],
        "D1mr": l1d["misses"]["load"] + l1d["misses"]["modify"],
        "DLmr": ll["misses"]["load"] + ll["misses"]["modify"],
        "Dw": l1d["accesses"]["store"], "D1mw": l1d["misses"]["store"],
        "DLmw": ll["misses"]["store"],
    }


@pytest.mark.slow
@pytest.mark.parametrize("cfg", CONFIGS, ids=["32K-32K-1M", "8K-16K-128K"])
def test_identical_to_cachegrind(program, trace, cfg, tmp_path):
    cg = cachegrind(program, cfg, tmp_path)
    res = simulate(trace, machine(cfg), options=SimOptions(tlb=False, straddle_all=True))
    mine = ours(res)
    assert mine == {k: cg[k] for k in mine}
    # the program's deliberate line-straddling stores and loads are there
    assert res.accesses["split_loads"] >= 200 and res.accesses["split_stores"] >= 200


@pytest.mark.slow
def test_line_rule_differs_only_below_l1(program, trace, tmp_path):
    # corecast's default sends only the missing line of a straddling access to the next
    # level: L1 counts are unchanged, LL counts move by at most the straddling accesses.
    cfg = CONFIGS[1]
    cg = cachegrind(program, cfg, tmp_path)
    res = simulate(trace, machine(cfg), options=SimOptions(tlb=False))
    mine = ours(res)
    for k in ("Ir", "I1mr", "Dr", "D1mr", "Dw", "D1mw"):
        assert mine[k] == cg[k]
    straddles = sum(res.accesses[k] for k in ("split_loads", "split_stores"))
    fetch_straddles = res.instructions  # an upper bound for instruction straddles
    assert abs(mine["DLmr"] - cg["DLmr"]) + abs(mine["DLmw"] - cg["DLmw"]) <= straddles
    assert abs(mine["ILmr"] - cg["ILmr"]) <= fetch_straddles
