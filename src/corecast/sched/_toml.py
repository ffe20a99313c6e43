"""Reading the TOML descriptions of `corecast sched`: a bundled name or a file, every failure one
line (`UserError`), and small checkers for the values a person types into them."""
from __future__ import annotations

import math
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from ..errors import UserError
from ..parsing import read_document


def bundled(folder: str) -> list[str]:
    """Names of the TOML files bundled in `corecast/sched/<folder>/`."""
    d = resources.files("corecast.sched") / folder
    return sorted(p.name[:-5] for p in d.iterdir() if p.name.endswith(".toml"))


def read(name_or_path: str | Path, folder: str, what: str) -> tuple[dict[str, Any], str]:
    """The TOML table of a bundled name (in `folder`) or a file, and where it came from."""
    text = str(name_or_path)
    path = Path(text)
    if not (text.endswith(".toml") or path.exists()):
        cand = resources.files("corecast.sched") / folder / f"{text}.toml"
        if not cand.is_file():
            raise UserError(f"unknown {what} '{text}': give a TOML file or one of "
                            f"{', '.join(bundled(folder))}")
        return tomllib.loads(cand.read_text(encoding="utf-8")), text      # bundled: corecast's own
    return read_document(path, what, "toml"), str(path)


def number(d: Mapping[str, Any], key: str, where: str, *, default: float | None = None,
           low: float | None = None, high: float | None = None, strict_low: bool = False,
           required: bool = False) -> float | None:
    """A finite number at d[key] within [low, high] (low excluded when strict_low)."""
    if key not in d:
        if required:
            raise UserError(f"{where}: '{key}' is missing")
        return default
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise UserError(f"{where}: '{key}' must be a number (got {v!r})")
    v = float(v)
    if low is not None and (v < low or (strict_low and v == low)):
        rel = ">" if strict_low else ">="
        raise UserError(f"{where}: '{key}' must be {rel} {low:g} (got {v:g})")
    if high is not None and v > high:
        raise UserError(f"{where}: '{key}' must be <= {high:g} (got {v:g})")
    return v


def whole(d: Mapping[str, Any], key: str, where: str, *, default: int | None = None,
          low: int = 0, high: int | None = None, required: bool = False) -> int | None:
    """A whole number at d[key] within [low, high]."""
    if key not in d:
        if required:
            raise UserError(f"{where}: '{key}' is missing")
        return default
    v = d[key]
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise UserError(f"{where}: '{key}' must be a whole number (got {v!r})")
    if v < low or (high is not None and v > high):
        span = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise UserError(f"{where}: '{key}' must be {span} (got {v})")
    return v


def text(d: Mapping[str, Any], key: str, where: str, default: str = "") -> str:
    v = d.get(key, default)
    if not isinstance(v, str):
        raise UserError(f"{where}: '{key}' must be a string (got {v!r})")
    return v


def unknown_keys(d: Mapping[str, Any], allowed: set[str], where: str) -> None:
    """A key that is not one of `allowed` is a mistake (a typo would otherwise be ignored)."""
    extra = sorted(set(d) - allowed)
    if extra:
        raise UserError(f"{where}: unknown key '{extra[0]}' (known: {', '.join(sorted(allowed))})")
