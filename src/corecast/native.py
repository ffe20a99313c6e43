"""Where the compiled parts (native/, workloads/) live once corecast is installed."""
from __future__ import annotations

from pathlib import Path

from .errors import UserError

NATIVE_DIR = Path(__file__).resolve().parent / "_native"


def native_path(name: str) -> Path:
    """Path of a compiled product (a shared library, an executable or a header directory).

    Raises UserError when it is missing: corecast was installed without a C compiler, or a
    source checkout was never built.
    """
    p = NATIVE_DIR / name
    if not p.exists():
        raise UserError(
            f"corecast's compiled component '{name}' is missing from {NATIVE_DIR} "
            "(install gcc, then reinstall corecast with `pip install .` or run `make setup`)")
    return p


def include_dir() -> Path:
    return native_path("include")
