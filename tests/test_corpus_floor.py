"""Over every series of the bundled corpus, fitted on its first quarter as the scorecard fits it,
without a machine and with its source's machine (given as the target only, and as the target
and the measured machine, and as `cpus=N` alone, the form a source gives that states only its
CPU count): no prediction of `auto` falls below a throughput measured at fewer
threads unless the prediction says the fitted model turns down (issue 23)."""
from __future__ import annotations

import numpy as np
import pytest

from corecast.model import auto, trials
from corecast.model import corpus as C
from corecast.model.corpus import train_max
from corecast.model.priors import load as load_priors
from corecast.model.series import convert
from corecast.model.topo import fit_for_target
from corecast.target import parse_spec

from conftest import ROOT


def _check(args):
    s, mode = args
    pri = load_priors()
    k = train_max(s.cores, 0.25)
    ds = s.dataset()
    tr = ds.select(ds.cores <= k)
    top = float(s.cores.max())
    asked = np.unique(np.concatenate([s.cores[s.cores > k], [2 * top, 4 * top]]))
    fit = lambda d: auto.fit_dataset(d, priors=pri)            # noqa: E731
    if mode == "plain" or s.machine is None:
        f = fit(tr)
    elif mode == "target":
        f = fit_for_target(fit, tr, s.machine, s.order, priors=pri)
    elif mode == "cpus":
        f = fit_for_target(fit, tr, parse_spec(f"cpus={s.machine.cpus}"), s.order, priors=pri)
    else:
        f = fit_for_target(fit, tr, s.machine, s.order, measured=s.machine, measured_order=s.order, priors=pri)
    p = convert(f.predict(asked), "throughput")
    m = s.cores <= k
    fl = np.array([s.throughput[m & (s.cores <= a)].max(initial=0.0) for a in asked])
    below = p.value < fl * (1 - 1e-9)
    retro = (p.params.get("retrograde") or {}).get("confirmed", False)
    said = any("turns down" in w for w in p.warnings)
    bad = bool(np.any(below)) and not (retro and said)
    return (s.source, s.name, mode) if bad else None


@pytest.mark.slow
def test_no_prediction_falls_below_a_measurement_at_fewer_threads_without_a_stated_retrograde_fit():
    series = C.load_corpus(ROOT / "data" / "corpus")
    jobs = [(s, mode) for s in series for mode in ("plain", "target", "both", "cpus") if mode == "plain" or s.machine]
    bad = [x for x in trials.parallel_map(_check, jobs, jobs=2) if x is not None]
    assert not bad, f"{len(bad)} predictions fell below a measurement without a retrograde fit: {bad[:10]}"
