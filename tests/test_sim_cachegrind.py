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

import shutil
import subprocess
from pathlib import Path

import pytest
from cgref import ENV, cachegrind, ours, simulate_like_cachegrind

from corecast.sim.capture import capture

HERE = Path(__file__).resolve().parent
SRC = HERE / "data" / "sim" / "cgprog.c"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("gcc") is None,
                                 reason="needs valgrind and gcc (setup/debian-packages.txt)")]

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


@pytest.mark.slow
@pytest.mark.parametrize("cfg", CONFIGS, ids=["32K-32K-1M", "8K-16K-128K"])
def test_identical_to_cachegrind(program, trace, cfg, tmp_path):
    cg = cachegrind([program], cfg, tmp_path)
    res = simulate_like_cachegrind(trace, cfg)
    mine = ours(res)
    assert mine == {k: cg[k] for k in mine}
    # the program's deliberate line-straddling stores and loads are there
    assert res.accesses["split_loads"] >= 200 and res.accesses["split_stores"] >= 200


@pytest.mark.slow
def test_line_rule_differs_only_below_l1(program, trace, tmp_path):
    # corecast's default sends only the missing line of a straddling access to the next
    # level: L1 counts are unchanged, LL counts move by at most the straddling accesses.
    cfg = CONFIGS[1]
    cg = cachegrind([program], cfg, tmp_path)
    res = simulate_like_cachegrind(trace, cfg, straddle_all=False)
    mine = ours(res)
    for k in ("Ir", "I1mr", "Dr", "D1mr", "Dw", "D1mw"):
        assert mine[k] == cg[k]
    straddles = sum(res.accesses[k] for k in ("split_loads", "split_stores"))
    fetch_straddles = res.instructions  # an upper bound for instruction straddles
    assert abs(mine["DLmr"] - cg["DLmr"]) + abs(mine["DLmw"] - cg["DLmw"]) <= straddles
    assert abs(mine["ILmr"] - cg["ILmr"]) <= fetch_straddles
