#!/usr/bin/env python3
"""Learn, from a corpus of real scaling curves, the priors `auto` and the target-machine model use.

    python scripts/learn_priors.py [CORPUS] [-o src/corecast/model/priors.toml] [--train-frac 0.25]

What is learned and how: corecast.model.learn (its docstring) and corecast.model.bands. The
priors are learned from every source of the corpus; the bands from every source's held-out
scores with the priors learned without it (leave-one-source-out, without and with the sources'
machines: corecast.model.scorecard.learn_shipped); `corecast evaluate --corpus DIR
--leave-one-source-out` learns both without each source in turn to score them honestly. tests/test_priors.py checks that the
shipped file is what this script writes for the bundled corpus.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from corecast.model import scorecard  # noqa: E402
from corecast.model.corpus import load_corpus  # noqa: E402
from corecast.model.priors import Priors  # noqa: E402
from corecast.model.trials import default_jobs  # noqa: E402


def learn_from(corpus: Path, train_frac: float = 0.25, jobs: int | None = None) -> Priors:
    series = load_corpus(corpus)
    name = corpus.name if corpus.name != "corpus" else "data/corpus"
    return scorecard.learn_shipped(series, train_frac, jobs or default_jobs(),
                                   origin=f"{name}: {len({s.source for s in series})} sources, {len(series)} series")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default=str(ROOT / "data" / "corpus"))
    ap.add_argument("-o", "--output", default=str(ROOT / "src" / "corecast" / "model" / "priors.toml"))
    ap.add_argument("--train-frac", type=float, default=0.25)
    ap.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per CPU)")
    a = ap.parse_args()
    text = learn_from(Path(a.corpus), a.train_frac, a.jobs).to_toml()
    Path(a.output).write_text(text)
    print(text)
