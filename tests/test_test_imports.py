"""The tests' own layout: a test module never imports another test module (what several share
lives in conftest.py, fakes.py, cgref.py or browserkit.py), so that each one can run, move or be deleted alone."""
from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imports_of_test_modules(root: Path) -> list[str]:
    """`file: line: name` for every import, at any depth (inside functions too), of a module
    named test_* that is one of root's test modules."""
    own = {p.stem for p in root.glob("test_*.py")}
    out = []
    for p in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for n in names:
                if n.split(".")[0] in own:
                    out.append(f"{p.name}:{node.lineno}: {n}")
    return out


def test_no_test_module_imports_another():
    assert imports_of_test_modules(TESTS) == []


def test_the_check_finds_an_import_at_any_depth(tmp_path):
    (tmp_path / "test_a.py").write_text("X = 1\n")
    (tmp_path / "test_b.py").write_text("import os\nfrom test_a import X\n")
    (tmp_path / "test_c.py").write_text("def f():\n    import test_a\n    return test_a\n")
    (tmp_path / "fakes.py").write_text("import test_b\nfrom conftest import ROOT\n")
    (tmp_path / "test_d.py").write_text("from fakes import F\nimport conftest\n")
    assert imports_of_test_modules(tmp_path) == ["fakes.py:1: test_b", "test_b.py:2: test_a", "test_c.py:2: test_a"]
