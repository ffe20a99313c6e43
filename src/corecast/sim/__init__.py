"""corecast.sim: trace-driven simulation of caches, TLBs, branch predictors and issue logic.

The Python face of the native simulator (native/sim/): machine descriptions
(`load_machine`, `bundled`), traces (`Trace`, `read_trace`, `write_trace`, converters),
synthetic generators (`corecast.sim.synth`), the batch interface (`Simulator`, `simulate`)
and the result (`SimResult`). See docs/sim.md.
"""
from .machine import MachineDescription, bundled, load_machine

__all__ = ["MachineDescription", "bundled", "load_machine", "simulate", "Simulator",
           "SimOptions", "SimResult", "Trace", "read_trace", "write_trace"]


def __getattr__(name: str):  # lazy: the native library loads only when simulating
    if name in ("simulate", "Simulator", "SimOptions"):
        from . import engine
        return getattr(engine, name)
    if name == "SimResult":
        from .result import SimResult
        return SimResult
    if name in ("Trace", "read_trace", "write_trace"):
        from . import trace
        return getattr(trace, name)
    raise AttributeError(name)
