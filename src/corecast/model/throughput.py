"""`corecast throughput` as an API: the CPI stack of a workload on a machine, and the
throughput it implies on each core count (the memcached method of Hart, Frachtenberg and
Berezecki; the arithmetic is `corecast.model.cpi`, the queues `corecast.model.queueing`).

    doc = analyse(mpki="w.toml", machine="penryn-l5420", cores=[1, 2, 4],
                  measured={1: 128000, 2: 174000})
    doc["stack"]["cpi"], [r["capacity"] for r in doc["cores"]]

The events come from an `--mpki` file or a `corecast sim --json` result; the penalties and the
frequency from a machine description (the one the result was simulated on by default), then
from the input, then from explicit overrides, each penalty saying where it came from.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..errors import UserError
from ..sim.machine import MachineDescription, load_machine
from . import cpi


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
            measured: Mapping[int, float] | None = None) -> dict[str, Any]:
    """Everything `corecast throughput` prints, as plain data (its `--json` document).

    mpki or sim: the input file. machine: a bundled name or a TOML file (default: the machine a
    sim result was simulated on). frequency, baseline_cpi, instructions, lock_fraction and
    penalties ((name, cycles) pairs) override what the machine and the input say. target: the
    response-time bound in seconds, of the mean or of `percentile` (a fraction); clients and
    think_time: a closed-loop load generator; measured: throughput by core count to compare."""
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
        pens[k], sources[k] = v, "--penalty"
    stack = cpi.cpi_stack(inputs.baseline_cpi, inputs.events, pens, labels=inputs.labels,
                          penalty_sources=sources)
    instr = instructions if instructions is not None else inputs.instructions
    if instr is None:
        raise UserError(f"instructions per transaction unknown: give --instructions (the input {path} "
                        "does not say)")
    lock = lock_fraction if lock_fraction is not None else (inputs.lock_fraction or 0.0)
    counts = list(cores) if cores else default_cores(mach)
    ests = cpi.estimate_cores(stack.cpi, instr, freq, counts, lock, lock_model)
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
        "cores": [r.to_dict() for r in rows],
        "notes": notes + [n for r in rows for n in r.notes],
    }
