"""Shared test helpers."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"


class CliResult:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def cli(capsys):
    """Run `corecast ARGS...` in-process; returns exit code, stdout, stderr."""
    from corecast.cli import main

    def run(*args: str) -> CliResult:
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:  # argparse
            code = e.code if isinstance(e.code, int) else 2
        cap = capsys.readouterr()
        return CliResult(code, cap.out, cap.err)

    return run


def run_corecast(*args: str, **kw) -> subprocess.CompletedProcess:
    """Run corecast in a child process (for signals, preloading, real exit paths)."""
    return subprocess.run([sys.executable, "-m", "corecast", *map(str, args)],
                          capture_output=True, text=True, **kw)


@pytest.fixture
def data_dir() -> Path:
    return DATA
