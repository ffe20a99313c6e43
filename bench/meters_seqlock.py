"""The blackboard's seqlock: how fast a writer rewrites records with and without 4 readers
checking every record (corecast-meters-stress, through corecast_meters.h only).

The issue asks that readers do not slow the writer by more than 10%. On a 2-CPU machine the
readers also compete with the writer for CPUs, which is not what the seqlock costs; so the
writer is pinned to CPU 0 and the 4 readers share CPU 1 (taskset), and the figure is the
writer's rewrites per second of its own CPU time (and per second of wall time). The runs
with and without readers are interleaved and repeated (--reps, default 5); medians, spread and
their ratio are printed, with every reader's torn-read count (must be 0).

    .venv/bin/python bench/meters_seqlock.py [--seconds 3] [--reps 5] [--records 64]
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

from corecast.native import native_path  # noqa: E402


def run(stress: str, seconds: float, records: int, readers: int, rep: int) -> tuple[float, float, int, int]:
    name = f"bench-seq-{os.getpid()}-{rep}-{readers}"
    w = subprocess.Popen(["taskset", "-c", "0", stress, "write", name, str(seconds), str(records)],
                         stdout=subprocess.PIPE, text=True)
    rs = [subprocess.Popen(["taskset", "-c", "1", stress, "read", name, str(seconds - 0.2)], stdout=subprocess.PIPE,
                           text=True) for _ in range(readers)]
    out = w.communicate()[0]
    torn = reads = 0
    for r in rs:
        o = r.communicate()[0]
        m = re.search(r"reads (\d+) torn (\d+)", o)
        reads += int(m.group(1))
        torn += int(m.group(2))
    try:
        os.unlink(f"/dev/shm/corecast-{name}")
    except OSError:
        pass
    m = re.search(r"writes (\d+) seconds ([\d.]+) cpu_s ([\d.]+)", out)
    writes, wall, cpu = int(m.group(1)), float(m.group(2)), float(m.group(3))
    return writes / cpu, writes / wall, reads, torn


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--records", type=int, default=64)
    a = ap.parse_args()
    _machine.header("corecast meters: seqlock writer rate with and without 4 readers")
    print(f"# load before: {os.getloadavg()}")
    if (os.cpu_count() or 1) < 2:
        print("needs 2 CPUs (writer and readers pinned apart)")
        return
    stress = str(native_path("corecast-meters-stress"))
    res: dict[int, list[tuple[float, float, int, int]]] = {0: [], 4: []}
    for rep in range(a.reps):
        for readers in (0, 4):
            res[readers].append(run(stress, a.seconds, a.records, readers, rep))
            cpu_rate, wall_rate, reads, torn = res[readers][-1]
            print(f"  rep {rep + 1} readers {readers}: {cpu_rate / 1e6:.1f} M writes per CPU-second, "
                  f"{wall_rate / 1e6:.1f} M per second; {reads / 1e6:.1f} M reads, {torn} torn", flush=True)
        time.sleep(0.2)
    print(f"# load after: {os.getloadavg()}")
    med = {}
    for readers, v in res.items():
        cpu = [x[0] for x in v]
        wall = [x[1] for x in v]
        med[readers] = (statistics.median(cpu), statistics.median(wall))
        print(f"readers {readers}: writer {med[readers][0] / 1e6:.1f} M writes/CPU-s (min {min(cpu) / 1e6:.1f}, "
              f"max {max(cpu) / 1e6:.1f}); {med[readers][1] / 1e6:.1f} M writes/s wall; "
              f"torn reads {sum(x[3] for x in v)} in {sum(x[2] for x in v) / 1e6:.1f} M")
    print(f"ratio with/without readers: {med[4][0] / med[0][0]:.3f} per CPU-second, "
          f"{med[4][1] / med[0][1]:.3f} per wall second")


if __name__ == "__main__":
    main()
