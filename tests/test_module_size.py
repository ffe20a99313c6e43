"""Modules stay under about 600 lines; one that needs more says why in its docstring, in a
paragraph that starts with "Size:" (docs/DEVELOPING.md). No module of the project -- corecast
itself, its tests, scripts and benchmarks -- is over 1,000 lines, whatever its note says."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "corecast"
LIMIT = 600
HARD_LIMIT = 1000
TREES = ("src", "tests", "scripts", "bench")


def _lines(p: Path) -> int:
    return p.read_text(encoding="utf-8").count("\n")


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


def too_long(root: Path, trees=TREES) -> list[str]:
    """The Python modules under root's `trees` over HARD_LIMIT lines, a Size: note or not."""
    return [f"{p.relative_to(root)}: {_lines(p)} lines (at most {HARD_LIMIT})"
            for t in trees for p in sorted((root / t).rglob("*.py")) if _lines(p) > HARD_LIMIT]


def test_long_modules_say_why():
    assert oversized(SRC) == []


def test_no_module_over_the_hard_limit():
    assert too_long(ROOT) == []


def test_the_check_catches_a_long_module(tmp_path):
    (tmp_path / "short.py").write_text('"""Short."""\n' + "x = 1\n" * 10)
    (tmp_path / "long.py").write_text('"""Long, and silent about it."""\n' + "x = 1\n" * LIMIT)
    (tmp_path / "said.py").write_text('"""Long.\n\nSize: one subject."""\n' + "x = 1\n" * LIMIT)
    assert oversized(tmp_path) == [f"long.py: {LIMIT + 1} lines, no 'Size:' paragraph"]


def test_a_size_note_does_not_excuse_a_module_over_the_hard_limit(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "said.py").write_text('"""Long.\n\nSize: one subject."""\n' + "x = 1\n" * HARD_LIMIT)
    (tmp_path / "src" / "fits.py").write_text('"""Long.\n\nSize: one subject."""\n' + "x = 1\n" * (HARD_LIMIT - 3))
    assert too_long(tmp_path, ("src",)) == [f"src/said.py: {HARD_LIMIT + 3} lines (at most {HARD_LIMIT})"]
    assert oversized(tmp_path / "src") == []
