"""Column names from other tools' tables, read as corecast's.

A table made elsewhere names its columns its own way: `threads,time_ms`, `Processors,Throughput`
(the R usl package's examples), `N<TAB>X`, `clients;tps`, `threads,run,seconds`. Where a file
has no `cores`, `time_s`, `throughput` or `repetition` column, `canonical` reads one unambiguous
column of a known other name as it -- times in other units scaled to seconds -- and says which,
so that `predict`, `usl` and `evaluate --corpus` take such a table as it is. Nothing is guessed
beyond that:

- a file corecast wrote (one with corecast's metadata) is read as written;
- a column already named as corecast names it is never renamed, and nothing is renamed onto it;
- a file with a `time_s` or `throughput` column keeps its other metric columns as they are (a
  `wall` column beside `time_s` stays a stall category): only its core count and repetition
  columns are looked for;
- two candidates for one column (`threads` and `procs`) rename neither; the error then names them;
- names are compared without case and punctuation: `Time (ms)` is `time_ms`, `ops/s` is `ops_s`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import parsing

#: Other names of the number of cores (threads, processes, clients: the concurrency measured).
CORES = frozenset({
    "core", "ncores", "num_cores", "n_cores", "threads", "thread", "nthreads", "num_threads",
    "n_threads", "thread_count", "threadcount", "processors", "processor", "procs", "nprocs",
    "nproc", "num_procs", "nprocesses", "num_processes", "parallelism", "np", "processes", "cpus",
    "ncpus", "num_cpus", "workers", "nworkers", "num_workers",
    "clients", "users", "vus", "connections", "concurrency", "load", "ranks", "tasks", "jobs",
    "n", "p",
})

#: Other names of the repetition (the run's index at one core count).
REPETITION = frozenset({"rep", "reps", "run", "run_id", "trial", "iteration", "iter", "repeat", "sample"})

#: Words for a run time; with a unit suffix (`runtime_ms`) or alone (seconds).
TIME_WORDS = frozenset({
    "time", "times", "runtime", "run_time", "elapsed", "elapsed_time", "wall", "walltime",
    "wall_time", "wallclock", "wall_clock", "wall_clock_time", "duration", "real", "real_time",
    "execution_time", "exec_time", "time_to_solution", "total_time",
})

#: Time units, in seconds: corecast.parsing's (`m` left out: a header's m is not minutes for
#: sure) and the words other tools spell them with.
TIME_UNITS = {
    **{u: v for u, v in parsing.TIME_UNITS.items() if u.isascii() and u != "m"},
    "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "msec": 1e-3, "msecs": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "usec": 1e-6, "usecs": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
    "nsec": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
    "mins": 60.0, "minute": 60.0, "minutes": 60.0,
}

#: Other names of a throughput (work per unit of time, or a speed-up: the same shape).
THROUGHPUT = frozenset({
    "tput", "thr", "x", "ops", "ops_s", "ops_sec", "ops_per_s", "ops_per_sec", "ops_per_second",
    "operations_per_second", "qps", "tps", "rps", "iops", "req_s", "reqs_s", "requests_s",
    "requests_per_second", "requests_per_sec", "transactions_per_second", "rate", "speedup",
    "speed_up", "mops", "mops_s", "mflops", "mflop_s", "gflops", "gflop_s", "flops",
    "items_s", "items_per_second", "bandwidth",
})


#: corecast's own names: never renamed, and nothing is renamed onto them.
KEYS = ("cores", "time_s", "throughput", "repetition", "size")


def norm(name: str) -> str:
    """`name` without case and punctuation: `Time (ms)` -> `time_ms`."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _time_scale(n: str) -> float | None:
    """Seconds per unit when the normalised name `n` is a run time, else None."""
    if n in TIME_WORDS:
        return 1.0
    if n in TIME_UNITS and n not in ("s", "ms", "us", "ns", "h"):     # 'seconds', 'milliseconds'
        return TIME_UNITS[n]
    word, _, unit = n.rpartition("_")
    if word in TIME_WORDS and unit in TIME_UNITS:
        return TIME_UNITS[unit]
    return None


def _is_throughput(n: str) -> bool:
    return n in THROUGHPUT or n.startswith("throughput_")


@dataclass
class Reading:
    """How a header is read: the names to use, the factor each renamed column's values are
    multiplied by, which file column each new name came from, and the names with several
    candidates (none of which was renamed)."""

    names: list[str]
    scale: dict[str, float] = field(default_factory=dict)      # by new name
    read_as: dict[str, str] = field(default_factory=dict)      # new name -> the file's name
    ambiguous: dict[str, list[str]] = field(default_factory=dict)

    @property
    def note(self) -> str:
        parts = []
        for new, old in self.read_as.items():
            f = self.scale.get(new, 1.0)
            parts.append(f"'{old}' as {new}" + (f" (x {f:g})" if f != 1.0 else ""))
        return "read column " + ", ".join(parts) if parts else ""


def canonical(header: list[str]) -> Reading:
    """How to read `header` (see the module doc)."""
    names = list(header)
    out = Reading(names)
    taken = set(header) & set(KEYS)
    renamed: set[int] = set()
    rules = (
        ("cores", lambda n: 1.0 if n in CORES or n == "cores" else None),
        ("time_s", lambda n: 1.0 if n == "time_s" else _time_scale(n)),
        ("throughput", lambda n: 1.0 if n == "throughput" or _is_throughput(n) else None),
        ("repetition", lambda n: 1.0 if n in REPETITION or n == "repetition" else None),
    )
    for canon, match in rules:
        if canon in taken or (canon in ("time_s", "throughput") and taken & {"time_s", "throughput"}):
            continue        # a file that names its metric keeps every other column as it is
        found = []
        for j, h in enumerate(names):
            if j in renamed or h in KEYS:
                continue
            s = match(norm(h))
            if s is not None:
                found.append((j, s))
        if len(found) == 1:
            j, s = found[0]
            out.read_as[canon] = names[j]
            if s != 1.0:
                out.scale[canon] = s
            names[j] = canon
            renamed.add(j)
        elif len(found) > 1:
            out.ambiguous[canon] = [names[j] for j, _ in found]
    return out
