"""This machine's event catalogue as a document: `corecast events --format json`, and the list
of events `corecast serve` offers for a `stat` started from the page."""
from __future__ import annotations

from typing import Any

from . import sources
from .events import MNEMONICS, backend_stall_events, host_cpu, pfm, resolve, sysfs_pmus, tracefs_dir
from .perf import paranoid, probe


def catalogue() -> dict[str, Any]:
    """The CPU, the perf PMUs, every mnemonic and backend-stall event with its status here (ok /
    not supported / denied / invalid, with the reason), the software sources. Events are
    probed: opening each one tells whether it counts on this machine."""

    cpu = host_cpu()
    mn = [e for name in MNEMONICS for e in resolve(name)]
    stalls = backend_stall_events()
    probed = probe(mn + list(stalls))
    lib = pfm.load()
    src = sources.available()
    return {
        "cpu": cpu.describe(),
        "perf_event_paranoid": paranoid(),
        "pmus": sysfs_pmus(),
        "tracefs": str(tracefs_dir() or ""),
        "libpfm": (f"libpfm4 {lib.version}: " + ", ".join(p.name for p in lib.pmus() if p.present))
        if lib else pfm.unavailable_reason(),
        "events": [{"name": e.name, "status": st, "message": msg, "description": e.description,
                    "encoding": e.translate()} for e, st, msg in probed],
        "backend_stalls": stalls.reason or f"{len(stalls)} events",
        "sources": {k: (v or "ok") for k, v in src.items()},
    }
