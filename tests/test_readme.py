"""The README's tour works as written on the 2-core machine it will most often meet."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_tour_measure_line_runs_here(cli, tmp_path, monkeypatch):
    text = (ROOT / "README.md").read_text()
    line = next(line.strip() for line in text.splitlines() if line.strip().startswith("corecast measure"))
    args = shlex.split(line)[1:]
    # the same command, quicker: fewer repetitions and a short run of the workload
    args[args.index("--reps") + 1] = "1"
    args[args.index("-o") + 1] = str(tmp_path / "lock.db")
    args += ["-n", "20000"]
    r = cli(*args[:1], "-q", "--warmup", "0", *args[1:])
    assert r.code == 0, r.err
    assert re.search(r"--cores (pow2|1-all|all)", line)
