"""How often can a source's 80% band hold 65-95% of its held-out points? (issue 23's proof asks
it of at least 80% of the corpus' sources.)

Leave-one-source-out on data/corpus, as `corecast evaluate --corpus data/corpus
--leave-one-source-out` scores it (without the machines, then with them): every series of a
source is fitted on its first quarter with priors and a band learned without the source, and
its held-out points are inside auto's 80% band or not. Then three readings of the same bands:

1. measured: the sources whose share of points inside is within 65-95%;
2. exchangeable: the series dealt out again at random among the sources (each source keeps
   its number of series; a series keeps its points and which of them its band held), 2,000
   times: the share of sources within 65-95% if every source's bands were as good as every
   other's -- what a band calibrated equally well everywhere gets, given how few series many
   sources have and that a series' points are inside or outside together;
3. independent points: each held-out point inside with the corpus' overall coverage, on its
   own (no series holding its points together): the most any band could get with these
   sources' point counts.

    .venv/bin/python bench/band_feasibility.py [--jobs N] [--draws 2000]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

from corecast.model import corpus, scorecard  # noqa: E402
from corecast.model.corpus import train_max  # noqa: E402
from corecast.model.trials import default_jobs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LOW, HIGH = 0.65, 0.95


def held(ev: scorecard.CorpusEvaluation) -> list[tuple[str, int, int]]:
    """(source, points held out, points inside auto's band) of every series auto predicted."""
    out = []
    for s, res in ev.per_series:
        got = res.get("auto")
        if got is None or got[1] is None:
            continue
        n = int((s.cores > train_max(s.cores, ev.train_frac)).sum())
        out.append((s.source, n, int(round(got[1] * n))))
    return out


def within(src: np.ndarray, n: np.ndarray, k: np.ndarray, sources: list[str]) -> float:
    """The share of sources whose coverage is within [LOW, HIGH]."""
    ok = 0
    for x in sources:
        m = src == x
        c = k[m].sum() / n[m].sum()
        ok += LOW - 1e-9 <= c <= HIGH + 1e-9
    return ok / len(sources)


def readings(rows: list[tuple[str, int, int]], draws: int, rng: np.random.Generator) -> dict[str, object]:
    src = np.array([r[0] for r in rows])
    n = np.array([r[1] for r in rows])
    k = np.array([r[2] for r in rows])
    sources = sorted(set(src.tolist()))
    measured = within(src, n, k, sources)
    exch = np.array([within(src, n[p], k[p], sources) for p in (rng.permutation(len(rows)) for _ in range(draws))])
    # exchangeable: a source keeps its series count, the series (points, inside) are dealt anew
    overall = k.sum() / n.sum()
    pts = np.array([n[src == x].sum() for x in sources])
    indep = np.array([np.mean([LOW - 1e-9 <= c <= HIGH + 1e-9 for c in rng.binomial(pts, overall) / pts])
                      for _ in range(draws)])
    per_series = np.array([(src == x).sum() for x in sources])
    return {"sources": len(sources), "series": len(rows), "points": int(n.sum()), "overall": overall,
            "measured": measured, "exch": exch, "indep": indep, "one_series": int((per_series == 1).sum()),
            "few_series": int((per_series <= 3).sum())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=default_jobs())
    ap.add_argument("--draws", type=int, default=2000)
    a = ap.parse_args()
    print("# how often a source's 80% band can hold 65-95% of its held-out points")
    print(f"# machine: {_machine.describe()}")
    series = corpus.load_corpus(ROOT / "data" / "corpus")
    fitting = None
    for target in (False, True):
        ev = scorecard.evaluate_corpus(series, ["auto"], target=target, leave_one_source_out=True, jobs=a.jobs,
                                       fitting=fitting if not target else None)
        r = readings(held(ev), a.draws, np.random.default_rng(23))
        lo, hi = np.percentile(r["exch"], [5, 95])
        print(f"## leave-one-source-out, {'with each source' + chr(39) + 's machine' if target else 'no machine given'}: "
              f"{r['sources']} sources, {r['series']} series, {r['points']} held-out points, "
              f"{100 * r['overall']:.1f}% inside the 80% bands")
        print(f"  sources of one series: {r['one_series']}; of three or fewer: {r['few_series']}")
        print(f"  measured: {100 * r['measured']:.0f}% of the sources within {100 * LOW:.0f}-{100 * HIGH:.0f}%")
        print(f"  exchangeable (the series dealt out anew, {a.draws} draws): {100 * r['exch'].mean():.0f}% "
              f"on average (90% of draws {100 * lo:.0f}-{100 * hi:.0f}%); at least 80% in "
              f"{100 * np.mean(r['exch'] >= 0.8 - 1e-9):.1f}% of draws")
        print(f"  independent points at {100 * r['overall']:.1f}%: {100 * r['indep'].mean():.0f}% on average; "
              f"at least 80% in {100 * np.mean(r['indep'] >= 0.8 - 1e-9):.1f}% of draws")
    return 0


if __name__ == "__main__":
    sys.exit(main())
