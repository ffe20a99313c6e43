"""`corecast stat`: the monitor and what it is made of.

- `backend`: where counts come from (perf_event_open, or a simulated PMU in tests)
- `target`: what is monitored (a command, a process, the system)
- `virtual`: virtual counters sampled in the same tick
- `metrics`: derived metrics
- `rows`: the rows produced and their totals
- `ticks`: the tick loop in C (several ticks per call)
- `monitor`: the Monitor that runs it all, with its parts `threads` (following the threads),
  `ebs` (event-based sampling rows) and `signals` (a signal ends the run cleanly)
- `writers`: table, CSV and JSON-lines output
"""
from __future__ import annotations

from .backend import Backend, Handle, PerfBackend
from .metrics import BUILTIN_METRICS, Metric, parse_metric
from .monitor import DEFAULT_EVENTS, DEFAULT_NOTE, MIN_INTERVAL, Monitor
from .rows import Row, Totals
from .target import Target
from .virtual import VIRTUAL_COUNTERS, parse_virtual
from .writers import WRITERS, CsvWriter, JsonWriter, TableWriter, Writer

__all__ = ["Backend", "Handle", "PerfBackend", "BUILTIN_METRICS", "Metric", "parse_metric", "DEFAULT_EVENTS",
           "DEFAULT_NOTE", "MIN_INTERVAL", "Monitor", "Row", "Totals", "Target", "VIRTUAL_COUNTERS", "parse_virtual",
           "WRITERS", "CsvWriter", "JsonWriter", "TableWriter", "Writer"]
