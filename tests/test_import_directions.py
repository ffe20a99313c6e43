"""The import directions of docs/DESIGN.md over the whole package (scripts/check_imports.py):
no import loop, no upward import, wherever the import stands (top of a file, inside a
function, under TYPE_CHECKING). The checker is shown failing on made-up packages."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import check_imports as C  # noqa: E402


def _package(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_corecast_keeps_its_directions():
    assert C.check(ROOT / "src") == []


def test_every_layer_of_design_is_named():
    # the packages named in DESIGN.md's arrows, those being built included
    for name, want in {"cli": "cli", "serve": "serve", "report": "report", "collect": "collect",
                       "meters": "collect", "chase": "collect", "model": "model", "sim": "model",
                       "sched": "model", "dataset": "base", "store": "base"}.items():
        assert C.layer(f"corecast.{name}.x") == want, name
    assert not C.may_import("corecast.serve.app", "corecast.cli.predict")      # nothing imports cli
    assert not C.may_import("corecast.model.usl", "corecast.collect.runner")   # models never import collectors
    assert not C.may_import("corecast.sched.policies", "corecast.meters.daemon")
    assert not C.may_import("corecast.dataset", "corecast.model.usl")
    assert C.may_import("corecast.report.campaign", "corecast.collect.runner")
    assert C.may_import("corecast.meters.daemon", "corecast.model.usl")


def test_a_deliberate_loop_fails(tmp_path):
    # b imports a inside a function: still an arrow
    root = _package(tmp_path, {"corecast/__init__.py": "",
                               "corecast/dataset.py": "from . import store\n",
                               "corecast/store.py": "def f():\n    from .dataset import X\n"})
    found = C.check(root)
    assert len(found) == 1 and found[0].startswith("import loop among corecast.dataset, corecast.store")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_imports.py"), str(root)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "import loop among corecast.dataset, corecast.store" in r.stdout
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_imports.py")], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == ""


def test_a_loop_through_a_package_init_fails(tmp_path):
    # x is re-exported by its package's __init__ and imports the package back: a loop; a
    # re-export whose modules do not import the package back is none
    root = _package(tmp_path, {"corecast/__init__.py": "",
                               "corecast/collect/__init__.py": "",
                               "corecast/collect/stat/__init__.py": "from .x import X\nY = 1\n",
                               "corecast/collect/stat/x.py": "from corecast.collect.stat import Y\nX = Y\n",
                               "corecast/collect/events/__init__.py": "from .spec import resolve\n",
                               "corecast/collect/events/spec.py": "from . import abi\ndef resolve(): pass\n",
                               "corecast/collect/events/abi.py": ""})
    assert C.check(root) == ["import loop among corecast.collect.stat, corecast.collect.stat.x: "
                             "corecast.collect.stat -> corecast.collect.stat.x (line 1); "
                             "corecast.collect.stat.x -> corecast.collect.stat (line 1)"]


def test_a_loop_through_the_init_of_another_package_fails(tmp_path):
    # importing corecast.sim.trace runs corecast/sim/__init__.py, which imports the importer back
    root = _package(tmp_path, {"corecast/__init__.py": "",
                               "corecast/sim/__init__.py": "from corecast.model import cpi\n",
                               "corecast/sim/trace.py": "",
                               "corecast/model/__init__.py": "",
                               "corecast/model/cpi.py": "from ..sim.trace import read\n"})
    found = C.check(root)
    assert len(found) == 1 and "import loop among corecast.model.cpi, corecast.sim" in found[0]


@pytest.mark.parametrize("src,dst,text", [
    ("corecast/model/usl.py", "corecast/collect/runner.py", "from ..collect import runner\n"),
    ("corecast/report/plots.py", "corecast/serve/app.py", "from ..serve.app import Dashboard\n"),
    ("corecast/serve/app.py", "corecast/cli/predict.py", "import corecast.cli.predict\n"),
    ("corecast/dataset.py", "corecast/model/usl.py",
     "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .model.usl import Fit\n"),
])
def test_an_upward_import_fails(tmp_path, src, dst, text):
    files = {"corecast/__init__.py": "", src: text, dst: ""}
    for rel in (src, dst):
        parts = Path(rel).parts
        for i in range(2, len(parts)):
            files.setdefault(str(Path(*parts[:i]) / "__init__.py"), "")
    found = C.check(_package(tmp_path, files))
    assert len(found) == 1 and f"{src}:" in found[0] and "upward import" in found[0], found
