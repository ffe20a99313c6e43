"""Values typed by a person, parsed for the commands, the files they read and the dashboard
alike: core lists, levels, listen addresses, and the one vocabulary of units (time, size,
frequency, rate) with the bounds every value is checked against (docs/units.md)."""
from __future__ import annotations

import argparse
import json
import math
import re
from typing import Any, Callable

from .errors import UserError, read_input


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


#: The largest JSON or TOML file a user gives corecast -- a description, a model, a simulation
#: result, a miss curve, a memory profile, a trigger or plugin file -- read by `read_document`:
#: corecast's own are kilobytes (a miss curve or a result of many levels, a few megabytes).
MAX_DOCUMENT_BYTES = 64 << 20


def _bounded_depth(doc: Any, what: str, fmt: str) -> Any:
    """`doc` if no list or table in it is nested deeper than MAX_JSON_DEPTH, else a UserError."""
    todo: list[tuple[Any, int]] = [(doc, 1)]
    while todo:
        v, depth = todo.pop()
        if depth > MAX_JSON_DEPTH:
            raise UserError(f"{what}: {fmt} nested deeper than {MAX_JSON_DEPTH} levels")
        if not isinstance(v, (dict, list)):
            continue            # a scalar document (`null`, `5`): nothing nested
        items = v.values() if isinstance(v, dict) else v
        todo.extend((x, depth + 1) for x in items if isinstance(x, (dict, list)))
    return doc


def json_document(text: str | bytes, what: str) -> Any:
    """json.loads of a file a user gave, with its nesting bounded (MAX_JSON_DEPTH): deeper is one
    UserError line naming `what`. json.JSONDecodeError passes through, for the caller's message."""
    try:
        doc = json.loads(text)
    except RecursionError:
        raise UserError(f"{what}: JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    return _bounded_depth(doc, what, "JSON")


def toml_document(text: str, what: str) -> dict[str, Any]:
    """tomllib.loads of a file a user gave, with its nesting bounded as JSON's (tomllib recurses:
    a 100,000-deep array raised RecursionError). tomllib.TOMLDecodeError passes through."""
    import tomllib          # here for start-up time: most commands read no TOML
    try:
        doc = tomllib.loads(text)
    except RecursionError:
        raise UserError(f"{what}: TOML nested deeper than {MAX_JSON_DEPTH} levels") from None
    return _bounded_depth(doc, what, "TOML")


def read_document(path: Any, what: str, fmt: str, *, limit: int = MAX_DOCUMENT_BYTES,
                  expected: str = "") -> Any:
    """The one reader of a JSON or TOML file a user gives (`fmt` "json" or "toml"; "text" gives the
    text itself): at most `limit` bytes (errors.read_input: a FIFO never blocks, a folder is one
    line), UTF-8 with or without a byte-order mark, nesting bounded (MAX_JSON_DEPTH). Every failure
    is one UserError line naming the file: `PATH:LINE: not valid JSON (MSG)`, `PATH: not valid
    TOML (MSG)`, `PATH: not a text file`, the size bound; `expected` (what the file should be, such
    as "`corecast sim --json` output") is added to a parse error."""
    raw = read_input(path, what, limit=limit)[0]
    hint = f"; {expected} expected" if expected else ""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file ({'text' if fmt == 'text' else fmt.upper()} expected)") from None
    if fmt == "text":
        return text
    if fmt == "json":
        try:
            return json_document(text, str(path))
        except json.JSONDecodeError as err:
            raise UserError(f"{path}:{err.lineno}: not valid JSON ({err.msg}){hint}") from None
    if fmt == "toml":
        import tomllib
        try:
            return toml_document(text, str(path))
        except tomllib.TOMLDecodeError as err:
            raise UserError(f"{path}: not valid TOML ({err}){hint}") from None
    raise ValueError(f"read_document: unknown format {fmt!r}")


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
    """A duration a person writes (see `time_s`), for callers that want a ValueError with the
    reason (the meters' triggers file)."""
    try:
        return time_s(text, what, allow_zero=allow_zero, noun="duration")
    except UserError as err:
        raise ValueError(str(err)) from None


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


# ------------------------------------------------------------------------ units
# The one vocabulary of units: every command's time, size, frequency and rate options, the
# TOML files' sizes and durations (sim machines, meters triggers) and the dashboard read them
# here, so that a spelling one accepts every other accepts too (docs/units.md).

#: Seconds per unit of time; a bare number is in seconds (or in the option's stated unit).
TIME_UNITS: dict[str, float] = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0,
                                "m": 60.0, "min": 60.0, "h": 3600.0}
#: Bytes per unit of size, case-insensitive. K, M, G and T are powers of 1024 with or without
#: `B` or `iB`: KB, MB, GB and TB are read as KiB, MiB, GiB and TiB (as cache and memory sizes
#: are quoted), never as powers of 1000.
SIZE_UNITS: dict[str, int] = {"": 1, "b": 1,
                              **{p + s: 1 << (10 * (i + 1)) for i, p in enumerate("kmgt")
                                 for s in ("", "b", "ib")}}
