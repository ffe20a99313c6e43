"""The `usl` and `export` commands end to end, and the command line's error contract."""
from __future__ import annotations

import json
import re

import pytest

from conftest import DATA, run_corecast

SPEC = DATA / "usl" / "specsdm91.csv"


def test_json_has_the_documented_keys_and_values(cli):
    r = cli("usl", SPEC, "--json", "--predict", "128,256")
    assert r.code == 0, r.err
    doc = r.json()
    for key in ("alpha", "beta", "gamma", "alpha_se", "beta_se", "gamma_se", "n_max", "n_opt", "x_roof",
                "x_max", "r2", "warnings", "points", "verdict", "amdahl", "predictions"):
        assert key in doc
    assert doc["alpha"] == pytest.approx(0.0277285, rel=1e-3)
    assert doc["n_max"] == pytest.approx(96.51956, rel=1e-3)
    assert [p["cores"] for p in doc["points"]] == [1, 18, 36, 72, 108, 144, 216]
    p0 = doc["points"][0]
    assert set(p0) >= {"cores", "throughput", "fitted", "residual", "efficiency"}
    assert p0["efficiency"] == pytest.approx(0.7211, abs=5e-5)
    assert p0["residual"] == pytest.approx(p0["throughput"] - p0["fitted"])
    assert [q["cores"] for q in doc["predictions"]] == [128, 256]
    assert doc["amdahl"]["beta_needed"] is True


def test_json_without_peak_uses_null_not_infinity(cli):
    r = cli("usl", DATA / "usl" / "raytracer.csv", "--json")
    assert r.code == 0
    assert "Infinity" not in r.out
    doc = r.json()
    assert doc["n_max"] is None and doc["beta"] == 0.0
    assert doc["x_max"] == pytest.approx(doc["x_roof"])


def test_table_output_names_the_verdict_and_warnings(cli):
    r = cli("usl", DATA / "usl" / "clients_without_n1.csv")
    assert r.code == 0
    assert "Verdict:" in r.out and "Amdahl's law" in r.out
    assert "warning: non-monotone at N = 16" in r.out
    assert "note: no measurement at N = 1" in r.out


@pytest.mark.parametrize("ext, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml"), (".pdf", b"%PDF")])
def test_plot_formats(cli, tmp_path, ext, magic):
    out = tmp_path / f"plot{ext}"
    r = cli("usl", SPEC, "--plot", out)
    assert r.code == 0, r.err
    assert out.read_bytes().startswith(magic)


def test_report_is_one_self_contained_page(cli, tmp_path):
    out = tmp_path / "r.html"
    r = cli("usl", SPEC, "--report", out, "--predict", "300")
    assert r.code == 0
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    assert "0.0277" in page and "β is needed" in page
    # Nothing fetched from elsewhere.
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "<script" not in page


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["usl", "missing.csv"], "missing.csv: no such file"),
    (["usl", str(SPEC), "--metric", "time_s"], "unknown metric 'time_s'"),
    (["usl", str(SPEC), "--plot", "x.gif"], "x.gif: cannot tell the plot format"),
    (["usl", str(SPEC), "--level", "2"], "level must be between 0 and 1"),
    (["usl", str(SPEC), "--predict", "0,4"], "'0' is not a core count"),
    (["export", str(SPEC), "-o", "out.xls"], "out.xls: cannot tell the format"),
])
def test_user_mistakes_end_in_one_line_and_status_2(args, message, tmp_path):
    r = run_corecast(*args, cwd=tmp_path)
    assert r.returncode == 2
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


