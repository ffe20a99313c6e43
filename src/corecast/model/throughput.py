"""`corecast throughput` as an API: the CPI stack of a workload on a machine, and the
throughput it implies on each core count (the memcached method of Hart, Frachtenberg and
Berezecki; the arithmetic is `corecast.model.cpi`, the queues `corecast.model.queueing`).

    doc = analyse(mpki="w.toml", machine="penryn-l5420", cores=[1, 2, 4],
                  measured={1: 128000, 2: 174000})
    doc["stack"]["cpi"], [r["capacity"] for r in doc["cores"]]

The events come from an `--mpki` file or a `corecast sim --json` result; the penalties and the
frequency from a machine description (the one the result was simulated on by default), then
from the input, then from explicit overrides, each penalty saying where it came from.

With a miss-rate curve (`mrc`, `corecast sim mrc --json`), the last-level events follow the
cache each core gets: on c cores, the machine's last-level cache divided among the cores that
share one (or `cache_size` for every core count), each core count with its own stack and CPI
(`misscurve.events_at_cache_size`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..errors import UserError
from ..sim.machine import CacheSpec, MachineDescription, load_machine
from . import cpi, misscurve


def last_level(machine: MachineDescription) -> CacheSpec:
    """The machine's last-level cache on the data side."""
    path = machine.data_path()
    if not path:
        raise UserError(f"machine {machine.name} has no data cache for a miss-rate curve to size")
    return path[-1]


def sharers(cache: CacheSpec, cores: int) -> int:
    """How many of `cores` busy cores share one instance of `cache` (cores fill one instance
    before the next: one per core for a private cache)."""
    return cores if cache.shared == 0 else min(cores, cache.shared)


def curve_bytes(machine: MachineDescription, llc: CacheSpec, share: float, cores: int) -> float:
    """The cache size of the curve that stands for `share` bytes of `llc` on `cores` cores: the
    share itself, and for a last level that holds only what the levels above do not (exclusive,
    victim), those levels' sizes per core as well."""
    if llc.policy not in ("exclusive", "victim"):
        return share
    return share + sum(c.size / sharers(c, cores) for c in machine.data_path() if c.level < llc.level)


def default_cores(machine: MachineDescription | None) -> list[int]:
    """1, 2, 4, ... up to the machine's core count (and the count itself)."""
    n = int(getattr(machine, "cores", 1) or 1)
    out = [1 << i for i in range(n.bit_length()) if (1 << i) <= n]
    return sorted(set(out + [n]))


