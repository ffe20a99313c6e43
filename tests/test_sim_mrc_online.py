"""The online miss curve (collect/occupancy.py, `corecast sim mrc-online`) through a fake resctrl
tree laid out like /sys/fs/resctrl: the ways are restricted as asked, in every L3 domain, before
the program's first instruction; occupancy and memory traffic are read from mon_data and summed
over the domains. The program run is a stand-in for the hardware: it reads the schemata its group
was given and writes what a cache of that many ways would show."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from corecast.collect import occupancy
from corecast.errors import UserError

from conftest import marked_pids

WAY = 2 << 20                     # a 24 MiB, 12-way L3: 2 MiB a way
WORKING_SET = 6 << 20

HARDWARE = r'''
import os, sys, time
from pathlib import Path
group, log = Path(sys.argv[1]), Path(sys.argv[2])
WAY, WS = %d, %d
me = str(os.getpid())
if me not in (group / "tasks").read_text().split():
    sys.exit(3)                                   # not placed in the group before exec
# the monitoring group of this run: the one whose tasks hold this process
mon = [m for m in (group / "mon_groups").iterdir() if me in (m / "tasks").read_text().split()]
if len(mon) != 1:
    sys.exit(4)
masks = {}
for line in (group / "schemata").read_text().splitlines():
    name, _, rest = line.strip().partition(":")
    masks[name] = [int(v.split("=")[1], 16) for v in rest.split(";")]
ways = bin(masks["L3" if "L3" in masks else "L3DATA"][0]).count("1")
cache = ways * WAY
(group / "size").write_text("".join(f"{n}:0={cache};1={cache}\n" for n in masks))
held = min(cache, WS)
misses = WS if cache >= WS else WS + 10 * (WS - cache)        # lines fetched, in bytes
for dom, share in (("mon_L3_00", 2), ("mon_L3_01", 1)):        # two thirds and one third
    d = mon[0] / "mon_data" / dom
    (d / "llc_occupancy").write_text(str(held * share // 3))
    total = int((d / "mbm_total_bytes").read_text())
    (d / "mbm_total_bytes").write_text(str(total + misses * share // 3))
with log.open("a") as fh:
    fh.write(repr(masks) + "\n")
time.sleep(0.3)
sys.exit(int(os.environ.get("EXIT", "0")))
''' % (WAY, WORKING_SET)


def fake_resctrl(tmp: Path, *, cdp: bool = False, min_bits: int = 1) -> Path:
    root = tmp / "resctrl"
    (root / "info" / "L3").mkdir(parents=True)
    (root / "info" / "L3_MON").mkdir()
    (root / "info" / "L3" / "cbm_mask").write_text("fff\n")
    (root / "info" / "L3" / "min_cbm_bits").write_text(f"{min_bits}\n")
    (root / "info" / "L3" / "num_closids").write_text("16\n")
    (root / "info" / "L3_MON" / "mon_features").write_text("llc_occupancy\nmbm_total_bytes\nmbm_local_bytes\n")
    (root / "info" / "last_cmd_status").write_text("ok\n")
    lines = ["L3CODE:0=fff;1=fff", "L3DATA:0=fff;1=fff"] if cdp else ["L3:0=fff;1=fff"]
    (root / "schemata").write_text("".join(f"    {ln}\n" for ln in lines + ["MB:0=100;1=100"]))
    # the groups the kernel would make at mkdir (the test runs in this process: their names are
    # known): the control group, and a monitoring group (a fresh RMID) for each run
    g = root / f"corecast-mrc-{os.getpid()}"
    for mon in [g] + [g / "mon_groups" / f"run{n}" for n in range(1, 5)]:
        for dom in ("mon_L3_00", "mon_L3_01"):
            (mon / "mon_data" / dom).mkdir(parents=True)
            (mon / "mon_data" / dom / "llc_occupancy").write_text("0\n")
            (mon / "mon_data" / dom / "mbm_total_bytes").write_text("1000\n")
        (mon / "tasks").write_text("")
    (g / "schemata").write_text("".join(f"{ln}\n" for ln in lines))
    (tmp / "hw.py").write_text(HARDWARE)
    return root


def expected(ways: int) -> tuple[int, int]:
    cache = ways * WAY
    held = min(cache, WORKING_SET)
    misses = WORKING_SET if cache >= WORKING_SET else WORKING_SET + 10 * (WORKING_SET - cache)
    return held * 2 // 3 + held // 3, misses * 2 // 3 + misses // 3


@pytest.mark.slow
def test_ways_restricted_and_measured(tmp_path):
    root = fake_resctrl(tmp_path)
    l3 = occupancy.probe(root)
    assert isinstance(l3, occupancy.L3), l3
    assert (l3.ways, l3.domains, l3.resources, l3.min_bits) == (12, ("0", "1"), ("L3",), 1)
    assert "llc_occupancy" in l3.monitoring
    log = tmp_path / "seen.log"
    res = occupancy.measure([sys.executable, str(tmp_path / "hw.py"), str(root / f"corecast-mrc-{os.getpid()}"),
                             str(log)], occupancy.parse_ways("1,3,6,12", l3), l3, interval=0.02)
    # the most ways first; contiguous masks from the lowest way, in both domains, seen by the
    # program itself (so written before it ran)
    assert [p.ways for p in res.points] == [12, 6, 3, 1]
    assert [p.mask for p in res.points] == [0xfff, 0x3f, 0x7, 0x1]
    seen = [eval(line) for line in log.read_text().splitlines()]
    assert seen == [{"L3": [m, m]} for m in (0xfff, 0x3f, 0x7, 0x1)]
    for p in res.points:
        occ, traffic = expected(p.ways)
        assert p.exit_status == 0       # 3, 4: not in the control / monitoring group at exec
        assert p.cache_bytes == p.ways * WAY            # the kernel's size file
        assert p.occupancy_peak == occ and p.samples >= 2
        assert p.memory_bytes == traffic and p.memory_lines == traffic / 64
    # the curve: traffic falls as ways are added until the working set fits (3 ways = 6 MiB)
    traffic = {p.ways: p.memory_bytes for p in res.points}
    assert traffic[1] > traffic[3] == traffic[6] == traffic[12]
    assert any("could not be removed" in n for n in res.notes)   # a fake group is a plain dir
    doc = res.to_dict()
    json.dumps(doc)
    assert doc["points"][-1]["memory_lines"] == traffic[1] / 64


def test_code_and_data_prioritisation(tmp_path):
    """With CDP the L3 has code and data lines: both are restricted alike."""
    root = fake_resctrl(tmp_path, cdp=True)
    l3 = occupancy.probe(root)
    assert l3.resources == ("L3CODE", "L3DATA")
    assert occupancy.schemata(l3, 0x3) == "L3CODE:0=3;1=3\nL3DATA:0=3;1=3\n"
    log = tmp_path / "seen.log"
    res = occupancy.measure([sys.executable, str(tmp_path / "hw.py"), str(root / f"corecast-mrc-{os.getpid()}"),
                             str(log)], [2], l3, interval=0.02)
    assert eval(log.read_text()) == {"L3CODE": [3, 3], "L3DATA": [3, 3]}
    assert res.points[0].cache_bytes == 2 * WAY


def test_masks_and_way_lists(tmp_path):
    root = fake_resctrl(tmp_path, min_bits=2)
    l3 = occupancy.probe(root)
    assert occupancy.parse_ways("all", l3) == list(range(2, 13))
    assert occupancy.parse_ways("2-4,8", l3) == [2, 3, 4, 8]
    with pytest.raises(UserError, match="allows 2 to 12 ways"):
        occupancy.parse_ways("1", l3)
    with pytest.raises(UserError, match="allows 2 to 12 ways"):
        occupancy.parse_ways("13", l3)
    with pytest.raises(UserError, match="give all, or way counts"):
        occupancy.parse_ways("many", l3)
    # a cache whose mask does not start at way 0 keeps its masks inside it
    shifted = occupancy.L3(root, 0xff0, 1, ("0",), ("L3",), frozenset(), None)
    assert occupancy.way_mask(shifted, 3) == 0x70


def test_refused_mask_names_the_kernels_reason(tmp_path):
    root = fake_resctrl(tmp_path)
    g = root / f"corecast-mrc-{os.getpid()}"
    (g / "schemata").unlink()
    (g / "schemata").mkdir()                            # writing it fails, as a refused mask does
    (root / "info" / "last_cmd_status").write_text("Mask out of range\n")
    with pytest.raises(UserError, match="refused the mask 0xfff.*Mask out of range"):
        occupancy.measure(["true"], [12], occupancy.probe(root))


@pytest.mark.slow
def test_cli_with_a_fake_tree(cli, tmp_path):
    root = fake_resctrl(tmp_path)
    hw = [sys.executable, str(tmp_path / "hw.py"), str(root / f"corecast-mrc-{os.getpid()}"), str(tmp_path / "l")]
    r = cli("sim", "mrc-online", "--resctrl", root, "--ways", "1,6", "--interval", "0.02", "--json", "--", *hw)
    assert r.code == 0, r.err
    doc = r.json()
    assert [p["ways"] for p in doc["points"]] == [6, 1]
    assert doc["points"][1]["memory_bytes"] == expected(1)[1]
    png, csv = tmp_path / "online.png", tmp_path / "online.csv"
    r = cli("sim", "mrc-online", "--resctrl", root, "--ways", "1,2,6", "--interval", "0.02",
            "--plot", png, "-o", csv, "--", *hw)
    assert r.code == 0, r.err
    assert "occupancy peak" in r.out and "memory traffic" in r.out
    assert png.stat().st_size > 10_000
    from corecast import dataset
    ds = dataset.load(csv)
    assert list(ds.column("ways")) == [6, 2, 1]
    assert list(ds.column("memory_bytes")) == [expected(w)[1] for w in (6, 2, 1)]


def test_cli_where_there_is_no_resctrl(cli, tmp_path):
    """This VM (and most): one line saying why, exit 2."""
    r = cli("sim", "mrc-online", "--resctrl", tmp_path / "none", "--", "true")
    assert r.code == 2 and "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert "no cache allocation" in r.err or "not mounted" in r.err


def test_cli_mistakes(cli, tmp_path):
    root = fake_resctrl(tmp_path)
    r = cli("sim", "mrc-online", "--resctrl", root)
    assert r.code == 2 and "no program given" in r.err
    r = cli("sim", "mrc-online", "--resctrl", root, "--ways", "0", "--", "true")
    assert r.code == 2 and "allows 1 to 12 ways" in r.err
    r = cli("sim", "mrc-online", "--resctrl", root, "--interval", "0", "--", "true")
    assert r.code == 2 and "--interval" in r.err


# The program of each run goes through corecast-launch, as measure, stat and sched run do: it was
# forked by perf.launch, so a SIGKILL of corecast left it (and its children) running, and what
# it left when it ended (a child that escaped with setsid) ran on.
KILLED = r'''
import os, sys
from pathlib import Path
root = Path(sys.argv[1])
g = root / f"corecast-mrc-{os.getpid()}"              # the group the kernel would make, for this pid
for mon in (g, g / "mon_groups" / "run1", g / "mon_groups" / "run2"):
    (mon / "mon_data" / "mon_L3_00").mkdir(parents=True, exist_ok=True)
    (mon / "tasks").write_text("")
(g / "schemata").write_text("L3:0=fff;1=fff\n")
from corecast.cli import main
sys.exit(main(["sim", "mrc-online", "--resctrl", str(root), "--ways", sys.argv[2], "--interval", "0.05", "--json",
               "--", "sh", "-c", sys.argv[3]]))
'''


def _marked(token: str) -> list[int]:
    """Processes whose environment carries CORECAST_MRC_MARK=token."""
    return marked_pids("CORECAST_MRC_MARK", token)


def _gone(token: str, wait_s: float = 10.0) -> list[int]:
    import time
    end = time.monotonic() + wait_s
    while _marked(token) and time.monotonic() < end:
        time.sleep(0.05)
    return _marked(token)


def test_each_run_goes_through_the_launcher_and_the_sentinel(tmp_path, monkeypatch):
    import signal
    import subprocess
    import time
    root = fake_resctrl(tmp_path)
    (tmp_path / "killed.py").write_text(KILLED)
    token = f"{os.getpid()}-{time.monotonic_ns()}"
    env = dict(os.environ, CORECAST_MRC_MARK=token)
    left = []
    try:
        # what a run leaves when it ends is killed with it
        r = subprocess.run([sys.executable, str(tmp_path / "killed.py"), str(root), "12", "setsid sleep 60 & exit 0"],
                           env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        left += _gone(token)
        # SIGKILL of corecast in the middle of a run: the run's whole tree goes with it
        p = subprocess.Popen([sys.executable, str(tmp_path / "killed.py"), str(root), "12",
                              "setsid sleep 60 & sh -c 'sleep 60' & sleep 60"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + 60
        while len(_marked(token)) < 6 and time.monotonic() < end:     # corecast, launcher, sh and its three
            time.sleep(0.05)
        assert len(_marked(token)) >= 6, _marked(token)
        p.kill()
        p.wait()
        left += _gone(token)
    finally:
        for pid in _marked(token):
            os.kill(pid, signal.SIGKILL)
    assert left == []
    # the group is named to corecast-sentinel before it is made (a resctrl group it removes)
    told = []
    monkeypatch.setattr(occupancy, "track_cgroup", told.append)
    occupancy.Group(occupancy.probe(root), f"corecast-mrc-{os.getpid()}")
    assert told == [root / f"corecast-mrc-{os.getpid()}"]
