"""`corecast predict`: interface, JSON names, bands, plots, reports and user errors."""

import numpy as np
import pytest

import fakes
from corecast.model import auto, predictors, synth

CORES = "16,24,32,48,64"


@pytest.fixture
def lock_csv(tmp_path):
    ds, truth, _ = synth.scaling_dataset("lock_hidden", seed=0)
    p = tmp_path / "lock.csv"
    ds.to_csv(p)
    return p, truth


@pytest.fixture
def plain_csv(tmp_path):
    # A plain CSV as a user writes it: any other numeric column is a stall category.
    p = tmp_path / "plain.csv"
    rows = ["cores,time_s,lock_wait,cache_stall"]
    for n in range(1, 11):
        t = 100.0 / n + 0.2 * n
        rows.append(f"{n},{t:.6g},{0.2 * n * n * 1e9:.6g},{50e9:.6g}")
    p.write_text("\n".join(rows) + "\n")
    return p


def test_json_interface(cli, lock_csv):
    path, truth = lock_csv
    r = cli("predict", path, "--cores", CORES, "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["method"] == "auto"
    assert {"method", "predictions", "models", "bottlenecks"} <= set(doc)
    assert [p["cores"] for p in doc["predictions"]] == [16, 24, 32, 48, 64]
    for p in doc["predictions"]:
        assert set(p) == {"cores", "time_s", "throughput", "low", "high"}
        assert p["throughput"] == pytest.approx(1 / p["time_s"])
        assert p["low"] <= p["time_s"] <= p["high"]        # bounds of the input metric (time_s)
    assert doc["metric"] == "time_s" and doc["level"] == 0.8
    assert doc["chosen"] == ["estima"]
    assert doc["bottlenecks"][0]["category"] == "lock_wait_cycles"
    assert "scaling_factor" in doc["models"] and "lock_wait_cycles" in doc["models"]
    m = doc["models"]["lock_wait_cycles"]
    assert {"kernel", "params", "formula", "checkpoints"} <= set(m)


@pytest.mark.parametrize("method", ["estima", "timex", "usl"])
def test_each_method(cli, lock_csv, method):
    path, truth = lock_csv
    r = cli("predict", path, "--cores", CORES, "--method", method, "--json", "--level", "0.9")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["method"] == method and doc["level"] == 0.9
    t = np.array([p["time_s"] for p in doc["predictions"]])
    assert np.all(t > 0)
    if method == "estima":
        assert t[-1] > t[0]           # the slowdown
        assert doc["bottlenecks"]
    else:
        assert doc["bottlenecks"] == []


def test_throughput_only_dataset(cli, data_dir):
    r = cli("predict", data_dir / "usl" / "specsdm91.csv", "--cores", "250,300", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["metric"] == "throughput"
    for p in doc["predictions"]:
        assert p["low"] <= p["throughput"] <= p["high"]     # bounds of throughput now
        assert p["time_s"] == pytest.approx(1 / p["throughput"])   # time per unit of work
    assert doc["work_per_run"] is None
    assert "estima" not in doc["chosen"]


def _time_and_throughput_csv(tmp_path, ops):
    """A program whose run time is 10/n + 0.5 s at n cores and which reports ops(n) operations
    per second of its run."""
    rows = ["cores,time_s,throughput"]
    for n in (1, 2, 3, 4, 6, 8):
        t = 10.0 / n + 0.5
        rows.append(f"{n},{t},{ops(n) / t}")
    p = tmp_path / "both.csv"
    p.write_text("\n".join(rows) + "\n")
    return p


def test_measured_throughput_units_carry_into_the_prediction(cli, tmp_path):
    # a fixed amount of work (2e6 operations per run): throughput = work / time, in ops/s
    p = _time_and_throughput_csv(tmp_path, lambda n: 2e6)
    doc = cli("predict", p, "--cores", "16,32", "--json").json()
    assert doc["metric"] == "time_s" and doc["work_per_run"] == pytest.approx(2e6)
    assert doc["throughput_unit"] == "as measured"
    for q in doc["predictions"]:
        assert q["throughput"] == pytest.approx(2e6 / q["time_s"])
    out = cli("predict", p, "--cores", "16").out
    assert "work per run 2e+06" in out and "runs/s" not in out
    # a run whose work grows with its threads (or a fixed-time run): throughput is not work /
    # time, so the time's prediction is given in runs per second, and says so
    p = _time_and_throughput_csv(tmp_path, lambda n: 1e6 * n)
    doc = cli("predict", p, "--cores", "16", "--json").json()
    assert doc["work_per_run"] is None and doc["throughput_unit"].startswith("runs/s")
    q = doc["predictions"][0]
    assert q["throughput"] == pytest.approx(1 / q["time_s"])
    assert "runs/s" in cli("predict", p, "--cores", "16").out


def test_plain_csv_with_stall_columns(cli, plain_csv):
    r = cli("predict", plain_csv, "--cores", "20,40", "--method", "estima", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert set(doc["models"]) >= {"lock_wait", "cache_stall", "scaling_factor"}
    truth = lambda n: 100.0 / n + 0.2 * n
    t = np.array([p["time_s"] for p in doc["predictions"]])
    assert np.allclose(t, truth(np.array([20.0, 40.0])), rtol=0.1)


def test_terminal_output(cli, lock_csv):
    path, _ = lock_csv
    r = cli("predict", path, "--cores", CORES)
    assert r.code == 0, r.err
    assert "Predictions" in r.out and "Bottlenecks" in r.out and "lock_wait" in r.out


def test_plot_and_report(cli, lock_csv, tmp_path):
    path, _ = lock_csv
    png, html = tmp_path / "p.png", tmp_path / "r.html"
    r = cli("predict", path, "--cores", CORES, "--plot", png, "--report", html)
    assert r.code == 0, r.err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = html.read_text()
    assert "<svg" in text and "Bottlenecks" in text and "lock_wait_cycles" in text
    assert "http://" not in text.split("<svg", 1)[0]


def test_plot_panels():
    from corecast.report import prediction as R
    ds, _, _ = synth.scaling_dataset("lock", seed=0)
    fits = {m: predictors.fit(m, ds) for m in ("estima", "timex", "usl")}
    fig = R.figure(ds, fits, [16, 32, 64], 0.8, main="estima")
    axes = fig.get_axes()
    assert len(axes) == 2
    labels = [l.get_label() for l in axes[0].get_lines()]
    assert any(l.startswith("estima") for l in labels) and any(l.startswith("usl") for l in labels)
    assert any(abs(l.get_xdata()[0] - 12) < 1e-9 for l in axes[0].get_lines() if len(l.get_xdata()) == 2)
    assert len([l for l in axes[1].get_lines() if "_cycles (" in l.get_label()]) == 3
    ds2 = synth.scaling_dataset("lock", seed=0)[0]
    fig2 = R.figure(ds2, {"usl": predictors.fit("usl", ds2)}, [16], 0.8)
    assert len(fig2.get_axes()) == 1


def test_the_band_is_in_the_legend():
    """Issue 26: the prediction PNG's shaded band had no legend entry."""
    from matplotlib.collections import PolyCollection

    from corecast.report import prediction as R
    ds, _, _ = synth.scaling_dataset("lock", seed=0)
    fits = {m: predictors.fit(m, ds) for m in ("estima", "timex", "usl")}
    fig = R.figure(ds, fits, [16, 32, 64], 0.8, main="estima")
    legend = [t.get_text() for t in fig.get_axes()[0].get_legend().get_texts()]
    assert "estima: 80% band" in legend and sum("band" in t for t in legend) == 1
    handle = next(h for h, t in zip(fig.get_axes()[0].get_legend().legend_handles, legend) if "band" in t)
    assert isinstance(handle, PolyCollection) or hasattr(handle, "get_facecolor")
    assert "shaded: 80% band" in [t.get_text() for t in fig.get_axes()[1].get_legend().get_texts()]
    fig2 = R.figure(ds, {"usl": fits["usl"]}, [16], 0.95)                 # no main method: the first band
    assert "usl: 95% band" in [t.get_text() for t in fig2.get_axes()[0].get_legend().get_texts()]


@pytest.mark.parametrize("args,msg", [
    (["--cores", "16", "--method", "estima"], "needs stall categories"),
    (["--cores", "abc"], "not a core count"),
    (["--cores", "16", "--plot", "x.gif"], "plot format"),
    (["--cores", "16", "--stalls", "nope"], "unknown stall category"),
    (["--cores", "16", "--freq-ratio", "-1"], "freq-ratio"),
    (["--cores", "16", "--kernels", "Rat99"], "unknown kernel"),
    (["--cores", "16", "--target-size", "5"], "no 'size' or 'rss_bytes'"),
])
def test_user_errors(cli, data_dir, args, msg):
    r = cli("predict", data_dir / "usl" / "raytracer.csv", *args)
    assert r.code == 2
    assert msg in r.err
    assert "Traceback" not in r.err


def test_missing_file_and_too_few_points(cli, tmp_path):
    r = cli("predict", tmp_path / "none.csv", "--cores", "8")
    assert r.code == 2
    p = tmp_path / "one.csv"
    p.write_text("cores,time_s\n2,1.1\n2,1.2\n")
    r = cli("predict", p, "--cores", "8")
    assert r.code == 2 and "2 or more distinct core counts (got 1)" in r.err


# ------------------------------------------------------------------ auto
def test_auto_prefers_stalls_and_reports_validation():
    from corecast.model.priors import Priors
    ds, _, _ = synth.scaling_dataset("lock_hidden", seed=1)
    a = auto.fit_dataset(ds, priors=Priors(default="usl", switch_ratio=2.0))
    assert list(a.weights) == ["estima"]
    assert set(a.scores) == {"estima", "timex", "usl", "amdahl", "power", "pmnf"}
    # priors that never let validation displace the default: only what can carry weight is fitted
    b = auto.fit_dataset(ds, priors=Priors(default="usl", partner="amdahl", default_weight=0.5, switch_ratio=1e9))
    # (and the scaling laws whose disagreement widens the band: cheap to fit)
    assert set(b.scores) == {"estima", "usl", "amdahl", "power", "pmnf"} and list(b.weights) == ["estima"]
    assert "timex not fitted (no validation could give it weight)" in b.reason
    assert not any("not fitted" in w for w in b.warnings)       # a choice explained, not a warning
    p = a.predict([16, 64])
    assert any("stall method predicts slower" in w for w in p.warnings)
    # validation is rolling-origin: fitted on smaller counts, scored on larger ones
    assert all(v.cores > v.origin for v in a.validation)
    assert {v.origin for v in a.validation} == {8.0, 9.0, 10.0, 11.0}


def test_auto_without_stalls_validates_and_keeps_the_corpus_default(data_dir):
    from corecast.dataset import load
    from corecast.model.priors import Priors
    ds = load(data_dir / "usl" / "raytracer.csv")
    a = auto.fit_dataset(ds, priors=Priors(default="usl", switch_ratio=2.0))
    assert "estima" not in a.fits
    assert set(a.scores) == {"timex", "usl", "amdahl", "power", "pmnf"}
    never = auto.fit_dataset(ds, priors=Priors(default="usl", partner="amdahl", default_weight=0.5, switch_ratio=1e9))
    assert never.weights == {"usl": 0.5, "amdahl": 0.5} and "extrapolated best on held-out real curves" in never.reason
    p = never.predict([48.0, 64.0])
    want = np.exp(0.5 * np.log(never.fits["usl"].predict([48.0, 64.0]).value) +
                  0.5 * np.log(never.fits["amdahl"].predict([48.0, 64.0]).value))
    # never below what was measured at as many processors or fewer (the curve still rises)
    N, X, _ = ds.throughput()
    floor = [X[N <= 48].max(), X[N <= 64].max()]
    assert p.value == pytest.approx(np.maximum(want, floor), rel=1e-9)
    assert want[1] < floor[1] and any("kept at that measurement" in w for w in p.warnings)
    # the USL validates more than 2x worse than the best member here: with a switch ratio of 2 it
    # is displaced, and only the members within NO_WEIGHT_RATIO of the best are combined
    b = auto.fit_dataset(ds, priors=Priors(default="usl", switch_ratio=2.0))
    best = min(b.scores, key=b.scores.get)
    assert b.scores["usl"] > 2 * b.scores[best] and "usl" not in b.weights
    assert set(b.weights) == {k for k, v in b.scores.items() if v <= auto.NO_WEIGHT_RATIO * b.scores[best]}
    assert sum(b.weights.values()) == pytest.approx(1.0) and max(b.weights, key=b.weights.get) == best
    p = b.predict([96, 128])
    assert p.metric == "throughput" and np.all(p.low <= p.value) and np.all(p.value <= p.high)


def test_a_member_that_validated_several_times_worse_gets_no_weight():
    from corecast.model.priors import Priors
    # the lock-bound series: validation errors USL 3.6%, power 23%, timex 49%, PMNF 67%,
    # Amdahl 228%; the old rule (shrunk halfway to equal) gave Amdahl 10%
    scores = {"usl": 0.036, "power": 0.23, "timex": 0.49, "pmnf": 0.67, "amdahl": 2.28}
    w, why = auto.choose(scores, Priors(default="usl", switch_ratio=2.0))
    assert w == {"usl": 1.0}
    w, why = auto.choose(scores, Priors(default="power", switch_ratio=2.0))
    assert w == {"usl": 1.0} and "no weight for" in why and "amdahl" in why
    w, _ = auto.choose({"usl": 0.10, "power": 0.04, "amdahl": 0.05, "pmnf": 0.30}, Priors(default="usl", switch_ratio=2))
    assert set(w) == {"power", "amdahl"} and w["power"] == pytest.approx((1 / 0.04 ** 2) / (1 / 0.04 ** 2 + 1 / 0.05 ** 2))


def test_the_blends_partner_gets_no_weight_when_it_validated_several_times_worse():
    from corecast.dataset import Dataset
    from corecast.model import usl
    from corecast.model.priors import Priors
    pri = Priors(default="usl", partner="amdahl", default_weight=0.5, switch_ratio=1e9)
    w, _ = auto.choose({"usl": 0.05, "amdahl": 0.09}, pri)
    assert w == {"usl": 0.5, "amdahl": 0.5}
    w, why = auto.choose({"usl": 0.05, "amdahl": 0.11}, pri)
    assert w == {"usl": 1.0} and "not blended with amdahl" in why and "2x worse" in why
    # End to end: a contended queue whose throughput peaks at 4 threads and falls inside the
    # measured range; Amdahl's law cannot fall, validates far worse and gets no weight, so the
    # prediction keeps the USL's decline (the blend would have halved it in log space).
    rng = np.random.default_rng(7)
    n = np.repeat(np.arange(1.0, 13.0), 2)
    x = usl.usl(n, 0.05, 0.04, 100.0) * np.exp(rng.normal(0, 0.01, n.size))
    a = auto.fit_dataset(Dataset(cores=n, metrics={"throughput": x}), priors=pri)
    assert a.scores["amdahl"] > auto.NO_WEIGHT_RATIO * a.scores["usl"]
    assert a.weights == {"usl": 1.0} and "not blended with amdahl" in a.reason
    p = a.predict([32.0]).value[0]
    assert p == pytest.approx(a.fits["usl"].predict([32.0]).value[0], rel=1e-12)
    assert p < 0.8 * a.fits["amdahl"].predict([32.0]).value[0]


def test_stalls_that_do_not_explain_the_time_are_shown_not_used():
    # A database-like series: throughput stops growing past 8 threads (the CPUs), the lock
    # waits grow a little: the core-time lost to waiting threads is not in any stall column.
    from corecast.dataset import ColumnInfo, Dataset, Machine
    n = np.array([1, 2, 4, 6, 8, 12, 16], dtype=float)
    t = np.where(n <= 8, 100.0 / n, 100.0 / 8)
    locks = 1e6 * n
    ds = Dataset(cores=n, metrics={"time_s": t, "lock_wait_cycles": locks},
                 columns={"lock_wait_cycles": ColumnInfo(name="lock_wait_cycles", kind="stall", unit="cycles", source="shim")},
                 machine=Machine(nominal_freq_hz=2e9))
    ok, why = auto.stalls_explain(ds)
    assert not ok and "accounts for" in why
    a = auto.fit_dataset(ds)
    assert "estima" in a.fits and "estima" not in a.weights
    assert "shown but not used" in a.reason
    assert any("shown but not used" in w for w in a.predict([32]).warnings)
    # the same series whose lock waits do account for the lost core-time: used
    lost = n * t - 100.0
    ds2 = ds.with_column("lock_wait_cycles", lost * 2e9 + 1e6, ColumnInfo(name="lock_wait_cycles", kind="stall", unit="cycles", source="shim"))
    assert auto.stalls_explain(ds2) == (True, "")


def test_auto_falls_back_when_stalls_mislead(monkeypatch):
    # Stall columns unrelated to the time (random noise): the stall method validates worse
    # than time extrapolation; past the tolerance auto drops it.
    rng = np.random.default_rng(0)
    from corecast.dataset import Dataset
    n = np.arange(1, 13, dtype=float)
    t = 100 / n + 1
    junk = np.exp(rng.normal(0, 1.0, len(n))) * 1e9
    ds = Dataset(cores=n, metrics={"time_s": t, "junk_cycles": junk})
    from corecast.model.priors import Priors
    a = auto.fit_dataset(ds, priors=Priors(default="usl", switch_ratio=2.0))
    assert a.scores["estima"] > auto.ESTIMA_TOLERANCE * min(a.scores["timex"], a.scores["usl"])
    assert list(a.weights) == (["estima"] if a.scores["estima"] <= auto.ESTIMA_FLOOR else list(a.weights))
    assert abs(a.predict([24.0]).value[0] / (100 / 24 + 1) - 1) < 0.2
    monkeypatch.setattr(auto, "ESTIMA_FLOOR", 0.01)
    b = auto.fit_dataset(ds, priors=Priors(default="usl", switch_ratio=2.0))
    assert "estima" not in b.weights and "clearly worse" in b.reason
    assert abs(b.predict([24.0]).value[0] / (100 / 24 + 1) - 1) < 0.03


def test_what_auto_fitted_is_not_fitted_again(monkeypatch):
    ds, _, _ = synth.scaling_dataset("lock_hidden", seed=0)
    targets = [16.0, 32.0, 64.0]
    alone = {m: predictors.fit(m, ds, calibrate=True).predict(targets) for m in ("estima", "timex", "usl")}
    counts = fakes.count_fits(monkeypatch, float(ds.cores.max()))
    fits = predictors.fit_many(["auto", "estima", "timex", "usl"], ds, calibrate=True)
    # each method fitted once; auto's other members only where they can carry weight (the
    # shipped priors never let validation displace the default: power and pmnf are not fitted)
    assert all(counts.get(m) == 1 for m in ("estima", "timex", "usl")) and max(counts.values()) == 1
    for m, p in alone.items():        # the same predictions and calibrated bands as fitted alone
        q = fits[m].predict(targets)
        assert np.allclose(q.value, p.value, rtol=1e-12) and np.allclose(q.low, p.low, rtol=1e-12)
        assert np.allclose(q.high, p.high, rtol=1e-12) and q.params["band"] == p.params["band"]


@pytest.mark.slow
def test_predict_plot_does_not_refit_auto_members(cli, lock_csv, tmp_path, monkeypatch):
    from corecast.dataset import load
    path, _ = lock_csv
    counts = fakes.count_fits(monkeypatch, float(load(path).cores.max()))
    r = cli("predict", path, "--cores", CORES, "--plot", tmp_path / "p.png")
    assert r.code == 0, r.err
    assert counts["timex"] == 1 and counts["usl"] == 1 and counts["estima"] == 1
    counts.clear()
    r = cli("predict", path, "--cores", CORES, "--method", "usl", "--plot", tmp_path / "q.png")
    assert r.code == 0, r.err
    assert counts == {"usl": 1, "estima": 1, "timex": 1}       # no auto: the others fitted once each


def test_throughput_only_table_leaves_out_a_meaningless_time(cli, tmp_path):
    """A hash map doing 1.3e8 operations/s showed time_s 7.7e-09 'seconds' in the table; the JSON
    keeps the key (scripts do not break), the table and the HTML report leave it out."""
    p = tmp_path / "x.csv"
    p.write_text("cores,throughput\n1,1.3e8\n2,2.5e8\n4,4.6e8\n8,8.1e8\n")
    r = cli("predict", p, "--cores", "16,32")
    assert r.code == 0, r.err
    assert "time_s" not in r.out and "throughput" in r.out
    r = cli("predict", p, "--cores", "16,32", "--json")
    assert all("time_s" in x for x in r.json()["predictions"])
    html = tmp_path / "r.html"
    r = cli("predict", p, "--cores", "16", "--report", html)
    assert r.code == 0 and "time_s" not in html.read_text().split("Predictions", 1)[1].split("</table>", 1)[0]


def test_a_campaign_whose_runs_all_failed_says_so_not_that_the_column_is_missing():
    # `measure -- false`, then predict: it said "needs a 'time_s' or 'throughput' column to
    # predict (metrics: time_s, ...)", naming the column it said was missing
    from corecast import dataset as D
    from corecast.errors import UserError
    from corecast.model.series import input_metric
    ds = D.Dataset(cores=np.array([1.0, 2.0]), metrics={"time_s": np.array([np.nan, np.nan])})
    with pytest.raises(UserError, match="no run has a value of 'time_s' to predict from") as err:
        input_metric(ds)
    assert "needs a" not in str(err.value)
    with pytest.raises(UserError, match="needs a 'time_s' or 'throughput' column"):
        input_metric(D.Dataset(cores=np.array([1.0, 2.0]), metrics={"rss": np.array([1.0, 2.0])}))


def test_plot_for_a_target_machine_draws_the_printed_prediction(cli, lock_csv, tmp_path, monkeypatch):
    """`predict --target-machine M --plot F` drew the chosen method's fit on the machine measured
    (xz at 192 cores of epyc-9654-2s: 1.17 s in the plot, 1.445 s and a band 0.34-6.0 s in the
    table); the plot's bold line and band must be the numbers printed. Its legend label was cut
    at 70 characters in the middle of a word ('CPU 8.985 s on the co')."""
    import json

    from corecast.report import prediction as R

    drawn = []
    original = R.figure

    def keep(*a, **kw):
        fig = original(*a, **kw)
        drawn.append(fig)
        return fig

    monkeypatch.setattr(R, "figure", keep)
    path, _ = lock_csv
    r = cli("predict", path, "--cores", "16,384", "--target-machine", "epyc-9654-2s", "--json",
            "--plot", tmp_path / "t.png")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    ax = drawn[0].get_axes()[0]
    line = next(ln for ln in ax.get_lines() if ln.get_label().startswith(f"{doc['method']}:"))
    x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
    assert np.all(x == np.round(x))                     # whole threads on a target machine
    for q in doc["predictions"]:
        i = int(np.flatnonzero(x == q["cores"])[0])
        assert y[i] == pytest.approx(q["time_s"], rel=1e-9)
    assert "epyc-9654-2s" in ax.get_title()
    assert R.legend_label("mva: closed network (exact, 1 thread(s) a core): CPU 8.985 s on the cores") \
        == "mva: closed network (exact, 1 thread(s) a core): CPU 8.985 s on the…"
    assert R.legend_label("short") == "short"
