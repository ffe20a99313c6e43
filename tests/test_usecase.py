"""The predict use case in the model layer (model.usecase): options validated once when built,
one `predict` that the command line, the dashboard and evaluate call, the dataset given never
changed, and report/ rendering only (it fits nothing)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from corecast import dataset as ds_mod
from corecast.errors import UserError
from corecast.model import usecase
from corecast.model.usecase import PredictOptions, Target
from corecast.report import documents as D
from corecast.target import parse_spec

from conftest import DATA
from fakes import stalls_csv

ROOT = Path(__file__).resolve().parent.parent
RAYTRACER = DATA / "usl" / "raytracer.csv"


@pytest.mark.parametrize("kw, message", [
    (dict(method="bogus"), "unknown method 'bogus'"),
    (dict(checkpoints=0), "--checkpoints 0: at least 1"),
    (dict(clock=1e9), "--clock 1e+09: give the clock frequency in GHz"),
    (dict(freq_ratio=-1.0), "--freq-ratio must be a number > 0"),
    (dict(size_ratio=float("nan")), "--size-ratio must be a number > 0"),
    (dict(size_ratio=2.0, target_size=10.0), "give --size-ratio or --target-size, not both"),
    (dict(kernels="Rat22,NoSuchKernel"), "--kernels:"),
])
def test_a_mistake_in_the_options_is_said_when_they_are_built(kw, message):
    with pytest.raises(UserError) as err:
        PredictOptions(**kw)
    assert message in str(err.value)


def test_a_target_checks_its_placement_and_yield():
    spec = parse_spec("sockets=1,cores=8,smt=2")
    with pytest.raises(UserError, match="placement 'diagonal'"):
        Target(spec, "diagonal")
    with pytest.raises(UserError, match="--smt-yield 1.5"):
        Target(spec, smt_yield=1.5)
    assert Target(spec, "spread", 0.3).placement == "spread"


def test_options_typed_as_lists_become_names():
    o = PredictOptions(kernels=" Rat22, ,Poly25 ", stalls="lock_wait_cycles,")
    assert o.kernels == ("Rat22", "Poly25") and o.stalls == ("lock_wait_cycles",)
    assert PredictOptions(kernels="", stalls=" , ").kernels is None
    kw = PredictOptions(kernels="paper", refit=True).fit_kwargs(ds_mod.load(RAYTRACER))
    assert [k.name for k in kw["kernels"]] == ["Rat22", "Rat23", "Rat33", "CubicLn", "ExpRat", "Poly25"]
    assert kw["use"] == "all" and kw["size_ratio"] == 1.0 and "categories" not in kw


def test_an_unknown_stall_category_is_said_against_the_data():
    with pytest.raises(UserError, match="no_such_cycles"):
        PredictOptions(stalls="no_such_cycles").fit_kwargs(ds_mod.load(RAYTRACER))


def test_a_clock_goes_into_a_copy_not_into_the_data_given(tmp_path):
    data = ds_mod.load(stalls_csv(tmp_path / "stalls.csv"))
    before = data.machine.nominal_freq_hz
    result = usecase.predict(data, PredictOptions(method="estima", clock=2.5))
    assert data.machine.nominal_freq_hz == before != 2.5e9
    assert result.data.machine.nominal_freq_hz == 2.5e9
    # and the clock matters: a stalled cycle is 0.4 ns at 2.5 GHz and 1 ns at 1 GHz
    waits = [D.predict_doc(r, "x", [32.0], 0.8)["lost_core_time"]["categories"][1]["wait_core_s"]
             for r in (result, usecase.predict(data, PredictOptions(method="estima", clock=1.0)))]
    assert waits[1] == pytest.approx(2.5 * waits[0], rel=1e-9)


def test_the_command_line_prints_what_the_use_case_predicts(cli, tmp_path):
    path = stalls_csv(tmp_path / "stalls.csv")
    r = cli("predict", path, "--cores", "16,32", "--method", "estima", "--level", "0.9", "--json")
    assert r.code == 0
    got = D.predict_doc(usecase.predict(ds_mod.load(path), PredictOptions(method="estima")), str(path),
                        [16.0, 32.0], 0.9)
    assert r.json() == json.loads(json.dumps(got))


def test_for_a_target_the_command_line_prints_what_the_use_case_predicts(cli):
    spec = "sockets=2,cores=8,smt=2"
    r = cli("predict", RAYTRACER, "--cores", "24,48", "--method", "usl", "--target-machine", spec,
            "--placement", "spread", "--json")
    assert r.code == 0
    result = usecase.predict(ds_mod.load(RAYTRACER), PredictOptions(method="usl"),
                             Target(parse_spec(spec), "spread"))
    got = json.loads(json.dumps(D.predict_doc(result, str(RAYTRACER), [24.0, 48.0], 0.8)))
    assert r.json() == got
    # the target is the prediction's: the same fit on the measured machine differs at 48 threads
    # (beyond the 32 CPUs of the target)
    plain = usecase.predict(ds_mod.load(RAYTRACER), PredictOptions(method="usl"))
    assert plain.fitted.predict([48.0]).value[0] != pytest.approx(result.fitted.predict([48.0]).value[0], rel=1e-3)


def _calls(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            names.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
    return names


def test_report_renders_and_fits_nothing():
    """report/ receives results: no fitting, target carrying or analysis is called from it."""
    fitting = {"fit", "fit_many", "fit_for_target", "fit_dataset", "analyze_dataset", "measured_machine",
               "calibrated", "fit_options"}
    for path in sorted((ROOT / "src" / "corecast" / "report").glob("*.py")):
        assert not _calls(path) & fitting, path


def test_one_predict_for_the_command_line_the_dashboard_and_evaluate():
    src = ROOT / "src" / "corecast"
    for rel in ("cli/predict.py", "serve/app.py"):
        text = (src / rel).read_text()
        assert "usecase.predict(" in text and "fit_for_target" not in text and "fit_many" not in text, rel
    # evaluate builds its options through predict's one builder, validated before anything is fitted
    assert "po = options(args)" in (src / "cli" / "evaluate.py").read_text()
