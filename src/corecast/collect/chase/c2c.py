"""Core-to-core latency: one cache line handed back and forth between two pinned threads
(`cc_pingpong` in native/chase/chase.c), for the kinds of CPU pairs the topology has.

Kinds: `smt` (two hardware threads of one core), `same_socket` (two cores of one socket) and
`cross_socket`. For each kind a few representative pairs are measured (the first CPU of the
order with the others, spread over cores and sockets); a pair's figure is the median over its
undisturbed samples of the time of one transfer (half a round trip), and a kind's figure the
median over its pairs. Kinds the machine does not have are named with the reason.

On a busy machine the two threads share their CPUs with other programs, and a transfer only
happens while both run: a sample during which the scheduler switched either out timed the other
programs, not the line. Such samples are known (each thread's context switches, read between
samples) and left out; samples are short (100 round trips, ~10 us) and many (1001), so that most
fall between two switches. Before, a pair's figure was the median of 101 samples of 1000 round
trips each, whatever the scheduler did during them (issue 26: under load, 38.7 ns against an
independent ping-pong's 25.5 ns).
"""
from __future__ import annotations

import statistics
from typing import Any, Callable

from .. import topology as topo_mod
from . import native

KINDS = ("smt", "same_socket", "cross_socket")


def _kind(a: topo_mod.PU, b: topo_mod.PU) -> str:
    if a.core == b.core:
        return "smt"
    return "same_socket" if a.package == b.package else "cross_socket"


def representative_pairs(topo: topo_mod.Topology, per_kind: int = 3) -> dict[str, list[tuple[int, int]]]:
    """Up to `per_kind` pairs of each kind, each CPU used as little as possible."""
    pus = sorted(topo.pus, key=lambda p: (p.package, p.core, p.smt_index))
    out: dict[str, list[tuple[int, int]]] = {k: [] for k in KINDS}
    used: dict[str, set[int]] = {k: set() for k in KINDS}
    for i, a in enumerate(pus):
        for b in pus[i + 1:]:
            k = _kind(a, b)
            if len(out[k]) >= per_kind:
                continue
            # spread the pairs: prefer CPUs not yet in a pair of this kind
            if a.os_index in used[k] and b.os_index in used[k] and len(pus) > 2 * per_kind:
                continue
            out[k].append((a.os_index, b.os_index))
            used[k].update((a.os_index, b.os_index))
    return out


def not_measurable(topo: topo_mod.Topology, pairs: dict[str, list[tuple[int, int]]]) -> dict[str, str]:
    why = {}
    if not pairs["smt"]:
        why["smt"] = (f"{topo.threads_per_core} hardware thread per core here (no SMT siblings"
                      + (", or SMT is off" if topo.threads_per_core == 1 else "") + ")")
    if not pairs["same_socket"]:
        why["same_socket"] = "one core per socket here"
    if not pairs["cross_socket"]:
        why["cross_socket"] = f"{topo.sockets} socket here" if topo.sockets == 1 else "no pair spans two sockets"
    return why


#: Fewer undisturbed samples than this: the pair's figure is the median of all, and says so.
MIN_CLEAN = 51


def core_to_core(topo: topo_mod.Topology | None = None, rounds: int = 100, samples: int = 1001,
                 per_kind: int = 3, progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """The core-to-core block of a calibration (shape in corecast.machines.schema.calibration_doc)."""
    topo = topo or topo_mod.read_topology()
    pairs = representative_pairs(topo, per_kind)
    todo = [(k, p) for k in KINDS for p in pairs[k]]
    results = []
    for i, (kind, (a, b)) in enumerate(todo):
        if progress:
            progress(i, len(todo), f"ping-pong CPU {a} <-> CPU {b} ({kind.replace('_', ' ')})")
        ns, disturbed = native.pingpong(a, b, rounds, samples)
        clean = ns[~disturbed]
        use = clean if len(clean) >= MIN_CLEAN else ns
        results.append({"cpus": [a, b], "kind": kind, "ns": float(statistics.median(use)),
                        "min_ns": float(use.min()), "max_ns": float(use.max()),
                        "samples": int(len(ns)), "disturbed": int(disturbed.sum())})
    if progress:
        progress(len(todo), len(todo), "done")
    out: dict[str, Any] = {}
    for k in KINDS:
        vals = [r["ns"] for r in results if r["kind"] == k]
        out[k] = float(statistics.median(vals)) if vals else None
    out["pairs"] = results
    out["not_measured"] = not_measurable(topo, pairs)
    out["method"] = (f"one 64-byte line passed between two pinned threads; {rounds} round trips per sample, "
                     f"{samples} samples after one dropped; a pair's figure is the median time per transfer "
                     "(half a round trip) over the samples during which neither thread was switched out "
                     f"(over all of them where fewer than {MIN_CLEAN} were: 'disturbed' counts the others), "
                     "a kind's the median over its pairs")
    return out
