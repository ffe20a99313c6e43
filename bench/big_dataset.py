"""What `corecast predict` costs on a large Dataset file (issue 25: a 50 MB CSV took 264 s and
3.2 GB): wall time and peak memory of one `predict` on CSVs of growing row counts, up to the
50 MB one (3.4 million rows, past the 1,000,000-row bound: refused, and how fast).

    python bench/big_dataset.py [--rows 100000,1000000] [--mb 50]

Each run is a child process (`/usr/bin/time -f` for the peak RSS, when present).
"""
from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import header  # noqa: E402


def write_csv(path: Path, rows: int | None, mb: float | None) -> int:
    rnd = random.Random(1)
    n = 0
    with open(path, "w") as f:
        f.write("cores,throughput\n")
        while (rows is not None and n < rows) or (mb is not None and f.tell() < mb * 1e6):
            c = rnd.choice((1, 2, 4, 8, 16, 32))
            f.write(f"{c},{1000 * c / (1 + 0.05 * (c - 1)) * rnd.uniform(0.95, 1.05):.6f}\n")
            n += 1
    return n


def run(path: Path) -> tuple[float, int, float | None]:
    cmd = [sys.executable, "-m", "corecast", "predict", str(path), "--cores", "64", "-q"]
    timer = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").exists() else None)
    if timer:
        cmd = [timer, "-f", "%M", *cmd]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    peak = None
    if timer:
        try:
            peak = int(r.stderr.strip().splitlines()[-1]) / 1024
        except (ValueError, IndexError):
            pass
    return wall, r.returncode, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="100000,1000000")
    ap.add_argument("--mb", type=float, default=50.0)
    args = ap.parse_args()
    header("corecast predict on large Dataset files")
    with tempfile.TemporaryDirectory() as d:
        cases = [(int(r), None) for r in args.rows.split(",") if r] + [(None, args.mb)]
        print(f"{'rows':>10} {'MB':>7} {'exit':>4} {'wall s':>8} {'peak MB':>8}")
        for rows, mb in cases:
            p = Path(d) / "big.csv"
            n = write_csv(p, rows, mb)
            wall, code, peak = run(p)
            print(f"{n:>10,} {p.stat().st_size / 1e6:>7.1f} {code:>4} {wall:>8.1f} "
                  f"{'-' if peak is None else f'{peak:.0f}':>8}")


if __name__ == "__main__":
    main()
