#!/usr/bin/env python3
"""Learn, from a corpus of real scaling curves, the priors the target-machine model uses.

    python scripts/learn_priors.py [CORPUS] [-o src/corecast/model/priors.toml]

Today one prior: the **SMT yield** -- what a thread on a core's second hardware thread adds,
as a share of what one more physical core adds. For every series measured on a machine with
SMT, at C physical cores, 2C logical CPUs and C/2 (thread counts the series has):

    yield = (X(2C) / X(C) - 1) / (X(C) / X(C/2) - 1)

(the gain of doubling threads onto the SMT siblings over the gain of the last doubling of
physical cores), kept in [0, 1]; the prior is the median over the series. tests/test_topo.py
checks that the shipped file is what this script writes for the bundled corpus.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from corecast.model.corpus import load_corpus  # noqa: E402


def smt_yields(corpus: Path) -> list[tuple[str, str, float]]:
    out = []
    for s in load_corpus(corpus):
        m = s.machine
        if m is None or m.threads_per_core < 2:
            continue
        pts = dict(zip(s.cores.tolist(), s.throughput.tolist()))
        c = m.cores
        if not all(k in pts for k in (c / 2, c, 2 * c)):
            continue
        core_gain = pts[c] / pts[c / 2] - 1
        if core_gain <= 0.05:          # no scaling left to compare with: says nothing of SMT
            continue
        out.append((s.source, s.name, float(np.clip((pts[2 * c] / pts[c] - 1) / core_gain, 0.0, 1.0))))
    return out


def render(corpus: Path) -> str:
    ys = smt_yields(corpus)
    if not ys:
        raise SystemExit(f"{corpus}: no series with SMT to learn from")
    med = float(np.median([y for *_, y in ys]))
    q1, q3 = (float(v) for v in np.percentile([y for *_, y in ys], [25, 75]))
    sources = sorted({s for s, *_ in ys})
    return (
        "# Priors for the target-machine model (corecast.model.topo), written by\n"
        "# scripts/learn_priors.py from the bundled corpus (data/corpus); do not edit by hand.\n\n"
        "[smt]\n"
        f"yield = {med:.4f}\n"
        f"quartiles = [{q1:.4f}, {q3:.4f}]\n"
        f"series = {len(ys)}\n"
        f"sources = {sources!r}\n".replace("'", '"')
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default=str(ROOT / "data" / "corpus"))
    ap.add_argument("-o", "--output", default=str(ROOT / "src" / "corecast" / "model" / "priors.toml"))
    a = ap.parse_args()
    text = render(Path(a.corpus))
    Path(a.output).write_text(text)
    print(text)
