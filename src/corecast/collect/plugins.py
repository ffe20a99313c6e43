"""User-defined stall sources: numbers a program reports about itself.

The stall-based method needs every reason a program waits; some only the program knows (an
STM's aborted-transaction cycles, a server's queueing time). A plugin file names them:

    # stm.toml
    [category.aborted_tx_cycles]
    source = "stdout"                     # "stdout", "stderr" or a file path ({cores},
                                          # {threads}, {rep} are replaced; relative to the
                                          # directory the program runs in)
    regex = 'aborted cycles:\\s*([0-9.eE+]+)'   # exactly one group: the number
    aggregate = "sum"                     # sum | min | max | avg | last  (over all matches)
    unit = "cycles"
    kind = "stall"                        # optional: stall (default), counter, time, memory, other
    description = "cycles spent in aborted transactions"   # optional

Every match of the regex in the source contributes one number; `aggregate` combines them.
A run where the regex matches nothing gets no value (a missing value, never 0) and a note.
"""
from __future__ import annotations

import errno
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .. import outputs
from ..errors import UserError, read_fd
from ..parsing import read_document

AGGREGATES = ("sum", "min", "max", "avg", "last")
#: The most of a program's output file a plugin reads after each run.
MAX_OUTPUT_BYTES = 64 << 20
PLUGIN_KINDS = ("stall", "counter", "time", "memory", "throughput", "cpu", "other")
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESERVED = {"cores", "repetition", "size"}


@dataclass(frozen=True)
class Category:
    name: str
    source: str              # "stdout", "stderr" or a path template
    regex: re.Pattern
    aggregate: str
    unit: str
    kind: str = "stall"
    description: str | None = None
    origin: str = ""         # plugin file it came from

    @property
    def is_file(self) -> bool:
        return self.source not in ("stdout", "stderr")


def compile_number_regex(text: str, where: str) -> re.Pattern:
    """A regex with exactly one capturing group (the number)."""
    try:
        rx = re.compile(text, re.MULTILINE)
    except re.error as err:
        raise UserError(f"{where}: regex {text!r} does not compile ({err})") from None
    if rx.groups != 1:
        raise UserError(f"{where}: regex {text!r} must have exactly one group around the number "
                        f"(it has {rx.groups})")
    return rx


def load_plugin(path: str | Path) -> list[Category]:
    p = Path(path)
    doc = read_document(p, "plugin file", "toml")
    cats = doc.get("category")
    unknown = sorted(set(doc) - {"category"})
    if unknown:
        raise UserError(f"{p}: unknown table or key '{unknown[0]}' (a plugin has [category.NAME] tables)")
    if not isinstance(cats, Mapping) or not cats:
        raise UserError(f"{p}: no [category.NAME] table")
    out = []
    for name, spec in cats.items():
        where = f"{p}: [category.{name}]"
        if not NAME_RE.fullmatch(name) or name in RESERVED:
            raise UserError(f"{where}: '{name}' is not usable as a column name (letters, digits, _)")
        if not isinstance(spec, Mapping):
            raise UserError(f"{where}: must be a table")
        extra = sorted(set(spec) - {"source", "regex", "aggregate", "unit", "kind", "description"})
        if extra:
            raise UserError(f"{where}: unknown key '{extra[0]}' (keys: source, regex, aggregate, unit, kind, description)")
        for key in ("source", "regex", "unit"):
            if key not in spec:
                raise UserError(f"{where}: missing '{key}'")
            if not isinstance(spec[key], str):
                raise UserError(f"{where}: '{key}' must be a string")
        source = spec["source"].strip()
        if not source:
            raise UserError(f"{where}: 'source' is empty (stdout, stderr or a file path)")
        agg = spec.get("aggregate", "sum")
        if agg not in AGGREGATES:
            raise UserError(f"{where}: aggregate '{agg}' is not one of {', '.join(AGGREGATES)}")
        kind = spec.get("kind", "stall")
        if kind not in PLUGIN_KINDS:
            raise UserError(f"{where}: kind '{kind}' is not one of {', '.join(PLUGIN_KINDS)}")
        desc = spec.get("description")
        if desc is not None and not isinstance(desc, str):
            raise UserError(f"{where}: 'description' must be a string")
        out.append(Category(name=name, source=source, regex=compile_number_regex(spec["regex"], where),
                            aggregate=agg, unit=spec["unit"], kind=kind, description=desc, origin=str(p)))
    return out


def load_plugins(paths: list[str | Path]) -> list[Category]:
    cats: list[Category] = []
    for path in paths:
        for c in load_plugin(path):
            if any(o.name == c.name for o in cats):
                raise UserError(f"{path}: category '{c.name}' is already defined by another plugin")
            cats.append(c)
    return cats