def analyse(*, mpki: str | Path | None = None, sim: str | Path | None = None, machine: str | None = None,
            frequency: float | None = None, baseline_cpi: float | None = None,
            instructions: float | None = None, lock_fraction: float | None = None,
            lock_model: str = "wait-share", cores: Sequence[int] | None = None,
            penalties: Iterable[tuple[str, float]] = (), target: float = 1e-3,
            percentile: float | None = None, clients: int | None = None, think_time: float = 0.0,
            measured: Mapping[int, float] | None = None, mrc: str | Path | None = None,
            cache_size: float | None = None) -> dict[str, Any]:
    """Everything `corecast throughput` prints, as plain data (its `--json` document).

    mpki or sim: the input file. machine: a bundled name or a TOML file (default: the machine a
    sim result was simulated on). frequency, baseline_cpi, instructions, lock_fraction and
    penalties ((name, cycles) pairs) override what the machine and the input say. target: the
    response-time bound in seconds, of the mean or of `percentile` (a fraction); clients and
    think_time: a closed-loop load generator; measured: throughput by core count to compare.
    mrc: a miss-rate curve, which moves the last-level events to each core count's share of the
    last-level cache, or to `cache_size` bytes."""
    if (mpki is None) == (sim is None):
        raise UserError("give one input: an --mpki file or a --sim result")
    if mpki is not None:
        inputs, kind, path = cpi.load_mpki(mpki), "mpki", mpki
        if baseline_cpi is not None:
            inputs.baseline_cpi = baseline_cpi
    else:
        inputs, kind, path = cpi.load_sim(sim, baseline_cpi=baseline_cpi), "sim", sim
    notes: list[str] = []
    mach = None
    if machine:
        mach = load_machine(machine)
        if inputs.machine and inputs.machine != mach.name:
            notes.append(f"the events were simulated on '{inputs.machine}' but the penalties and "
                         f"frequency are '{mach.name}''s")
    elif inputs.machine:
        ref = inputs.machine_path if inputs.machine_path and Path(inputs.machine_path).exists() else inputs.machine
        mach = load_machine(ref)
    elif frequency is None:
        raise UserError("give --machine (frequency and penalties) or at least --frequency")
    freq = frequency if frequency is not None else mach.frequency_hz
    pens: dict[str, float] = {}
    sources: dict[str, str] = {}
    if mach is not None:
        for k, v in mach.penalties.items():
            pens[k] = float(v)
            how = mach.penalty_sources.get(k, "given")
            sources[k] = f"machine {mach.name}" + ("" if how == "given" else f" ({how})")
    for k, v in inputs.penalties.items():
        pens[k], sources[k] = v, f"input {Path(path).name}"
    for k, v in penalties:
        # a name no stack can use (`--penalty dram_miss=200` for dram) was silently ignored
        if k not in inputs.events and k not in pens and k not in cpi.PENALTY_NAMES:
            events = ", ".join(sorted(set(inputs.events) | set(cpi.PENALTY_NAMES)))
            raise UserError(f"--penalty {k}: no such event in {path} nor a penalty name (names: {events})")
        pens[k], sources[k] = v, "--penalty"
    def stack_of(events: Mapping[str, float]) -> cpi.CPIStack:
        return cpi.cpi_stack(inputs.baseline_cpi, events, pens, labels=inputs.labels,
                             penalty_sources=sources)

    instr = instructions if instructions is not None else inputs.instructions
    if instr is None:
        raise UserError(f"instructions per transaction unknown: give --instructions (the input {path} "
                        "does not say)")
    lock = lock_fraction if lock_fraction is not None else (inputs.lock_fraction or 0.0)
    counts = list(cores) if cores else default_cores(mach)
    llc_doc, by_cores, share = None, {}, {}
    if mrc is None and cache_size is not None:
        raise UserError("--cache-size needs --mrc: the miss-rate curve says what the size does")
    if mrc is None:
        stack = stack_of(inputs.events)
        ests = cpi.estimate_cores(stack.cpi, instr, freq, counts, lock, lock_model)
    else:
        if mach is None:
            raise UserError("--mrc needs a machine (--machine): its last-level cache is what the cores share")
        llc_doc, by_cores, share, stack = _cache_share(inputs, mach, misscurve.load_mrc(mrc), kind, counts,
                                                       cache_size, stack_of, notes)
        llc_doc["curve"] = str(mrc)
        ests = [e for c in counts for e in cpi.estimate_cores(by_cores[c].cpi, instr, freq, [c], lock, lock_model)]
    rows = cpi.throughput_at_cores(ests, target=target, percentile=percentile, clients=clients,
                                   think_time=think_time, measured=measured)
    notes = list(inputs.notes) + notes
    for c in stack.components:
        if "formula" in c.penalty_source:
            notes.append(f"{c.name} penalty {c.penalty_cycles:g} cycles from the {c.penalty_source}")
    if measured:
        extra = sorted(set(measured) - set(counts))
        if extra:
            notes.append(f"measured values at {', '.join(map(str, extra))} core(s) are not among --cores")
    return {
        "machine": None if mach is None else {"name": mach.name, "path": mach.path},
        "frequency_hz": freq,
        "input": {"kind": kind, "path": str(path)},
        "instructions": instr,
        "lock_fraction": lock,
        "lock_model": lock_model,
        "stack": {**stack.to_dict(), "rows": stack.rows()},
        "target": {"seconds": target, "statistic": "mean" if percentile is None else f"p{100 * percentile:g}"},
        "closed_loop": None if clients is None else {"clients": clients, "think_time_s": think_time},
        "cores": [_with_llc(r.to_dict(), by_cores, share, llc_doc) for r in rows],
        "llc": llc_doc,
        "notes": notes + [n for r in rows for n in r.notes],
    }


