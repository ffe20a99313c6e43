"""Study (the two-point predictor's coherency share for small pairs): how the share of the
overhead taken as coherency by the USL through two measured counts extrapolates the corpus'
curves, from the pairs a small machine gives (each series through its two smallest counts,
"first") and from the pairs the scorecard's quarter fits give (its last two counts up to a
quarter of its largest, "quarter"); every larger count of the series is predicted and the
prediction floored at the larger measured throughput, as `predict` floors it.

Prints, for each share of trials.COHERENCY_SHARES: the median over the sources of each source's
median (over its series) of the series' median absolute % error, for each kind of pair; the
same by distance (held-out count / larger measured count); and, with the pairs split at a limit
(2, 4 or 8 cores: the larger count at most the limit takes one share, the rest another), the
shares chosen without each source in turn and scored on it (leave-one-source-out); and, for the
pairs up to 4 cores, a share that fades with the distance r (0.2 · (1 − ln r / ln R), not below
0) for R chosen the same way. Figures in docs/predict.md ("Two core counts").

    .venv/bin/python bench/two_point_share_study.py [--corpus data/corpus]
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

from corecast.errors import UserError
from corecast.model import twopoint
from corecast.model.corpus import load_corpus
from corecast.model.series import convert
from corecast.model.trials import COHERENCY_SHARES, LEVEL

QS = list(COHERENCY_SHARES)
DISTANCES = (1, 2, 4, 8, 16, np.inf)
LIMITS = (2, 4, 8)
FADE_R = (2, 4, 8, 16, 32, 64)


def pair_rows(series):
    """(source, kind, larger count, {share: series error}, {share: {distance bin: error}})."""
    rows = []
    for kind in ("first", "quarter"):
        for s in series:
            c = np.unique(s.cores)
            if len(c) < 4:
                continue
            q = c[c <= c.max() / 4]
            pair = c[:2] if kind == "first" or len(q) < 2 else q[-2:]
            held = s.cores > pair[1]
            ds = s.dataset()
            try:
                tp = twopoint.fit_dataset(ds.select(np.isin(ds.cores, pair)), coherency_share=0.1, use_stalls=False)
            except (UserError, ValueError):
                continue
            truth, n = s.throughput[held], s.cores[held].astype(float)
            floor = s.throughput[np.isin(s.cores, pair)].max()
            r = n / pair[1]
            err, by_d = {}, {}
            for share in QS:
                p = convert(dataclasses.replace(tp, coherency_share=share).predict(n, LEVEL), "throughput").value
                e = np.abs(np.maximum(p, floor) / truth - 1) * 100
                err[share] = float(np.median(e))
                by_d[share] = {i: float(np.median(e[(r > lo) & (r <= hi)]))
                               for i, (lo, hi) in enumerate(zip(DISTANCES, DISTANCES[1:])) if ((r > lo) & (r <= hi)).any()}
            fade = {}
            if pair[1] <= 4:
                for big in FADE_R:
                    want = 0.2 * np.clip(1 - np.log(r) / np.log(big), 0, 1)
                    p = np.array([convert(dataclasses.replace(tp, coherency_share=float(w)).predict(np.array([x]), LEVEL),
                                          "throughput").value[0] for x, w in zip(n, want)])
                    fade[big] = float(np.median(np.abs(np.maximum(p, floor) / truth - 1) * 100))
            rows.append((s.source, kind, float(pair[1]), err, by_d, fade))
    return rows


def over_sources(values):
    by = collections.defaultdict(list)
    for src, v in values:
        by[src].append(v)
    return float(np.median([np.median(v) for v in by.values()])) if by else float("nan"), len(by)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="data/corpus")
    args = ap.parse_args()
    _machine.header("two-point coherency share study")
    rows = pair_rows(load_corpus(args.corpus))
    for kind in ("first", "quarter"):
        for small in (True, False):
            got = [r for r in rows if r[1] == kind and (r[2] <= 4) == small]
            line = []
            for share in QS:
                med, k = over_sources([(r[0], r[3][share]) for r in got])
                line.append(f"{share:g}: {med:5.1f}")
            print(f"{kind:8s} pairs, larger count {'up to 4' if small else 'above 4'} ({k} sources): " + "  ".join(line))
    print("by distance (held-out count / larger measured count), both kinds of pair:")
    for i, (lo, hi) in enumerate(zip(DISTANCES, DISTANCES[1:])):
        line = []
        for share in QS:
            med, k = over_sources([(r[0], r[4][share][i]) for r in rows if i in r[4][share]])
            line.append(f"{share:g}: {med:5.1f}")
        print(f"  ({lo:g}, {hi:g}] ({k} sources): " + "  ".join(line))
    sources = sorted({r[0] for r in rows})

    def best(group):
        return min(QS, key=lambda q: over_sources([(r[0], r[3][q]) for r in group])[0])

    print("split at a limit, both shares chosen without the source scored (leave-one-source-out):")
    for limit in LIMITS:
        out = {"first": [], "quarter": []}
        for src in sources:
            train = [r for r in rows if r[0] != src]
            low = best([r for r in train if r[2] <= limit])
            high = best([r for r in train if r[2] > limit])
            for kind in out:
                test = [r for r in rows if r[0] == src and r[1] == kind]
                if test:
                    out[kind].append(np.median([r[3][low if r[2] <= limit else high] for r in test]))
        print(f"  limit {limit}: first pairs {np.median(out['first']):.1f}, quarter pairs {np.median(out['quarter']):.1f}; "
              f"chosen on all sources: {best([r for r in rows if r[2] <= limit]):g} up to it, "
              f"{best([r for r in rows if r[2] > limit]):g} above")
    fixed = {share: {kind: float(np.median([np.median([r[3][share] for r in rows if r[0] == s and r[1] == kind])
                                           for s in sources if any(r[0] == s and r[1] == kind for r in rows)]))
                     for kind in ("first", "quarter")} for share in (0.0, 0.2)}
    for share, d in fixed.items():
        print(f"  one share {share:g} for all: first pairs {d['first']:.1f}, quarter pairs {d['quarter']:.1f}")
    small = [r for r in rows if r[5]]
    print("pairs up to 4 cores, a share fading from 0.2 to 0 by ln(distance) / ln R:")
    for kind in ("first", "quarter"):
        got = [r for r in small if r[1] == kind]
        print(f"  {kind:8s}: " + "  ".join(f"R {big}: {over_sources([(r[0], r[5][big]) for r in got])[0]:5.1f}"
                                          for big in FADE_R)
              + f"  (share 0: {over_sources([(r[0], r[3][0.0]) for r in got])[0]:.1f})")
    out, chosen = {"first": [], "quarter": []}, collections.Counter()
    for src in sorted({r[0] for r in small}):
        train = [r for r in small if r[0] != src]

        def score(big):
            return np.mean([over_sources([(r[0], r[5][big]) for r in train if r[1] == k])[0] for k in out])
        big = min(FADE_R, key=score)
        chosen[big] += 1
        for kind in out:
            test = [r[5][big] for r in small if r[0] == src and r[1] == kind]
            if test:
                out[kind].append(np.median(test))
    print(f"  R chosen without the source scored: first pairs {np.median(out['first']):.1f}, quarter pairs "
          f"{np.median(out['quarter']):.1f} (R chosen: {dict(sorted(chosen.items()))})")


if __name__ == "__main__":
    main()