def test_bad_csv_line_is_named(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("cores,throughput\n1,10\n2,oops\n")
    r = run_corecast("usl", p)
    assert r.returncode == 2
    assert r.stderr.strip() == f"corecast usl: error: {p}:3: column 'throughput': 'oops' is not a number"


def test_module_entry_point_and_version():
    r = run_corecast("--version")
    assert r.returncode == 0 and r.stdout.startswith("corecast ")


def test_export_round_trip(cli, tmp_path):
    j = tmp_path / "s.json"
    assert cli("export", SPEC, "-o", j).code == 0
    doc = json.loads(j.read_text())
    assert doc["format"] == "corecast-dataset" and len(doc["rows"]) == 7
    c = tmp_path / "s.csv"
    assert cli("export", j, "-o", c).code == 0
    r = cli("usl", c, "--json")
    assert r.json()["gamma"] == pytest.approx(89.99523, rel=1e-3)
    r = cli("export", SPEC, "--format", "json")
    assert json.loads(r.out)["rows"][0] == {"cores": 1, "throughput": 64.9}


def test_info_describes_columns_and_runs(cli, tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("cores,repetition,time_s,lock_wait_cycles\n1,0,2.0,0\n1,1,2.2,\n2,0,1.1,5e6\n")
    r = cli("info", p, "--json")
    assert r.code == 0
    doc = r.json()
    assert doc["rows"] == 3
    assert doc["cores"] == [{"cores": 1, "runs": 2}, {"cores": 2, "runs": 1}]
    lock = next(c for c in doc["columns"] if c["name"] == "lock_wait_cycles")
    assert (lock["kind"], lock["values"], lock["missing"], lock["max"]) == ("stall", 2, 1, 5e6)
    assert doc["stall_categories"] == ["lock_wait_cycles"]
    assert "time_s" in cli("info", p).out


@pytest.mark.slow
def test_no_library_warning_reaches_the_user(tmp_path):
    """numpy's overflow notices (with source paths) leaked to stderr on data at the edge of
    the floats."""
    from conftest import run_corecast
    p = tmp_path / "flat.csv"
    p.write_text("cores,throughput\n" + "".join(f"{n},1e308\n" for n in (1, 2, 4, 8, 16, 32)))
    r = run_corecast("usl", p, "--json")
    assert r.returncode == 0, r.stderr
    assert "Warning" not in r.stderr and ".py:" not in r.stderr


@pytest.mark.slow
def test_no_warning_of_any_category_reaches_the_user(data_dir):
    """Only RuntimeWarning was kept off stderr: a library's UserWarning (scipy's fit warnings,
    numpy's RankWarning) still printed its source path."""
    import subprocess
    import sys
    code = ("import sys, warnings\n"
            "import corecast.report.usl as R\n"
            "render = R.render_terminal\n"
            "def noisy(*a, **k):\n"
            "    warnings.warn('Covariance of the parameters could not be estimated', UserWarning)\n"
            "    return render(*a, **k)\n"
            "R.render_terminal = noisy\n"
            "from corecast.cli import main\n"
            f"sys.exit(main(['usl', {str(data_dir / 'usl' / 'specsdm91.csv')!r}]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Covariance" not in r.stderr and ".py:" not in r.stderr


@pytest.mark.slow
def test_piped_output_is_not_wrapped(data_dir):
    """Piped into grep, a wrapped line was missed: output to a pipe keeps its lines whole."""
    from conftest import run_corecast
    r = run_corecast("usl", data_dir / "usl" / "specsdm91.csv")
    assert r.returncode == 0, r.stderr
    legend = [line for line in r.stdout.splitlines() if line.startswith("X: measured throughput")]
    assert len(legend) == 1 and legend[0].rstrip().endswith("coherency (β)")


@pytest.mark.parametrize("fmt", ["--json", "--format=table"])
def test_usl_on_a_small_file_imports_no_scipy(fmt):
    """`corecast usl small.csv` spent 0.5 s of its 0.85 s importing scipy.stats for a 7-point fit
    (issue 26): the fit, its t quantile and its F test need none of scipy."""
    import subprocess
    import sys
    code = ("import sys\nfrom corecast.cli import main\n"
            f"rc = main(['usl', {str(SPEC)!r}, {fmt!r}])\n"
            "print('RC', rc, sorted({m.split('.')[0] + '.' + m.split('.')[1] for m in sys.modules "
            "if m.startswith('scipy.')}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    last = r.stdout.strip().splitlines()[-1]
    assert last == "RC 0 []", (last, r.stderr[-500:])
