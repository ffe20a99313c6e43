"""The region API for Python programs, and the reader of region results.

    from corecast.region import region

    with region("load"):
        load()

    @region("solve")
    def solve(): ...

Each thread counts its regions with perf_event_open (task-clock, context switches, page faults,
instructions, cycles; hardware events are None where the machine has no PMU). Totals per
region are written as JSON lines at exit (or by `report()`) to $CORECAST_REGION_OUT, else
./corecast-regions-<pid>.jsonl: the same file and format as the C library
(native/region/corecast_region.h), which `corecast stat` reads back with `load()`.

The perf layer (corecast.collect) is imported when a thread first counts, for start-up time: a
program that imports this module and never enters a region does not load it (~25 ms).
"""
from __future__ import annotations

import atexit
import errno
import functools
import json
import os
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from .errors import UserError

FIELDS = ("task_clock_ns", "context_switches", "page_faults", "instructions", "cycles")
_SPECS = "task_clock,context_switches,page_faults,instr,cycles"
#: The largest region results file read (a line per region and report: kilobytes in practice).
MAX_RESULTS_BYTES = 64 << 20

_lock = threading.Lock()
_totals: dict[str, dict[str, Any]] = {}
_local = threading.local()
_registered = False


def output_path() -> Path:
    p = os.environ.get("CORECAST_REGION_OUT")
    return Path(p) if p else Path(f"corecast-regions-{os.getpid()}.jsonl")


def _is_proc_fd(path: str) -> bool:
    """/proc/PID/fd/N or /proc/self/fd/N (no `re`: a measured program imports this module)."""
    parts = path.split("/")
    return (len(parts) == 5 and parts[:2] == ["", "proc"] and (parts[2].isdigit() or parts[2] == "self")
            and parts[3] == "fd" and parts[4].isdigit())


def _open_results(p: Path) -> int | None:
    """The results file opened to append, or None after one line on stderr, as the C library
    does (native/region/region.c, open_results): the default name is predictable and in the
    current folder, which may be /tmp, so a program run there as root must not append through a
    link another user planted (fs.protected_symlinks may be 0) nor into a file hard-linked there.
    The last name is never followed -- except /proc/PID/fd/N, a descriptor handed down (`corecast
    stat`'s memfd), which no other user can plant -- and what is opened must be a regular file of
    this user with at most one name (0: a memfd)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK   # a planted FIFO never blocks
    if not _is_proc_fd(str(p)):
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(p, flags, 0o600)
    except OSError as err:
        why = "a symbolic link" if err.errno == errno.ELOOP else (err.strerror or str(err))
        sys.stderr.write(f"corecast region: {p}: {why}: region totals not written\n")
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink > 1:
        os.close(fd)
        sys.stderr.write(f"corecast region: {p}: not a regular file of this user with one name: "
                         "region totals not written\n")
        return None
    os.set_blocking(fd, True)
    return fd


def _thread_counters():
    cs = getattr(_local, "counters", None)
    if cs is None:
        from .collect.events import resolve
        from .collect.perf import open_counters
        cs = open_counters(resolve(_SPECS), pid=0, inherit=False)    # pid 0: the calling thread
        _local.counters = cs
    return cs


class region:
    """Context manager and decorator counting one named region in the calling thread."""

    def __init__(self, name: str):
        if not isinstance(name, str) or not name or len(name) > 127:
            raise UserError(f"region name must be 1-127 characters, not {name!r}")
        self.name = name
        self._start: list[tuple[float, list]] = []

    def __enter__(self) -> "region":
        global _registered
        if not _registered:
            atexit.register(report)
            _registered = True
        cs = _thread_counters()
        self._start.append((time.monotonic_ns(), cs.read()))
        return self

    def __exit__(self, *exc) -> None:
        from .collect.perf import delta_value
        cs = _thread_counters()
        cur = cs.read()
        t1 = time.monotonic_ns()
        t0, prev = self._start.pop()
        with _lock:
            tot = _totals.setdefault(self.name, {"calls": 0, "wall_ns": 0, **{f: None for f in FIELDS}})
            tot["calls"] += 1
            tot["wall_ns"] += t1 - t0
            for f, c, p in zip(FIELDS, cur, prev):
                d = delta_value(f, c, p)
                if d.status == "ok" and d.value is not None:
                    tot[f] = (tot[f] or 0) + d.value

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*a, **kw):
            with region(self.name):
                return fn(*a, **kw)
        return wrapper


def totals() -> dict[str, dict[str, Any]]:
    with _lock:
        return {k: dict(v) for k, v in _totals.items()}


def report(path: str | os.PathLike | None = None) -> Path | None:
    """Append the totals so far (JSON lines) and clear them: the file written, or None when
    there was nothing to write or the file was refused (one line on stderr: see _open_results;
    run at exit, so never an exception for it)."""
    with _lock:
        if not _totals:
            return None
        items = list(_totals.items())
        _totals.clear()
    p = Path(path) if path else output_path()
    fd = _open_results(p)
    if fd is None:
        return None
    with os.fdopen(fd, "a") as fh:
        for name, t in items:
            fh.write(json.dumps({"source": "python", "pid": os.getpid(), "region": name, **t}) + "\n")
    return p


def load(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Region totals from a results file, summed over processes and reports."""
    from .parsing import json_document, read_document   # here: a measured program imports this module
    out: dict[str, dict[str, Any]] = {}
    p = Path(path)
    # written by the measured program: bounded as any file a user gives (its size, each line's nesting)
    text = read_document(p, "region results file", "text", limit=MAX_RESULTS_BYTES)
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json_document(line, f"{p}:{i}")
            name = rec["region"]
            calls, wall = int(rec.get("calls", 0)), int(rec.get("wall_ns", 0))
            values = {f: rec.get(f) for f in FIELDS}
            if not isinstance(name, str) or not all(v is None or isinstance(v, (int, float))
                                                    for v in values.values()):
                raise TypeError(name)
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
            raise UserError(f"{p}:{i}: not a region record") from None
        tot = out.setdefault(name, {"calls": 0, "wall_ns": 0, **{f: None for f in FIELDS}})
        tot["calls"] += calls
        tot["wall_ns"] += wall
        for f, v in values.items():
            if v is not None:
                tot[f] = (tot[f] or 0) + v
    return out
