"""ruff, with the rule set of pyproject.toml ([tool.ruff.lint]), passes on the whole tree: the
suite (and so CI) fails on a syntax error, an undefined name, an unused import or variable, a
redefinition or a mutable default argument. ruff is one of the test extras."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREES = ("src", "tests", "scripts", "bench")


def ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


def test_ruff_is_installed():
    r = subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True, text=True)
    assert r.returncode == 0, "ruff is missing: it is in the test extras (pip install -e '.[test]', or make test)"


def test_the_tree_passes_ruff():
    r = ruff(*TREES)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_rules_catch_what_they_are_for(tmp_path):
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "bad.py").write_text("import os\n\n\ndef f(x=[]):\n    y = 1\n    return undefined\n")
    r = ruff("bad.py", cwd=tmp_path)
    assert r.returncode == 1
    for code in ("F401", "B006", "F841", "F821"):
        assert code in r.stdout, (code, r.stdout)
