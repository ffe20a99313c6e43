"""perf_event_open(2) from Python, without a kernel module: `syscall` (attributes, the call,
errors, paranoid), `counting` (counters, groups, scaling), `sampling` (ring buffer, EBS),
`tasks` (following threads through the kernel's task records), `launch` (a command started at
its exec). The names below are the package's public surface.

    from corecast.collect.events import resolve
    from corecast.collect.perf import open_counters, launch

    child = launch(["./prog", "arg"])                  # forked, waits before exec
    with open_counters(resolve("instr,cycles,task_clock"), pid=child.pid,
                       enable_on_exec=True) as cs:
        child.start()                                  # exec: counting starts here
        status = child.wait()
        for v in cs.read():                            # readable after the target exited
            print(v.name, v.value, v.status, v.message)

Every event carries a status: `ok`, `not supported` (the machine lacks it), `denied` (with the
`perf_event_paranoid` value and what to do) or `invalid` (the kernel rejected the attribute).
A value that could not be counted is `None`, never 0. Values are scaled by
time_enabled/time_running when the kernel multiplexed the counter.

`open_sampler` opens an event group whose leader overflows every `sample_period` events and
writes a sample (the group's counts) into an mmap ring buffer; `Sampler.drain()` reads them,
with the lost-record accounting the kernel gives (PERF_RECORD_LOST and PERF_FORMAT_LOST).
"""
from __future__ import annotations

from .counting import (CounterSet, CounterValue, DID_NOT_RUN, NOT_COUNTED, delta_value, interval_value,
                       open_counters, probe, scale)
from .launch import Launched, launch
from .sampling import DrainResult, RingBuffer, Sample, Sampler, open_sampler
from .syscall import (PARANOID_PATH, STATUSES, classify_errno, denied_message, make_attr, paranoid,
                      perf_event_open, wait_readable)
from .tasks import (DUMMY, TaskDrain, TaskRecord, TaskTracker, ThreadRead, TrackerUnavailable, combine_cpus,
                    open_tracker, remainder)

__all__ = ["CounterSet", "CounterValue", "DID_NOT_RUN", "NOT_COUNTED", "delta_value", "interval_value",
           "open_counters", "probe", "scale", "Launched", "launch", "DrainResult", "RingBuffer", "Sample", "Sampler",
           "open_sampler", "PARANOID_PATH", "STATUSES", "classify_errno", "denied_message", "make_attr", "paranoid",
           "perf_event_open", "wait_readable", "DUMMY", "TaskDrain", "TaskRecord", "TaskTracker", "ThreadRead",
           "TrackerUnavailable", "combine_cpus", "open_tracker", "remainder"]
