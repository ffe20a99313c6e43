"""corecast.sim: trace-driven simulation of caches, TLBs, branch predictors and issue logic.

The Python face of the native simulator (native/sim/): machine descriptions (`machine`:
`load_machine`, `bundled`), traces (`trace`: `Trace`, `read_trace`, `write_trace`, converters),
synthetic generators (`synth`), capture of a program's trace (`capture`), the batch interface
(`engine`: `Simulator`, `simulate`, `SimOptions`), the result (`result`: `SimResult`) and
miss-rate curves (`mrc`). Import what you use from its module; the package itself loads
nothing, so `corecast sim machines` never loads numpy or the native library. See docs/sim.md.
"""
