#!/usr/bin/env python3
"""Generate corecast's man pages and shell completions from its argument parser.

    python scripts/gen_cli_docs.py [OUTDIR]      # default: the tree's man/ and completions/

Man pages come from argparse-manpage, completions (bash, zsh) from shtab: both read the very
parser the command line uses, so nothing is written by hand. The outputs are kept in the tree
(installed by meson.build); tests/test_cli_docs.py fails when they no longer match the parser.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parser() -> argparse.ArgumentParser:
    from corecast.cli import build_parser
    return build_parser(None)


def subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def man_page(p: argparse.ArgumentParser, prog: str) -> str:
    from build_manpages.manpage import Manpage
    p.prog = prog
    data = {"prog": prog, "project_name": "corecast", "url": "", "authors": ["the corecast developers"],
            "version": _version(), "manual_section": 1, "manual_title": "corecast manual"}
    return str(Manpage(p, _data=data, format="pretty"))


def _version() -> str:
    from corecast import __version__
    return __version__


_DATE = re.compile(r'^(\.TH .*?) "\d{4}\\-\d\d\\-\d\d"', re.M)


def _write_page(path: Path, text: str) -> None:
    """Write a man page, keeping the date of the page already there when nothing else changed
    (a regeneration on another day is then no change at all)."""
    if path.exists():
        old = path.read_text()
        m = _DATE.search(old)
        if m and _DATE.sub(r'\1 "DATE"', old) == _DATE.sub(r'\1 "DATE"', text):
            text = old
    path.write_text(text)


def generate(out: Path) -> list[Path]:
    import shtab
    written = []
    man = out / "man"
    comp = out / "completions"
    man.mkdir(parents=True, exist_ok=True)
    comp.mkdir(parents=True, exist_ok=True)
    top = parser()
    for name, sub in sorted(subparsers(top).items()):
        path = man / f"corecast-{name}.1"
        _write_page(path, man_page(sub, f"corecast {name}"))
        written.append(path)
    path = man / "corecast.1"
    _write_page(path, man_page(parser(), "corecast"))
    written.append(path)
    for shell in ("bash", "zsh"):
        path = comp / f"corecast.{shell}"
        path.write_text(shtab.complete(parser(), shell=shell))
        written.append(path)
    return written


if __name__ == "__main__":
    dest = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    for p in generate(dest):
        print(p.relative_to(dest))
