"""corecast.model runs one way: no import loop inside it, no import done inside a function, and
nothing above it (collectors, the CLI, reports) imported from it."""
from __future__ import annotations

import ast
from pathlib import Path

import corecast.model

MODEL = Path(corecast.model.__file__).resolve().parent
#: Optional third-party packages, imported where used so that corecast runs without them
#: (Extra-P needs numpy < 2 and lives in the benchmark environment).
OPTIONAL = {"extrap"}


def _imports(path: Path) -> tuple[set[str], list[int]]:
    """Modules of corecast a model file imports at its top level (as 'corecast.x.y'), and the
    lines of imports made inside a function or class."""
    tree = ast.parse(path.read_text())
    top: set[str] = set()
    nested: list[int] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if node not in tree.body:
            mod = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            if getattr(node, "level", 0) or (mod or "").split(".")[0] not in OPTIONAL:
                nested.append(node.lineno)
            continue
        if isinstance(node, ast.ImportFrom) and node.level:
            base = ["corecast", "model"][: 3 - node.level] if node.level <= 2 else []
            mod = ".".join(base + ([node.module] if node.module else []))
            if node.module:
                top.add(mod)
            for a in node.names:       # `from . import usl` imports the module corecast.model.usl
                top.add(f"{mod}.{a.name}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("corecast"):
            top.add(node.module)
        elif isinstance(node, ast.Import):
            top.update(a.name for a in node.names if a.name.startswith("corecast"))
    return top, nested


def _graph() -> dict[str, set[str]]:
    mods = {f"corecast.model.{p.stem}": p for p in MODEL.glob("*.py") if p.stem != "__init__"}
    return {m: {d for d in _imports(p)[0] if d in mods and d != m} for m, p in mods.items()}


def test_no_import_inside_a_function():
    for p in MODEL.glob("*.py"):
        assert _imports(p)[1] == [], f"{p.name}: imports inside a function or class at lines {_imports(p)[1]}"


def test_model_imports_only_downward():
    # corecast.target describes machines and corecast.memprofile their memory (as corecast.dataset
    # describes measurements): below the models; corecast.sim shares the models' layer (its
    # machine descriptions and results feed the CPI stack); corecast.parsing reads what a user
    # gives (its one bounded reader of JSON and TOML files), below every layer; corecast.native
    # (the base layer's process helpers: the scorecard's worker pool ends with its parent)
    allowed = ("corecast.model", "corecast.dataset", "corecast.errors", "corecast.target", "corecast.memprofile",
               "corecast.sim", "corecast.parsing", "corecast.native")
    for p in MODEL.glob("*.py"):
        for d in _imports(p)[0]:
            assert d.startswith(allowed), f"{p.name} imports {d}"


def test_no_import_loop():
    g = _graph()
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(g[m]):
            assert state.get(d) != 1, "import loop: " + " -> ".join(path + [m, d])
            if d not in state:
                visit(d, path + [m])
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m, [])


def test_the_layers():
    g = _graph()
    # series under every method; the registry above the methods; calibration above the
    # registry; auto above calibration; predictors on top.
    assert g["corecast.model.series"] <= {"corecast.model.base"}
    for low in ("timex", "estima", "laws", "twopoint", "series", "methods"):
        up = {"corecast.model.calibration", "corecast.model.auto", "corecast.model.predictors"}
        assert not (g[f"corecast.model.{low}"] & up), f"{low} imports from above it"
    # above predictors: the hold-out evaluation, the corpus scorecard and the predict use case;
    # the corpus' data and the priors under every method, the learning of the priors above auto,
    # below predictors.
    top = {"corecast.model.evaluate", "corecast.model.scorecard", "corecast.model.usecase"}
    assert "corecast.model.usecase" not in set().union(*(g[m] for m in g))
    assert "corecast.model.predictors" not in set().union(*(g[m] for m in g if m not in top))
    assert "corecast.model.scorecard" not in set().union(*(g[m] for m in g))
    assert g["corecast.model.corpus"] <= {"corecast.model.base"}
    assert g["corecast.model.priors"] == set()
    assert "corecast.model.learn" in g["corecast.model.scorecard"]
    assert "corecast.model.predictors" not in g["corecast.model.learn"]
