"""corecast.sched keeps the map's directions: the simulator (everything but enforce/) reads no
/proc or sysfs and imports neither collectors nor the enforcing mode; nothing imports cli."""
from __future__ import annotations

import ast
from pathlib import Path

import corecast.sched

SCHED = Path(corecast.sched.__file__).resolve().parent


def _imports(p: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(p.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = ".".join(["corecast", *p.relative_to(SCHED.parent).parts[:-1]][: len(p.relative_to(SCHED.parent).parts) - node.level + 1]) if node.level else ""
            out.add(f"{base}.{node.module}" if node.level and node.module else (base if node.level else node.module or ""))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def _strings(p: Path) -> list[str]:
    """String constants of the code, docstrings left out."""
    tree = ast.parse(p.read_text())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs]


def test_the_simulator_is_pure():
    for p in SCHED.rglob("*.py"):
        if "enforce" in p.relative_to(SCHED).parts:
            continue
        assert not [s for s in _strings(p) if "/proc" in s or "/sys/" in s], p.name
        for m in _imports(p):
            assert not m.startswith(("corecast.collect", "corecast.sched.enforce", "corecast.cli")), (p.name, m)
            assert "enforce" not in m, (p.name, m)


def test_nothing_below_cli_imports_it():
    for p in list(SCHED.rglob("*.py")) + [SCHED.parent / "report" / "sched.py"]:
        for m in _imports(p):
            assert not m.startswith("corecast.cli"), (p.name, m)
