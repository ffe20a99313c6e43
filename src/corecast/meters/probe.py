"""The memory-latency probe: a memory-contention meter for machines without uncore counters.

One pointer chase — `corecast chase`'s kernel (native/chase/chase.c, through
corecast.collect.chase.native): one thread, one chain, a random order over a buffer four times
the last-level cache (at least 64 MiB), so nearly every dereference misses to DRAM — pinned to
one CPU and run in short bursts (BURST_S of chasing after WARMUP_S of warm-up) once per period
(default 1 s) from a thread of the daemon. Its latency per dereference is timed on the chasing
thread's own CPU clock (as chase does: another program taking the CPU is not memory latency),
less the clock reads' cost. Divided by the **idle latency** it is the meter `mem_latency`:
1.0 on an idle memory system, rising as other programs load it (queueing in the memory
controllers and the fabric).

The idle latency is the memory profile's (`--memory-profile FILE`: `corecast chase --profile`
or `corecast calibrate`, read by corecast.memprofile), else the median of the probe's first
IDLE_BURSTS bursts, taken when the daemon starts — and the source says which, since the machine
may not have been idle then.

Its own cost is measured, not assumed: the daemon's CPU time during every burst (thread start,
warm-up, chase; the sampling loop's ticks meanwhile, a few percent of it, are in it too) over
the time elapsed, the meter `mem_probe_cost` (a fraction of one CPU). A burst in which the
chasing thread did not get to run through (a busy CPU) is skipped.
"""
from __future__ import annotations

import signal
import statistics
import threading
import time
from dataclasses import dataclass

from ..collect import topology
from ..collect.chase import native
from ..errors import UserError

BURST_S = 0.002
WARMUP_S = 0.001
IDLE_BURSTS = 5
MIN_BYTES, MAX_BYTES = 64 << 20, 256 << 20


def unavailable() -> str | None:
    """Why the probe cannot run here, or None."""
    try:
        native.lib()
    except UserError as err:
        return f"the chase kernel is not built ({err})"
    return None


def buffer_bytes(cpu: int) -> int:
    llc = max((c.size_bytes for c in topology.caches(cpu)), default=0)
    return int(min(MAX_BYTES, max(MIN_BYTES, 4 * llc)))


@dataclass
class Reading:
    latency_ns: float
    ratio: float | None          # over the idle latency (None until it is known)
    cost: float                  # fraction of one CPU the probe took so far


class Probe:
    def __init__(self, cpu: int, period_s: float = 1.0, idle_ns: float | None = None, idle_source: str = ""):
        if not period_s >= 10 * (BURST_S + WARMUP_S):
            raise UserError(f"--probe-period: at least {10 * (BURST_S + WARMUP_S):g} s (the probe's duty cycle "
                            "stays under 10%)")
        self.cpu, self.period_s = cpu, period_s
        self.idle_ns, self.idle_source = idle_ns, idle_source
        self.size = buffer_bytes(cpu)
        self._latest: Reading | None = None
        self._busy_s = 0.0
        self._started = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="meters-probe", daemon=True)
        self.error: str | None = None
        self.bursts = self.skipped = 0

    @property
    def source(self) -> str:
        idle = (f"the idle latency {self.idle_ns:.1f} ns of {self.idle_source}" if self.idle_ns
                else f"the median of its first {IDLE_BURSTS} bursts, taken at the daemon's start (the machine may "
                     "not have been idle)")
        return (f"derived: a pinned pointer chase (chase's kernel, CPU {self.cpu}, {self.size >> 20} MiB, "
                f"{BURST_S * 1e3:g} ms every {self.period_s:g} s) over {idle}")

    def start(self) -> None:
        self._started = time.monotonic()
        self._thread.start()

    def latest(self) -> Reading | None:
        return self._latest

    def _burst(self, buf: native.Buffer, overhead: float) -> float | None:
        """ns per dereference, or None when the chasing thread did not run through the burst
        (a busy CPU): that burst is skipped."""
        c0 = time.process_time()
        s = native.run(buf, 1, 1, [self.cpu], 1, BURST_S, WARMUP_S)
        self._busy_s += time.process_time() - c0
        self.bursts += 1
        count, cpu_ns = float(s.count[0, 0]), float(s.cpu_ns[0, 0])
        if count <= 0 or cpu_ns <= overhead:
            self.skipped += 1
            return None
        return (cpu_ns - overhead) / count

    def _loop(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
        try:
            with native.Buffer(self.size, 64, "4k") as buf:
                buf.order("random", 1, 64 * native.PAGE_BYTES[buf.page], 1)
                buf.link(1)
                overhead = native.timer_overhead_ns()
                first: list[float] = []
                while not self.idle_ns and not self._stop.is_set():
                    lat = self._burst(buf, overhead)
                    first += [] if lat is None else [lat]
                    if len(first) == IDLE_BURSTS:
                        self.idle_ns = statistics.median(first)
                nxt = time.monotonic()
                while not self._stop.is_set():
                    lat = self._burst(buf, overhead)
                    cost = self._busy_s / max(1e-9, time.monotonic() - self._started)
                    if lat is not None:
                        self._latest = Reading(lat, lat / self.idle_ns, cost)
                    nxt += self.period_s
                    self._stop.wait(max(0.0, nxt - time.monotonic()))
        except UserError as err:
            self.error = str(err)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
