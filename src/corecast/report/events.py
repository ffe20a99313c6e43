"""The text of `corecast events`: this machine's catalogue of events with their status, the
encodings of translated specs, a CPU model's backend-stall events, and the events libpfm4
knows for a PMU."""
from __future__ import annotations

import sys
from typing import Any, Iterable, Sequence

from ..collect.events import BACKEND_STALLS, CpuId, EventSpec, StallEventList

#: libpfm4's events of a PMU: (name, description, [(attribute, description), ...]).
PfmEvents = Sequence[tuple[str, str, Sequence[tuple[str, str]]]]


def render_translation(events: Iterable[EventSpec]) -> None:
    """`events --translate SPEC`: the perf encoding of each event and what it counts."""
    for e in events:
        print(e.translate())
        if e.description:
            print(f"    {e.description}")


def libpfm_doc(events: PfmEvents) -> list[dict[str, Any]]:
    """`events --libpfm PMU --format json`."""
    return [{"name": n, "description": d, "attrs": [{"name": a, "description": ad} for a, ad in at]}
            for n, d, at in events]


def render_libpfm(events: PfmEvents) -> None:
    """`events --libpfm PMU`: each event, then its attributes."""
    for n, d, attrs in events:
        print(f"{n}: {d}")
        for a, ad in attrs:
            print(f"    :{a}  {ad}")


def render_stalls(cpu: CpuId, stalls: StallEventList) -> None:
    """`events --cpu CPU`: the CPU model and its backend-stall events (or why it has none)."""
    print(f"CPU: {cpu.describe()}")
    if not stalls:
        print(f"backend stalls: {stalls.reason}")
    for e in stalls:
        print(f"  {e.translate()}\n      {e.description}")


def render_catalogue(data: dict[str, Any]) -> None:
    """`events`: the catalogue of this machine (`collect.catalogue.catalogue()`)."""
    print(f"CPU: {data['cpu']}")
    print(f"perf_event_paranoid: {data['perf_event_paranoid']}")
    print(f"PMUs: {', '.join(data['pmus']) or 'none'}")
    print(f"tracepoints: {data['tracefs'] or 'tracefs not mounted'}")
    print(f"libpfm4: {data['libpfm']}")
    print("[Events]")
    # why an event cannot be counted, said once for all the events it concerns (a VM without a
    # PMU gave the same sentence under 25 events): the status points to it by number
    reasons: dict[str, int] = {}
    for e in data["events"]:
        status = e["status"]
        if status != "ok" and e["message"]:
            n = reasons.setdefault(e["message"], len(reasons) + 1)
            status = f"{status} [{n}]"
        print(f"  {e['name']:<30} {status:<18} {e['description']}")
    for why, n in reasons.items():
        count = sum(1 for e in data["events"] if e["status"] != "ok" and e["message"] == why)
        print(f"  [{n}] {why} ({count} event{'s' if count != 1 else ''})")
    if not data["backend_stalls"].endswith(" events"):
        print(f"  {BACKEND_STALLS:<30} {'-':<18} {data['backend_stalls']}")
    print("[Software sources]")
    for k, v in data["sources"].items():
        print(f"  {k:<30} {'ok' if v == 'ok' else 'unavailable':<18} {'' if v == 'ok' else v}".rstrip())
    sys.stdout.flush()
