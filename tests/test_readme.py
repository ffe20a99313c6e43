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


def test_the_first_screen_shows_what_predict_prints_on_the_committed_campaign():
    """The README's sample block is predict's own output on data/readme/lockbench.db, as the
    models are now (scripts/readme_sample.py update rewrites it after a change of the models)."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "readme_sample.py"), "check"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    text = (ROOT / "README.md").read_text()
    block = text[text.index("<!-- sample:begin -->"):text.index("<!-- sample:end -->")]
    # a table of predictions at the README's counts and the lock named at its call site
    assert re.search(r"^64 +│", block, re.M) and "pthread_mutex_lock(&g_mutex)" in block
    assert (ROOT / "docs" / "img" / "readme-predict.png").stat().st_size > 10_000
