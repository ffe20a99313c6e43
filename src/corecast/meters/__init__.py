"""corecast meters: contention meters of a running machine in a shared-memory blackboard, with
triggers, concurrency advice for runtimes, a Prometheus endpoint, and record/replay.

    corecast meters --interval 1ms --triggers t.toml --listen 127.0.0.1:9464 --record m.csv

Parts: `tree` (node -> socket -> core, a watched process's threads), `catalog` (the meters and
their sources on this machine), `engine` (the sampling loop, in C), `board` (the blackboard:
layout in `layout`, reader, writer), `triggers` (TOML, hysteresis, the advice policy),
`exporter` (/metrics, /meters.json), `record` (Dataset recordings, replay), `daemon` (it all
together). Programs read the board with `Board` (Python) or corecast_meters.h (C, header only,
`corecast.native.include_dir("corecast_meters.h")`), and take advice with `allowed_workers` / `throttle_point`
(cc_allowed_workers / cc_throttle_point in C).
"""
from .board import (AdviceInfo, AdviceState, AppValue, Board, MeterInfo, Reading, ScopeInfo, Snapshot,
                    TriggerInfo, TriggerState, allowed_workers, attach, release, reset, throttle_point)

__all__ = ["AdviceInfo", "AdviceState", "AppValue", "Board", "MeterInfo", "Reading", "ScopeInfo", "Snapshot",
           "TriggerInfo", "TriggerState", "allowed_workers", "attach", "release", "reset", "throttle_point"]
