#!/usr/bin/env python3
"""Learn, from a corpus of real scaling curves, the priors `auto` and the target-machine model use.

    python scripts/learn_priors.py [CORPUS] [-o src/corecast/model/priors.toml] [--train-frac 0.25]

What is learned and how: corecast.model.learn (its docstring). The priors are learned from every
source of the corpus; `corecast evaluate --corpus DIR --leave-one-source-out` learns them
without each source in turn to score them honestly. tests/test_priors.py checks that the
shipped file is what this script writes for the bundled corpus.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from corecast.model import learn  # noqa: E402
from corecast.model.corpus import load_corpus  # noqa: E402
from corecast.model.priors import Priors  # noqa: E402


def learn_from(corpus: Path, train_frac: float = 0.25) -> Priors:
    series = load_corpus(corpus)
    y = learn.smt_yield(series)[0]
    raw = learn.make_trials(series, train_frac)
    tgt = learn.make_trials(series, train_frac, target=True, smt_yield=y)
    name = corpus.name if corpus.name != "corpus" else "data/corpus"
    return learn.learn(raw, tgt, series, train_frac,
                       origin=f"{name}: {len({s.source for s in series})} sources, {len(series)} series")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default=str(ROOT / "data" / "corpus"))
    ap.add_argument("-o", "--output", default=str(ROOT / "src" / "corecast" / "model" / "priors.toml"))
    ap.add_argument("--train-frac", type=float, default=0.25)
    a = ap.parse_args()
    text = learn_from(Path(a.corpus), a.train_frac).to_toml()
    Path(a.output).write_text(text)
    print(text)
