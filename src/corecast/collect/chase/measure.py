"""What one `corecast chase` (or `calibrate`) asks for, turned into runs: the modes, their
defaults, and the extra sweep a memory profile needs."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

from ...errors import UserError
from ...parsing import size_bytes
from . import run as R

#: Seconds measured per point when none is given: the concurrency and loaded modes, the sizes.
DURATION_S = 0.4
SIZES_DURATION_S = 0.25

PhaseProgress = Callable[[str], R.Progress]


@dataclass
class Request:
    settings: R.Settings
    mode: str = "concurrency"           # concurrency | sizes | loaded
    threads: str | None = None          # --threads (default pow2)
    chains: str | None = None           # --chains (default DEFAULT_CHAINS)
    sizes: str | None = None            # --sizes (default default_sizes)
    delays: str | None = None           # --delays (default DEFAULT_DELAYS)
    loaders: int | None = None
    order: str = "socket"
    oversubscribe: bool = False
    duration_s: float | None = None     # for the mode asked; the other takes its default
    profile: bool = False               # also run what a memory profile needs
    sizes_duration_s: float | None = None   # the size sweep's, when it is not the mode asked


def parse_sizes(text: str, line: int) -> list[int]:
    """`16KiB,1MiB,256MiB`, or a range `4KiB-256MiB` (x1.5 and x2 steps)."""
    def one(t: str) -> int:
        v = size_bytes(t, "--sizes")
        if v < 2 * line:
            raise UserError(f"--sizes: {t} holds fewer than two {line}-byte lines")
        return v

    t = text.strip()
    m = re.fullmatch(r"([^,]+?)-([^,]+)", t)
    if m:
        lo, hi = one(m.group(1)), one(m.group(2))
        if hi < lo:
            raise UserError(f"--sizes {text}: the range goes downwards")
        vals, p = {lo, hi}, 1
        while p <= hi:
            vals.update(v for v in (p, p * 3 // 2) if lo <= v <= hi)
            p *= 2
    else:
        vals = {one(x) for x in t.split(",") if x.strip()}
    if not vals:
        raise UserError("--sizes: empty")
    return sorted({v // line * line for v in vals})


def measure(req: Request, progress: PhaseProgress | None = None) -> dict[str, R.Run]:
    """Run the mode asked for (and, with `profile`, the other sweep): {mode: Run}, in the order
    run."""
    if req.profile and req.mode == "loaded":
        raise UserError("--profile goes with the concurrency sweep or --sweep-size, not --loaded")
    _check_options(req)
    phase = progress or (lambda name: (lambda done, total, label: None))
    ses = R.Session(req.settings, order=req.order, oversubscribe=req.oversubscribe)
    own = req.duration_s
    runs: dict[str, R.Run] = {}
    if req.mode == "loaded":
        delays = R.parse_counts(req.delays, "--delays", low=0) if req.delays else list(R.DEFAULT_DELAYS)
        s = ses.derive(phase("loaded latency"), duration_s=DURATION_S if own is None else own)
        runs["loaded"] = R.loaded_latency(s, delays, req.loaders)
        return _kept(runs)
    if req.mode == "concurrency" or req.profile:
        threads = R.parse_counts(req.threads or "pow2", "--threads", len(ses.plan.cpus))
        chains = R.parse_counts(req.chains, "--chains") if req.chains else list(R.DEFAULT_CHAINS)
        s = ses.derive(phase("concurrency sweep"),
                       duration_s=(own if req.mode == "concurrency" and own is not None else DURATION_S))
        runs["concurrency"] = R.concurrency_sweep(s, threads, chains)
    if (req.mode == "sizes" or req.profile) and not _stopped(runs):
        sizes = parse_sizes(req.sizes, req.settings.line) if req.sizes else R.default_sizes(ses.caches(), req.settings.line)
        d = own if req.mode == "sizes" and own is not None else (req.sizes_duration_s or SIZES_DURATION_S)
        s = ses.derive(phase("size sweep"), duration_s=d, size_bytes=max(sizes))
        runs["sizes"] = R.size_sweep(s, sizes)
    return _kept(runs)


def _check_options(req: Request) -> None:
    """An option of a mode not run is a mistake, not something to ignore: --sizes is for the size
    sweep (--sweep-size, or the one --profile adds), --delays and --loaders for --loaded,
    --threads and --chains for the concurrency sweep (or the one --profile adds)."""
    own = req.duration_s
    if own is not None and not (0 < own and math.isfinite(own)):
        raise UserError(f"--duration {own:g}: a measured time above 0 (a point of 0 s measures nothing)")
    sweeps = {req.mode} | ({"concurrency", "sizes"} if req.profile else set())
    for given, opt, mode, how in ((req.sizes, "--sizes", "sizes", "--sweep-size or --profile"),
                                  (req.delays, "--delays", "loaded", "--loaded"),
                                  (req.loaders, "--loaders", "loaded", "--loaded"),
                                  (req.threads, "--threads", "concurrency", "the concurrency sweep (no --sweep-size "
                                   "or --loaded) or --profile"),
                                  (req.chains, "--chains", "concurrency", "the concurrency sweep (no --sweep-size "
                                   "or --loaded) or --profile")):
        if given is not None and mode not in sweeps:
            raise UserError(f"{opt} is for {how}; this run would not use it")


def _stopped(runs: dict[str, R.Run]) -> bool:
    return any(r.interrupted for r in runs.values())


def _kept(runs: dict[str, R.Run]) -> dict[str, R.Run]:
    """The runs with points; an interruption before the first point is the user's Ctrl-C."""
    kept = {m: r for m, r in runs.items() if r.points}
    if not kept and _stopped(runs):
        raise KeyboardInterrupt
    return kept


#: What `corecast calibrate` runs (about 25 s on 2 CPUs; see docs/chase.md).
CALIBRATION_CHAINS = "1,2,4,8,16,32,48,64"
CALIBRATION_DURATION_S = 0.2
CALIBRATION_SIZES_DURATION_S = 0.15


def calibration_request(order: str = "socket") -> Request:
    """The short profile of `corecast calibrate`: one thread (the per-core limit), one socket's
    cores (the bandwidth per socket) and every CPU (the peak), over CALIBRATION_CHAINS, and the
    size sweep with shorter points."""
    from .. import topology as topo_mod

    topo = topo_mod.read_topology()
    per_socket = max(1, len(topo.pus) // max(1, topo.sockets))
    threads = sorted({1, per_socket, len(topo.pus)})
    return Request(R.Settings(samples=4, warmup_s=0.05), mode="concurrency", threads=",".join(map(str, threads)),
                   chains=CALIBRATION_CHAINS, order=order, duration_s=CALIBRATION_DURATION_S, profile=True,
                   sizes_duration_s=CALIBRATION_SIZES_DURATION_S)
