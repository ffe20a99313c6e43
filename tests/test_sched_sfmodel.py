"""SF models: a fit on synthetic windows recovers known coefficients and leaves distractors out;
correlation on held-out applications is reported; the phase rule; the formats; model files."""
from __future__ import annotations


import numpy as np
import pytest

from corecast.errors import UserError
from corecast.sched import sfmodel as M
from corecast.sched.engine import Options, simulate
from corecast.sched.policies import make_policy
from corecast.sched.sfsource import phase_changes
from corecast.sched.machine import inline_machine
from corecast.sched.workload import parse_workload


def _synthetic(n_apps=8, per=50, seed=3, noise=0.02):
    rng = np.random.default_rng(seed)
    n = n_apps * per
    apps = np.repeat(np.array([f"a{i}" for i in range(n_apps)]), per)
    ipc = rng.uniform(0.3, 2.5, n)
    mpki = rng.uniform(0, 30, n)
    junk = rng.normal(size=n)
    sf = 0.6 + 0.9 * ipc - 0.03 * mpki + rng.normal(0, noise, n)
    ipc_s = ipc / sf * 0.8
    return M.Windows(apps, np.tile(np.arange(per), n_apps), sf,
                     {"big": {"ipc": ipc, "llc_mpki": mpki, "junk": junk},
                      "small": {"ipc": ipc_s, "llc_mpki": 1.1 * mpki, "junk": 2 * junk}})


def test_fit_recovers_known_coefficients():
    m = M.fit(_synthetic())
    assert set(m.big.coef) == {"ipc", "llc_mpki"}                 # the distractor is left out
    assert m.big.intercept == pytest.approx(0.6, abs=0.02)
    assert m.big.coef["ipc"] == pytest.approx(0.9, rel=0.02)
    assert m.big.coef["llc_mpki"] == pytest.approx(-0.03, rel=0.05)
    assert m.big.r > 0.99 and m.big.r_heldout > 0.99
    # the small side has no exact linear law: it is fitted and its held-out correlation reported
    assert -1 <= m.small.r_heldout <= 1 and m.small.r_heldout < m.big.r_heldout


def test_held_out_correlation_drops_when_applications_differ():
    w = _synthetic(noise=0.3)
    m = M.fit(w)
    assert m.big.r_heldout < m.big.r + 1e-12
    assert 0.5 < m.big.r_heldout < 0.99


def test_phase_rule():
    x = np.array([1.0, 1.02, 0.98, 1.01, 2.0, 2.05, 1.95, 2.0, 1.0])
    assert phase_changes(x, 0.25).tolist() == [False, False, False, False, True, False, False, False, True]
    w = _synthetic()
    assert sum(M.phases(w, 10.0) == 0) == 50          # an enormous threshold: one phase per application


def test_wide_and_long_csv(tmp_path):
    w = _synthetic(n_apps=4, per=10)
    wide = tmp_path / "w.csv"
    with open(wide, "w") as fh:
        fh.write("app,window,sf,big_ipc,big_llc_mpki,small_ipc,small_llc_mpki\n")
        for i in range(len(w)):
            fh.write(f"{w.apps[i]},{w.window[i]},{w.sf[i]},{w.metrics['big']['ipc'][i]},"
                     f"{w.metrics['big']['llc_mpki'][i]},{w.metrics['small']['ipc'][i]},{w.metrics['small']['llc_mpki'][i]}\n")
    a = M.load_windows(wide)
    assert len(a) == 40 and a.sf.tolist() == pytest.approx(w.sf.tolist())
    long = tmp_path / "l.csv"
    with open(long, "w") as fh:
        fh.write("app,window,core,ips,ipc,llc_mpki\n")
        for i in range(len(w)):
            fh.write(f"{w.apps[i]},{w.window[i]},big,{w.sf[i] * 1e9},{w.metrics['big']['ipc'][i]},{w.metrics['big']['llc_mpki'][i]}\n")
            fh.write(f"{w.apps[i]},{w.window[i]},small,1e9,{w.metrics['small']['ipc'][i]},{w.metrics['small']['llc_mpki'][i]}\n")
    b = M.load_windows(long)
    assert b.sf.tolist() == pytest.approx(w.sf.tolist())
    assert b.metrics["small"]["ipc"].tolist() == pytest.approx(w.metrics["small"]["ipc"].tolist())
    bad = tmp_path / "bad.csv"
    bad.write_text("app,window,sf,big_ipc,small_ipc\nx,0,abc,1,1\n")
    with pytest.raises(UserError, match="bad.csv:2: column 'sf'"):
        M.load_windows(bad)


def test_stat_pairs(tmp_path):
    def stat(path, ips, ipc, misses):
        rows = ["nsample,time_s,pid,tid,cpu,comm,sample_type,set,kind,name,value,raw,enabled_ns,running_ns,status,unit,message"]
        for n in range(1, 6):
            t = n * 1e9 / ips / 1e9
            for name, val in (("instructions", 1e9), ("cycles", 1e9 / ipc[n - 1]), ("llc_misses", misses[n - 1])):
                rows.append(f"{n},{t * n / n},1,1,,p,tick,0,counter,{name},{val},{val},1,1,ok,count,")
        path.write_text("\n".join(rows) + "\n")
    stat(tmp_path / "b.csv", 2e9, [2.0] * 5, [1e6] * 5)
    stat(tmp_path / "s.csv", 1e9, [1.0] * 5, [1e6] * 5)
    w = M.from_stat(tmp_path / "b.csv", tmp_path / "s.csv", "prog")
    assert w.sf.tolist() == pytest.approx([2.0] * 5)
    assert w.metrics["big"]["ipc"].tolist() == pytest.approx([2.0] * 5)
    assert w.metrics["big"]["llc_misses_pki"].tolist() == pytest.approx([1.0] * 5)


def test_model_file_and_the_model_source(tmp_path):
    m = M.fit(_synthetic())
    M.save(m, tmp_path / "m.json")
    back = M.load_model(tmp_path / "m.json")
    assert back.predict({"ipc": 2.0, "llc_mpki": 5.0, "junk": 0}, "big") == pytest.approx(m.predict({"ipc": 2.0, "llc_mpki": 5.0}, "big"))
    # the simulator's model source: HSP ranks by what the model says, not by the true SF
    wl = parse_workload({"rules": {"runs": 1, "restart": False}, "app": [
        {"name": "a", "work_s": 10, "sf": 1.2, "metrics": {"big": {"ipc": 2.4, "llc_mpki": 1}, "small": {"ipc": 1, "llc_mpki": 1, "junk": 0}}},
        {"name": "b", "work_s": 10, "sf": 3.0, "metrics": {"big": {"ipc": 0.4, "llc_mpki": 20}, "small": {"ipc": 1, "llc_mpki": 1, "junk": 0}}}]})
    res = simulate(wl, inline_machine(1, 1, 3.0), make_policy("hsp"), Options(sf_source="model", sf_model=back))
    assert res.apps[0].completion_time == pytest.approx(10.0)     # 'a' looked like the high SF
    (tmp_path / "x.json").write_text('{"kind": "other"}')
    with pytest.raises(UserError, match="not an SF model"):
        M.load_model(tmp_path / "x.json")
