"""corecast chase: the pointer-chasing memory benchmark (the collector).

- `native`: the C kernel (native/chase/chase.c) through ctypes: buffers, chains, runs, the
  timer's overhead, the ping-pong;
- `run`: settings, where threads go (the topology's order), the three modes (concurrency sweep,
  size sweep, loaded latency), steal time and CPU share per point;
- `measure`: what one command asks for (modes, defaults, a profile's extra sweep) as runs;
- `data`: a run as a corecast Dataset;
- `c2c`: core-to-core cache-line transfer latency for `corecast calibrate`.

The analysis of what is measured (limits, plateaus, the memory profile) is in
`corecast.model.memory`; the profile's file shape and reader in `corecast.memprofile`.
"""
from .data import idle_latency_ns, to_dataset
from .c2c import core_to_core
from .measure import Request, calibration_request, measure, parse_sizes
from .run import (DEFAULT_CHAINS, DEFAULT_DELAYS, DEFAULT_SIZE, Point, Run, Session, Settings, concurrency_sweep,
                  default_sizes, loaded_latency, parse_counts, parse_pattern, size_sweep)

__all__ = ["DEFAULT_CHAINS", "DEFAULT_DELAYS", "DEFAULT_SIZE", "Point", "Request", "Run", "Session", "Settings",
           "calibration_request", "concurrency_sweep", "core_to_core", "default_sizes", "idle_latency_ns", "loaded_latency", "measure", "parse_counts",
           "parse_pattern", "parse_sizes", "size_sweep", "to_dataset"]
