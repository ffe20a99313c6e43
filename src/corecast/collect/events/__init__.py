"""Event catalogs and spec parsing.

    from corecast.collect.events import resolve, backend_stall_events
    resolve("instr,cycles")                    # this machine
    resolve("pmc0,pmc3=0x2e,umask3=0x41", pmu="haswell")   # a named model
    backend_stall_events()                     # the running CPU's stall catalog

See `spec` for the grammar, `catalogs` for the stall events and their sources, `pfm` for
libpfm4, `cpu` for CPU identification, `kernel` for the kernel's PMUs and tracepoints.
"""
from . import catalogs as _catalogs
from .catalogs import SOURCES, StallEvent, raw_config
from .cpu import CpuId, Uarch, UARCHS, host_cpu, parse_cpu, pfm_pmu_for
from .kernel import sysfs_pmus, tracefs_dir, tracepoint_id
from .spec import BACKEND_STALLS, MNEMONICS, EventSpec, StallEventList, backend_stall_events, resolve, split_items

__all__ = ["CATALOGS", "SOURCES", "StallEvent", "raw_config", "CpuId", "Uarch", "UARCHS", "host_cpu",
           "parse_cpu", "pfm_pmu_for", "BACKEND_STALLS", "MNEMONICS", "EventSpec", "StallEventList",
           "backend_stall_events", "resolve", "split_items", "sysfs_pmus", "tracefs_dir",
           "tracepoint_id"]


def __getattr__(name: str):
    """CATALOGS is read on first use (see catalogs.CATALOGS)."""
    if name == "CATALOGS":
        return _catalogs.CATALOGS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
