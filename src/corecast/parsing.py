"""Values typed by a person (core lists, levels), parsed for the commands and the dashboard alike."""
from __future__ import annotations

import argparse
import json
import math
import re
from typing import Any

from .errors import UserError


MAX_COUNTS = 10_000   # core counts one list may name: bounds what a range expands to
#: The largest core count corecast takes, typed or in a file: 2^20, sixteen times the largest
#: machines built (Linux's NR_CPUS tops out at 8,192; a cluster-wide USL curve may go further).
MAX_CORES = 1 << 20
#: The most rows a Dataset file may hold (a measurement is runs × repetitions; a meters recording
#: at 100 ms covers 27 hours): 3.4 million rows (a 50 MB CSV) took predict 264 s and 3.2 GB.
MAX_ROWS = 1_000_000
#: The largest Dataset file read (CSV or JSON; a campaign is bounded by its rows).
MAX_DATASET_BYTES = 256 << 20
#: The deepest nesting of a JSON document a user gives (corecast's own go 4 deep): a 100,000-deep
#: array raised RecursionError.
MAX_JSON_DEPTH = 64


def json_document(text: str | bytes, what: str) -> Any:
    """json.loads of a file a user gave, with its nesting bounded (MAX_JSON_DEPTH): deeper is one
    UserError line naming `what`. json.JSONDecodeError passes through, for the caller's message."""
    try:
        doc = json.loads(text)
    except RecursionError:
        raise UserError(f"{what}: JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    todo: list[tuple[Any, int]] = [(doc, 1)]
    while todo:
        v, depth = todo.pop()
        if depth > MAX_JSON_DEPTH:
            raise UserError(f"{what}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
        items = v.values() if isinstance(v, dict) else v
        todo.extend((x, depth + 1) for x in items if isinstance(x, (dict, list)))
    return doc


def core_count_bound(v: float, what: str) -> None:
    """A UserError naming `what` for a core count above MAX_CORES."""
    if v > MAX_CORES:
        raise UserError(f"{what}: {v:g} cores is above {MAX_CORES:,}, the most corecast takes")


def finite(text: object, what: str) -> float:
    """A finite number, or a UserError naming `what` (a column, a file and line, a query
    parameter): "WHAT: 'x' is not a number" or "... is not a finite number" (nan, inf)."""
    s = str(text).strip()
    try:
        v = float(s)
    except ValueError:
        raise UserError(f"{what}: '{s}' is not a number") from None
    if not math.isfinite(v):
        raise UserError(f"{what}: '{s}' is not a finite number")
    return v


def core_list(text: str) -> list[float]:
    """`16,24,32`, ranges `1-16`, and steps `1-64:2x` (doubling) or `8-64:8` (step 8)."""
    out: list[float] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part[1:]:
                rng, _, step = part.partition(":")
                a, b = rng.split("-", 1)
                lo, hi = int(a), int(b)
                if lo <= 0 or hi < lo:
                    raise ValueError
                if hi > MAX_CORES:
                    raise argparse.ArgumentTypeError(f"'{part}': {hi:,} cores is above {MAX_CORES:,}, "
                                                     "the most corecast takes")
                if step.endswith("x"):
                    k = int(step[:-1])
                    if k < 2:
                        raise ValueError
                    v = lo
                    while v <= hi:
                        out.append(float(v))
                        v *= k
                else:
                    s = int(step) if step else 1
                    if s <= 0:
                        raise ValueError
                    if (hi - lo) // s + 1 + len(out) > MAX_COUNTS:
                        raise argparse.ArgumentTypeError(
                            f"'{part}' names {(hi - lo) // s + 1:,} core counts; at most {MAX_COUNTS:,} "
                            "(use a step: 1-1000000:2x doubles, 8-4096:8 steps by 8)")
                    out.extend(float(v) for v in range(lo, hi + 1, s))
            else:
                v = float(part)
                if not v > 0 or v != v or v == float("inf"):
                    raise ValueError
                if v > MAX_CORES:
                    raise argparse.ArgumentTypeError(f"'{part}': {v:g} cores is above {MAX_CORES:,}, "
                                                     "the most corecast takes")
                out.append(v)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"'{part}' is not a core count or range (examples: 16,24,32  1-16  1-64:2x)") from None
    if not out:
        raise argparse.ArgumentTypeError("no core counts given")
    return sorted(set(out))


def level(text: str) -> float:
    try:
        v = float(text.rstrip("%")) / (100.0 if text.endswith("%") else 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a level (e.g. 0.95 or 95%)") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"level must be between 0 and 1 (got {text})")
    return v


def seconds(text: object, what: str = "interval", allow_zero: bool = False) -> float:
    """A duration a person writes: seconds (0.5), or with a unit (100ms, 0.1s, 250us).
    ValueError with the reason otherwise."""
    if isinstance(text, bool):
        raise ValueError(f"{what}: '{text}' is not a duration (e.g. 0.5, 100ms, 2s)")
    if isinstance(text, (int, float)):
        v = float(text)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(us|ms|s)?\s*", str(text))
        if not m:
            raise ValueError(f"{what}: '{text}' is not a duration (e.g. 0.5, 100ms, 2s)")
        v = float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, None: 1.0}[m.group(2)]
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise ValueError(f"{what}: '{text}' is not a positive duration" if not allow_zero
                         else f"{what}: '{text}' is not a duration >= 0")
    return v


def interval(text: str) -> float:
    """An argparse type: seconds, or with a unit: 100ms, 0.1s, 250us."""
    try:
        return seconds(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an interval (e.g. 0.5, 100ms, 2s)") from None


def listen_address(text: str) -> tuple[str, int]:
    """--listen: `HOST:PORT`, `[IPv6]:PORT`, `:PORT` (loopback) or `PORT`; UserError otherwise."""
    text = text.strip()
    host, port_s = "127.0.0.1", text
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or not text[end + 1:].startswith(":"):
            raise UserError(f"--listen {text}: give [ADDRESS]:PORT")
        host, port_s = text[1:end], text[end + 2:]
    elif ":" in text:
        host, port_s = text.rsplit(":", 1)
        host = host or "127.0.0.1"
    try:
        port = int(port_s)
    except ValueError:
        raise UserError(f"--listen {text}: '{port_s}' is not a port number") from None
    if not 0 <= port <= 65535:
        raise UserError(f"--listen {text}: port {port} is out of range (0-65535)")
    return host, port


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
          "tib": 1 << 40}


def byte_size(text: str) -> int:
    """A size in bytes: `4096`, `16KiB`, `256MiB`, `1g`, `1.5m` (K, M, G, T are powers of 1024,
    with or without `iB`/`B`)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size (examples: 4096, 16KiB, 256MiB, 1GiB)")
    v = float(m.group(1)) * _UNITS[unit]
    if v != int(v):
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of bytes")
    return int(v)