def _cache_share(inputs: cpi.CPIInputs, mach: MachineDescription, curve: misscurve.MissCurve, kind: str,
                 counts: Sequence[int], cache_size: float | None, stack_of: Any,
                 notes: list[str]) -> tuple[dict[str, Any], dict[int, cpi.CPIStack], dict[int, float], cpi.CPIStack]:
    """The stack of each core count with the last-level cache it gets (see `analyse`): the
    document's `llc` part, the stacks and cache shares by core count, and the stack shown (at
    `cache_size`, else the input's own)."""
    llc = last_level(mach)
    llc_hit = {3: "l3_hit", 2: "l2_hit"}.get(llc.level)
    # where the input's events were taken: a simulation's cores on its own machine; an --mpki
    # file's on one core of this machine
    at_mach, at_cores = mach, inputs.cores if kind == "sim" else 1
    if kind == "sim" and inputs.machine and inputs.machine != mach.name:
        try:
            at_mach = load_machine(inputs.machine_path if inputs.machine_path and Path(inputs.machine_path).exists()
                                   else inputs.machine)
        except UserError:
            notes.append(f"the events' machine '{inputs.machine}' cannot be loaded: its last-level cache "
                         f"is taken to be {mach.name}'s")
    at_llc = last_level(at_mach)
    from_share = at_llc.size / sharers(at_llc, at_cores)
    from_bytes = curve_bytes(at_mach, at_llc, from_share, at_cores)
    share = {c: float(cache_size) if cache_size is not None else llc.size / sharers(llc, c) for c in counts}
    on_curve = {c: curve_bytes(mach, llc, share[c], c) for c in counts}
    by_cores = {c: stack_of(misscurve.events_at_cache_size(inputs.events, curve, from_bytes, on_curve[c], llc_hit))
                for c in counts}
    if curve.counted != "exposed":
        notes.append("the curve counts the misses of every access, stores too; the stack's events count "
                     "those a core waits for (`corecast sim mrc --count exposed` makes that curve)")
    outside = sorted({s for s in [from_bytes, *on_curve.values()] if not curve.covers(s)})
    if outside:
        notes.append(f"cache sizes outside the curve's {curve.sizes_bytes[0]:,.0f}-{curve.sizes_bytes[-1]:,.0f} "
                     f"bytes take its end values: {', '.join(f'{s:,.0f}' for s in outside)}")
    if cache_size is None and llc.shared == 1:
        notes.append(f"{llc.name} is private to each core: its share does not shrink as cores are added")
    if llc.policy in ("exclusive", "victim"):
        notes.append(f"{llc.name} is {llc.policy}: it holds what the levels above do not, so the curve is read "
                     "at its share plus their sizes per core")
    if kind == "mpki":
        notes.append(f"the input's events are taken to be those of one core with a whole {llc.name} "
                     f"({llc.size:,} bytes)")
    doc = {"name": llc.name, "size_bytes": llc.size,
           "shared_by": "all cores" if llc.shared == 0 else llc.shared,
           "events_at_bytes": from_share, "cache_size": cache_size, "hit_event": llc_hit,
           "counted": curve.counted}
    stack = stack_of(misscurve.events_at_cache_size(inputs.events, curve, from_bytes,
                                              curve_bytes(mach, llc, cache_size, 1), llc_hit)) \
        if cache_size is not None else stack_of(inputs.events)
    return doc, by_cores, share, stack


def _with_llc(row: dict[str, Any], by_cores: Mapping[int, cpi.CPIStack], share: Mapping[int, float],
              llc: dict[str, Any] | None) -> dict[str, Any]:
    """A core count's row with its cache share, the CPI of its stack (before the lock) and its
    last-level events."""
    if llc is None:
        return row
    st = by_cores[row["cores"]]
    events = {c.name: c.per_kilo for c in st.components if c.name in ("dram", llc["hit_event"])}
    return {**row, "llc_share_bytes": share[row["cores"]], "stack_cpi": st.cpi, "llc_events": events}
