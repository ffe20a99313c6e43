"""Modules stay under about 600 lines; one that needs more says why in its docstring, in a
paragraph that starts with "Size:" (docs/DEVELOPING.md)."""
from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "corecast"
LIMIT = 600


def oversized(root: Path) -> list[str]:
    """The modules under `root` over LIMIT lines whose docstring has no "Size:" paragraph."""
    out = []
    for p in sorted(root.rglob("*.py")):
        text = p.read_text(encoding="utf-8")
        if text.count("\n") <= LIMIT:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if not any(par.lstrip().startswith("Size:") for par in doc.split("\n\n")):
            out.append(f"{p.relative_to(root)}: {text.count(chr(10))} lines, no 'Size:' paragraph")
    return out


def test_long_modules_say_why():
    assert oversized(SRC) == []


def test_the_check_catches_a_long_module(tmp_path):
    (tmp_path / "short.py").write_text('"""Short."""\n' + "x = 1\n" * 10)
    (tmp_path / "long.py").write_text('"""Long, and silent about it."""\n' + "x = 1\n" * LIMIT)
    (tmp_path / "said.py").write_text('"""Long.\n\nSize: one subject."""\n' + "x = 1\n" * LIMIT)
    assert oversized(tmp_path) == [f"long.py: {LIMIT + 1} lines, no 'Size:' paragraph"]