#: Hertz per unit of frequency, case-insensitive; a bare number is in hertz.
FREQUENCY_UNITS: dict[str, float] = {"hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}
#: Events per second per unit of rate: `1000/s`, `2/ms`, `30/min`; a bare number is per second.
RATE_UNITS: dict[str, float] = {f"/{u}": 1.0 / s for u, s in TIME_UNITS.items()}

#: The bounds every value of a kind has unless its option states tighter ones.
MAX_TIME_S = 30 * 86400.0          # 720h: longer than any measurement or simulation here
MAX_SIZE = 1 << 50                 # 1024TiB: more than any machine's memory
MAX_FREQUENCY_HZ = 1e12            # 1000GHz
MAX_RATE = 1e15                    # per second
MAX_SEED = (1 << 63) - 1           # seeds: 0 .. 2^63 - 1 (every generator takes them whole)

_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_QUANTITY = re.compile(rf"\s*({_NUMBER})\s*(\S*?)\s*")
_WHOLE = re.compile(rf"\s*(-?)({_NUMBER})\s*")


def _say(what: str | None, text: object, message: str) -> UserError:
    """One line: `WHAT: 'TEXT' MESSAGE` (without WHAT for argparse, which names the option)."""
    return UserError(f"{what}: '{text}' {message}" if what else f"'{text}' {message}")


def _a(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


def _fmt(value: float, units: dict[str, float], order: tuple[str, ...]) -> str:
    """`value` in the largest of the units `order` names that it reaches (1h, 10 s, 1ms)."""
    for u in order:
        if value >= units[u] or u == order[-1]:
            v = value / units[u]
            return f"{v:g} s" if u == "s" else f"{v:g}{u}"
    return f"{value:g}"


def fmt_time(seconds: float) -> str:
    return _fmt(seconds, TIME_UNITS, ("h", "min", "s", "ms", "us", "ns"))


def fmt_size(n: float) -> str:
    for u in ("TiB", "GiB", "MiB", "KiB"):
        m = SIZE_UNITS[u.lower()]
        if n >= m and n % m == 0:
            return f"{int(n // m)}{u}"
    return f"{n:g} bytes"


def fmt_frequency(hz: float) -> str:
    return _fmt(hz, {"GHz": 1e9, "MHz": 1e6, "kHz": 1e3, "Hz": 1.0}, ("GHz", "MHz", "kHz", "Hz"))


def fmt_rate(per_s: float) -> str:
    return f"{per_s:g}/s"


def _bounded(v: float, text: object, what: str | None, show: Callable[[float], str], *,
             low: float | None, high: float | None, allow_zero: bool) -> float:
    """`v` within the bounds, or the UserError that names the value and the bound."""
    if not math.isfinite(v) or (high is not None and v > high):
        if high is None:
            raise _say(what, text, "is not finite")
        raise _say(what, text, f"is out of bounds: at most {show(high)}")
    if v < 0:
        raise _say(what, text, "must be 0 or more" if allow_zero else "must be more than 0")
    if v == 0 and not allow_zero:
        raise _say(what, text, "must be more than 0")
    if low is not None and v < low:
        raise _say(what, text, f"is out of bounds: at least {show(low)}")
    return v


def _quantity(text: object, what: str | None, noun: str, units: dict[str, Any], default: str,
              examples: str, fold: bool) -> float:
    if isinstance(text, bool):
        raise _say(what, text, f"is not {_a(noun)} ({examples})")
    if isinstance(text, (int, float)):
        return float(text) * units[default]
    m = _QUANTITY.fullmatch(str(text))
    unit = (m.group(2).lower() if fold else m.group(2)) if m else None
    if unit == "":
        unit = default
    if m is None or unit not in units:
        raise _say(what, text, f"is not {_a(noun)} ({examples})")
    return float(m.group(1)) * units[unit]


def time_s(text: object, what: str | None = None, *, low: float | None = None, high: float = MAX_TIME_S,
           allow_zero: bool = False, unit: str = "s", noun: str = "time") -> float:
    """Seconds from `0.5`, `500ms`, `250us`, `250µs`, `100ns`, `2s`, `1.5min`, `1m`, `1h` (a
    bare number is in `unit`), within [low, high] and above 0 unless `allow_zero`; a mistake
    is a UserError naming `what`, the value and the bound."""
    v = _quantity(text, what, noun, TIME_UNITS, unit,
                  f"e.g. 0.5, 100ms, 2s, 250us, 1min{', a bare number is ' + unit if unit != 's' else ''}", False)
    return _bounded(v, text, what, fmt_time, low=low, high=high, allow_zero=allow_zero)


def size_bytes(text: object, what: str | None = None, *, low: int | None = None, high: int = MAX_SIZE,
               allow_zero: bool = False, noun: str = "size") -> int:
    """Bytes from `4096`, `16KiB`, `256MiB`, `1g`, `1.5M`, `64B` (see SIZE_UNITS), a whole
    number within [low, high] and above 0 unless `allow_zero`."""
    if isinstance(text, float) and not text.is_integer():
        raise _say(what, text, "is not a whole number of bytes")
    v = _quantity(text, what, noun, SIZE_UNITS, "", "e.g. 4096, 64B, 16KiB, 256MiB, 1GiB", True)
    _bounded(v, text, what, fmt_size, low=low, high=high, allow_zero=allow_zero)
    if v != int(v):
        raise _say(what, text, "is not a whole number of bytes")
    return int(v)


def frequency_hz(text: object, what: str | None = None, *, low: float | None = None,
                 high: float = MAX_FREQUENCY_HZ) -> float:
    """Hertz from `2.5GHz`, `800MHz`, `1.66e9` (a bare number is in hertz); above 0."""
    v = _quantity(text, what, "frequency", FREQUENCY_UNITS, "hz", "e.g. 2.5GHz, 800MHz, 1.66e9", True)
    return _bounded(v, text, what, fmt_frequency, low=low, high=high, allow_zero=False)


def rate_per_s(text: object, what: str | None = None, *, low: float | None = None, high: float = MAX_RATE,
               allow_zero: bool = False) -> float:
    """Events per second from `128000`, `128000/s`, `128/ms`, `30/min`."""
    v = _quantity(text, what, "rate", RATE_UNITS, "/s", "e.g. 128000, 128000/s, 128/ms", False)
    return _bounded(v, text, what, fmt_rate, low=low, high=high, allow_zero=allow_zero)


def number(text: object, what: str | None = None, *, low: float | None = None, high: float | None = None,
           allow_zero: bool = False, noun: str = "number") -> float:
    """A finite number above 0 (0 too with `allow_zero`) within [low, high]."""
    m = None if isinstance(text, bool) else _WHOLE.fullmatch(str(text))
    if m is None:
        raise _say(what, text, f"is not {_a(noun)}")
    v = float(m.group(1) + m.group(2))
    return _bounded(v, text, what, lambda x: f"{x:g}", low=low, high=high, allow_zero=allow_zero)


def count(text: object, what: str | None = None, *, low: int = 1, high: int | None = None,
          noun: str = "whole number") -> int:
    """A whole number within [low, high]: `16`, `1e6`, `-1` where `low` allows it."""
    m = None if isinstance(text, bool) else _WHOLE.fullmatch(str(text))
    if m is None:
        raise _say(what, text, f"is not {_a(noun)}")
    digits = m.group(2)
    v: float = int(digits) if digits.isdigit() else float(digits)
    if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
        if math.isfinite(v) or high is None:
            raise _say(what, text, f"is not {_a(noun)}")
        raise _say(what, text, f"is out of bounds: at most {high:,}")
    n = -int(v) if m.group(1) else int(v)
    if n < low:
        raise _say(what, text, f"is out of bounds: at least {low:,}")
    if high is not None and n > high:
        raise _say(what, text, f"is out of bounds: at most {high:,}")
    return n


def seed(text: object, what: str | None = None) -> int:
    """A random generator's seed: a whole number from 0 to 2^63 - 1."""
    return count(text, what, low=0, high=MAX_SEED)


def fraction(text: object, what: str | None = None, *, one: bool = False) -> float:
    """A share in [0, 1) (in [0, 1] with `one`)."""
    m = None if isinstance(text, bool) else _WHOLE.fullmatch(str(text))
    v = float(m.group(1) + m.group(2)) if m else math.nan
    if not (0.0 <= v < 1.0 or (one and v == 1.0)):
        raise _say(what, text, f"is not a fraction in [0, 1{']' if one else ')'}")
    return v


def percentile(text: object, what: str | None = None) -> float | None:
    """`mean` (None), or a percentile as `99`, `p99.9` or `0.95` (a share: 0.95), strictly
    between 0 and 100."""
    t = str(text).strip().lower()
    if t == "mean":
        return None
    m = _WHOLE.fullmatch(t[1:] if t.startswith("p") else t)
    if m is None or m.group(1):
        raise _say(what, text, "is not a percentile (mean, 99, p99.9, 0.95)")
    v = float(m.group(2))
    if v >= 1.0:
        v /= 100.0
    if not 0.0 < v < 1.0:
        raise _say(what, text, "is out of bounds: a percentile lies strictly between 0 and 100")
    return v


def arg(kind: Callable[..., Any], **bounds: Any) -> Callable[[str], Any]:
    """An argparse `type=` of one of the parsers above with its bounds: a mistake ends as
    argparse's one line naming the option (`argument --quantum: '1e308' is out of bounds: at
    most 10 s`) and exit status 2."""
    def parse(text: str) -> Any:
        try:
            return kind(text, None, **bounds)
        except UserError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    parse.__name__ = kind.__name__
    return parse


#: An argparse type: an interval of time (seconds, or with a unit: 100ms, 0.1s, 250us).
interval = arg(time_s, noun="interval")
