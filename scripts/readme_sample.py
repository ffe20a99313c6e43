#!/usr/bin/env python3
"""The README's first screen: a real `predict` table and its plot, from a campaign measured
with the README's own `measure` line and kept in data/readme/ (with its provenance).

    python scripts/readme_sample.py measure   # measure again (on this machine), then `update`
    python scripts/readme_sample.py update    # rewrite the README's sample block and the plot
    python scripts/readme_sample.py check     # exit 1 if the README's block is not what predict prints

The block sits between the README's `<!-- sample:begin -->` and `<!-- sample:end -->` lines;
tests/test_readme.py runs `check`'s comparison, so the README cannot drift from what corecast
prints on the committed campaign.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CAMPAIGN = ROOT / "data" / "readme" / "lockbench.db"
PLOT = ROOT / "docs" / "img" / "readme-predict.png"
BEGIN, END = "<!-- sample:begin -->", "<!-- sample:end -->"
#: The width the sample is printed at (a terminal of 100 columns).
COLUMNS = "100"


def _lines(text: str) -> tuple[str, str]:
    """The README's sample `measure` and `predict` command lines (in the block)."""
    block = text[text.index(BEGIN):text.index(END)]
    measure = next(ln.strip()[2:] for ln in block.splitlines() if ln.strip().startswith("$ corecast measure"))
    predict = next(ln.strip()[2:] for ln in block.splitlines() if ln.strip().startswith("$ corecast predict"))
    return measure, predict


def predict_output(predict_line: str, plot: Path | None = None) -> str:
    """What the README's predict line prints on the committed campaign, at COLUMNS wide."""
    args = shlex.split(predict_line)[1:]
    shown = args[1]
    args[1] = str(CAMPAIGN.relative_to(ROOT))
    if plot is not None:
        args[args.index("--plot") + 1] = str(plot)
    else:
        i = args.index("--plot")
        del args[i:i + 2]
    env = {**os.environ, "COLUMNS": COLUMNS, "NO_COLOR": "1", "TERM": "dumb"}
    r = subprocess.run([sys.executable, "-m", "corecast", *args, "-q"], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=600)
    if r.returncode != 0:
        sys.exit(f"readme_sample: predict failed: {r.stderr.strip()}")
    return abridged(r.stdout.replace(args[1], shown))


def abridged(out: str) -> str:
    """The first screen's part of predict's output: its first line (method and model), the
    predictions table and the locks; the models, lost core-time, waits and bottlenecks tables
    and the warnings are left to the reader's own run (said in the README)."""
    lines = [line.rstrip() for line in out.rstrip().splitlines()]
    keep = lines[:1]
    i = next(k for k, line in enumerate(lines) if line.startswith("Predictions"))
    j = next(k for k in range(i + 1, len(lines)) if lines[k].startswith("Models") or not lines[k].strip())
    keep += lines[i:j]
    locks = [k for k, line in enumerate(lines) if line.startswith("Locks")]
    if locks:
        k = locks[0]
        keep.append(lines[k])
        keep += [line for line in lines[k + 1:] if line.startswith("  ")][:3]
    return "\n".join(keep)


def block(text: str, output: str) -> str:
    """The README's block with `output` in its output fence."""
    measure, predict = _lines(text)
    return (f"{BEGIN}\n```console\n$ {measure}\n$ {predict}\n{output}\n```\n")


def current(text: str) -> str:
    return text[text.index(BEGIN):text.index(END)]


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("measure", "update", "check"):
        sys.exit(__doc__)
    text = README.read_text()
    measure, predict = _lines(text)
    if argv[0] == "measure":
        args = shlex.split(measure)[1:]
        args[args.index("-o") + 1] = str(CAMPAIGN)
        CAMPAIGN.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(str(CAMPAIGN) + suffix).unlink(missing_ok=True)
        subprocess.run([sys.executable, "-m", "corecast", *args], check=True, cwd=ROOT)
        return 0
    if argv[0] == "update":
        PLOT.parent.mkdir(parents=True, exist_ok=True)
        new = block(text, predict_output(predict, PLOT))
        README.write_text(text.replace(current(text), new))
        print(f"updated {README.relative_to(ROOT)} and {PLOT.relative_to(ROOT)}", file=sys.stderr)
        return 0
    want = block(text, predict_output(predict))
    if current(text) != want:
        print("the README's sample is not what predict prints now: run "
              "`python scripts/readme_sample.py update`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
