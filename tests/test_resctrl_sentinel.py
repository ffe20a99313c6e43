"""`corecast stat -V llc_occupancy|mem_bw` makes a resctrl monitoring group
(mon_groups/corecast-PID-PID), which holds one of the CPU's few RMIDs until it is removed. Only
VirtualSampler.close removed it, so a SIGKILL of corecast left it behind; it is now named to
corecast-sentinel before it is made (as occupancy.Group's control group is) and forgotten once
removed, and the sentinel removes it when corecast dies.

This machine has no resctrl: a fake tree checks the order (named, then made; removed, then
forgotten); the SIGKILL proof stands a cgroup hierarchy in for resctrl, since the sentinel
removes only what lies on a cgroup or resctrl file system (it never rmdirs a plain folder named
as a cgroup), and both are removed the same way: rmdir."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corecast.collect import procs, sources
from corecast.collect.stat.virtual import VirtualSampler


def fake_resctrl(root: Path) -> Path:
    """sys_root with fs/resctrl laid out as resctrl_group looks for it."""
    base = root / "fs" / "resctrl"
    (base / "info" / "L3_MON").mkdir(parents=True)
    (base / "mon_groups").mkdir()
    return root


@pytest.fixture
def told(monkeypatch):
    """What the sentinel is told: (verb, path, whether the path existed then)."""
    out: list[tuple[str, Path, bool]] = []
    monkeypatch.setattr(procs, "track_cgroup", lambda p: out.append(("cgroup", Path(p), Path(p).exists())))
    monkeypatch.setattr(procs, "untrack", lambda p: out.append(("drop", Path(p), Path(p).exists())))
    return out


def test_the_group_is_named_to_the_sentinel_before_it_is_made_and_forgotten_once_removed(tmp_path, told):
    root = fake_resctrl(tmp_path)
    s = VirtualSampler(["llc_occupancy", "mem_bw"], os.getpid(), sys_root=root)
    path = root / "fs/resctrl/mon_groups" / f"corecast-{os.getpid()}-{os.getpid()}"
    assert s._resctrl is not None and s._resctrl.path == path and path.is_dir()
    assert told == [("cgroup", path, False)]             # named while it did not exist yet
    s.close()
    assert not path.exists()
    assert told == [("cgroup", path, False), ("drop", path, False)]


def test_a_group_that_cannot_be_made_is_forgotten_and_one_that_cannot_be_removed_is_not(tmp_path, told):
    root = fake_resctrl(tmp_path)
    (root / "fs/resctrl/mon_groups").rmdir()            # mkdir fails (as with no free RMID)
    g = sources.resctrl_group("corecast-1-2", root)
    assert isinstance(g, sources.Unavailable) and "cannot create monitoring group" in g.reason
    path = root / "fs/resctrl/mon_groups/corecast-1-2"
    assert told == [("cgroup", path, False), ("drop", path, False)]
    told.clear()
    (root / "fs/resctrl/mon_groups").mkdir()
    g = sources.resctrl_group("corecast-1-2", root)
    (g.path / "busy").mkdir()                          # rmdir fails: still the sentinel's to remove
    g.remove()
    assert g.path.is_dir() and told == [("cgroup", g.path, False)]


def _cgroup_base() -> Path | None:
    """A folder on a cgroup file system this test may make cgroups in (root only)."""
    if os.geteuid() != 0:
        return None
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    for f in (ln.split() for ln in mounts):
        if len(f) >= 3 and f[2] in ("cgroup2", "cgroup"):
            probe = Path(f[1]) / f"corecast-test-probe-{os.getpid()}"
            try:
                probe.mkdir()
                probe.rmdir()
                return Path(f[1])
            except OSError:
                continue
    return None


CHILD = r'''
import os, sys, time
from corecast.collect.stat.virtual import VirtualSampler
from pathlib import Path
s = VirtualSampler(["llc_occupancy"], os.getpid(), sys_root=Path(sys.argv[1]))
assert s._resctrl is not None, s.unavailable
print(s._resctrl.path, flush=True)
time.sleep(120)
'''


@pytest.mark.skipif(_cgroup_base() is None, reason="needs root and a cgroup hierarchy to stand in for resctrl")
def test_sigkill_of_corecast_leaves_no_monitoring_group(tmp_path):
    base = _cgroup_base()
    root = base / f"corecast-test-resctrl-{os.getpid()}"
    made = [root, root / "fs", root / "fs/resctrl", root / "fs/resctrl/info", root / "fs/resctrl/info/L3_MON",
            root / "fs/resctrl/mon_groups"]
    for d in made:
        d.mkdir()
    p = None
    try:
        p = subprocess.Popen([sys.executable, "-c", CHILD, str(root)], stdout=subprocess.PIPE, text=True)
        group = Path(p.stdout.readline().strip())
        assert group.parent == root / "fs/resctrl/mon_groups" and group.is_dir()
        p.kill()                                          # no close(), no atexit: only the sentinel
        assert p.wait(timeout=30) == -signal.SIGKILL
        end = time.monotonic() + 10
        while group.exists() and time.monotonic() < end:
            time.sleep(0.02)
        assert not group.exists()
    finally:
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()
        for d in [*(root / "fs/resctrl/mon_groups").glob("*"), *reversed(made)]:
            if d.is_dir():
                d.rmdir()