def parse_number(text: str) -> float | None:
    s = text.strip().replace(",", "").replace("_", "")
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def aggregate(values: list[float], how: str) -> float | None:
    if not values:
        return None
    if how == "sum":
        return float(math.fsum(values))
    if how == "min":
        return float(min(values))
    if how == "max":
        return float(max(values))
    if how == "avg":
        return float(math.fsum(values) / len(values))
    return float(values[-1])


def extract(regex: re.Pattern, text: str, how: str) -> tuple[float | None, int, int]:
    """(aggregated value, matches, matches whose group was not a number)."""
    vals: list[float] = []
    bad = 0
    n = 0
    for m in regex.finditer(text):
        n += 1
        v = parse_number(m.group(1) or "")
        if v is None:
            bad += 1
        else:
            vals.append(v)
    return aggregate(vals, how), n, bad


def read_output_file(path: Path, what: str = "plugin output file", limit: int = MAX_OUTPUT_BYTES) -> bytes:
    """A file the measured program wrote (at most `limit` bytes), read as corecast -- often
    root -- reads it after every run: the program runs where the user says, which may be a
    folder other users can write to (/tmp), so a link planted at the name (or on the way to it,
    in a world-writable sticky folder) is not followed, and only a regular file of this user is
    read: a link to another user's secret put its matched number into the campaign, and a FIFO
    kept open by its writer made `measure` wait for ever. (The sync shim's reports are read
    through it too: `collect.shim.read_reports`.)"""
    if outputs.planted_link(str(path)) is not None:
        raise UserError("a symbolic link owned by another user is on the way to it: not followed")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as err:
        raise UserError("a symbolic link: not followed" if err.errno == errno.ELOOP
                        else (err.strerror or str(err))) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UserError("not a regular file")
        if st.st_uid != os.geteuid():
            raise UserError(f"a file of another user (uid {st.st_uid}): not read")
        return read_fd(fd, path, what, limit, True)
    except OSError as err:
        raise UserError(err.strerror or str(err)) from None
    finally:
        os.close(fd)


def output_path(c: Category, cwd: str | Path, subst: Mapping[str, str]) -> Path:
    """The file a category reads for a run ({cores}, {threads}, {rep} replaced; relative to `cwd`)."""
    path = Path(substitute(c.source, subst))
    return path if path.is_absolute() else Path(cwd) / path


def file_state(path: Path) -> tuple[int, ...] | None:
    """What tells a file rewritten from one left as it was (None: no file there)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def states_before(cats: list[Category], cwd: str | Path, subst: Mapping[str, str]) -> dict[str, tuple[int, ...] | None]:
    """`file_state` of each file category's file, taken before a run starts (for `apply`)."""
    return {c.name: file_state(output_path(c, cwd, subst)) for c in cats if c.is_file}


def apply(cats: list[Category], stdout: str, stderr: str, cwd: str | Path,
          subst: Mapping[str, str], before: Mapping[str, tuple[int, ...] | None] | None = None,
          ) -> tuple[dict[str, float | None], list[str]]:
    """Values of every category for one run, and notes on the ones that gave nothing.
    `before`: `states_before` the run; a file found just as it was then (same file, size, times)
    was not written by this run -- it is an earlier run's, or older -- and gives no value."""
    values: dict[str, float | None] = {}
    notes: list[str] = []
    for c in cats:
        if c.source == "stdout":
            text, label = stdout, "stdout"
        elif c.source == "stderr":
            text, label = stderr, "stderr"
        else:
            path = output_path(c, cwd, subst)
            label = str(path)
            try:     # a FIFO is not waited for, a device or a huge file is not read without end
                text = read_output_file(path).decode(errors="replace")
            except UserError as err:
                values[c.name] = None
                notes.append(f"{c.name}: cannot read {path} ({err})")
                continue
            if before is not None and before.get(c.name) is not None and file_state(path) == before[c.name]:
                values[c.name] = None
                notes.append(f"{c.name}: {path} was not written by this run (unchanged since before it "
                             "started: an earlier run's, or older): no value")
                continue
        v, n, bad = extract(c.regex, text, c.aggregate)
        values[c.name] = v
        if v is None:
            why = "no match" if n == 0 else f"{bad} match(es), none a number"
            notes.append(f"{c.name}: {why} for {c.regex.pattern!r} in {label}")
    return values, notes


_PLACEHOLDER = re.compile(r"\{(cores|threads|rep)\}")


def substitute(text: str, subst: Mapping[str, str]) -> str:
    """Replace {cores}, {threads}, {rep}; any other braces are left as they are."""
    return _PLACEHOLDER.sub(lambda m: subst.get(m.group(1), m.group(0)), text)
