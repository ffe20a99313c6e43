"""Cachegrind as the reference for the simulator (tests/test_sim_cachegrind.py,
tests/test_sim_capture_qemu.py): run a command under cachegrind with an I1/D1/LL configuration,
and the simulator's counts of a trace under the same configuration, named as cachegrind names
them.

Cachegrind simulates I1, D1 and a unified LL, each LRU, write-allocate, the LL filled on every
miss with no back-invalidation (corecast's "non-inclusive"), and a line-straddling miss sends the
whole access on to the LL (corecast's `straddle_all`). It counts a read-modify-write as a data
read.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Sequence

from corecast.sim.engine import SimOptions, simulate
from corecast.sim.machine import parse_machine

# Every run gets the same small environment: the dynamic loader's work (and so the
# instruction count) depends on the environment, which pytest changes from test to test.
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}

Config = tuple[tuple[int, int, int], tuple[int, int, int], tuple[int, int, int]]


def cachegrind(cmd: Sequence[str], cfg: Config, tmp: Path) -> dict[str, int]:
    """Cachegrind's summary counts (Ir, I1mr, ILmr, Dr, D1mr, DLmr, Dw, D1mw, DLmw)."""
    (i1, d1, ll) = cfg
    out = tmp / "cg.out"
    subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--branch-sim=no",
                    f"--I1={i1[0]},{i1[1]},{i1[2]}", f"--D1={d1[0]},{d1[1]},{d1[2]}",
                    f"--LL={ll[0]},{ll[1]},{ll[2]}", f"--cachegrind-out-file={out}",
                    *map(str, cmd)], check=True, capture_output=True, env=ENV)
    events = summary = None
    for line in out.read_text().splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:"):
            summary = [int(x) for x in line.split()[1:]]
    assert events and summary
    return dict(zip(events, summary))


def machine(cfg: Config):
    (i1, d1, ll) = cfg
    return parse_machine({"name": "cachegrind-like", "frequency_hz": 1e9, "cache": [
        {"level": 1, "kind": "instruction", "size": i1[0], "ways": i1[1], "line_size": i1[2]},
        {"level": 1, "kind": "data", "size": d1[0], "ways": d1[1], "line_size": d1[2]},
        {"level": 2, "kind": "unified", "size": ll[0], "ways": ll[1], "line_size": ll[2],
         "policy": "non-inclusive"}]})


def ours(res) -> dict[str, int]:
    """A simulation result's counts under cachegrind's names."""
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


def simulate_like_cachegrind(trace, cfg: Config, *, straddle_all: bool = True):
    """The simulator on `trace` with cachegrind's rules (no TLBs)."""
    return simulate(trace, machine(cfg), options=SimOptions(tlb=False, straddle_all=straddle_all))
