"""corecast sched: scheduling on asymmetric (big/small) multicores -- simulate policies, fit
speedup-factor models, reproduce the PMCTrack case study, enforce a policy on real programs."""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from .. import outputs
from ..errors import UserError
from ..parsing import arg, count, number, seed, time_s
from ._args import route_actions
from . import _Parser, add_format, add_verbosity, output_format, program
from ._output import print_document

COMMAND = "sched"
HELP = "scheduling on big/small cores: simulate HSP, RR, A-DWRR, EQP, ACFS, energy-aware and CFS; SF models; enforce"
DESCRIPTION = """\
Scheduling on asymmetric multicores (big and small cores), after the PMCTrack case studies.

  corecast sched sim WORKLOAD --machine M --policy P   simulate a workload under policies
  corecast sched paper [--figure 8|9]                  the PMCTrack paper's Figures 8 and 9
  corecast sched sfmodel fit DATA [-o MODEL.json]      SF models from per-window metrics
  corecast sched run --policy P -- 'cmd1' 'cmd2'       enforce a policy on real programs
  corecast sched machines|workloads|policies [NAME]    what is bundled

Policies: hsp, rr, adwrr, eqp, acfs, energy, cfs (and acfs-big), or FILE.py:ClassName for your
own (a corecast.sched.Policy). Run `corecast sched sim -h` (and so on) for each action's
options. See docs/sched.md.

examples:
  corecast sched sim pmctrack-mix --machine 2b-2s --policy hsp,rr,acfs --plot mix.png
  corecast sched paper --figure 9 --plot fig9.png
  corecast sched run --policy rr -- './a.out' './b.out'"""

ACTIONS = ("sim", "paper", "sfmodel", "run", "machines", "workloads", "policies")
#: Each action's one line (its man page's NAME, its description in shell completion).
ACTION_HELP = {
    "sim": "simulate a workload on an asymmetric multicore under scheduling policies",
    "paper": "reproduce the PMCTrack paper's Figures 8 and 9 in simulation",
    "sfmodel": "speedup-factor models from per-window counter metrics",
    "run": "run programs together under a policy, with real thread affinity",
    "machines": "list the bundled AMP machine descriptions, or show one",
    "workloads": "list the bundled workloads, or show one",
    "policies": "list the built-in scheduling policies, or show one",
}


# The bounds of what `sched` accepts (docs/sched.md, "Bounds"): times in corecast.parsing's
# vocabulary; the workload's own (work, threads, applications, quanta) in corecast.sched.
_QUANTUM = arg(time_s, low=1e-6, high=10.0)                    # a simulated quantum: 1us .. 10 s
_PERIOD = arg(time_s, low=1e-6, high=3600.0)                   # RR's migration period: 1us .. 1h
_MIGRATION = arg(time_s, allow_zero=True, high=1.0)            # CPU time lost per move: 0 .. 1 s
_RUN_QUANTUM = arg(time_s, low=1e-3, high=10.0)                # sched run's decision period: 1ms .. 10 s
_RUNS = arg(count, low=1)                                      # at most as [rules] runs (in _sim)
_NOISE = arg(number, allow_zero=True, high=1.0)                # IPC sampling's sigma: 0 .. 1
_SEED = arg(seed)


def _sub_parsers(prog: str) -> dict[str, argparse.ArgumentParser]:
    fmt = argparse.RawDescriptionHelpFormatter
    sim = _Parser(prog=f"{prog} sim", formatter_class=fmt,
                  description="Simulate a workload on an AMP under one or more policies (event-driven, "
                              "deterministic with a seed) and report completion times, slowdowns, ASP, "
                              "unfairness, STP, ANTT, energy and EDP.")
    sim.add_argument("workload", metavar="WORKLOAD", help="bundled workload name or TOML file")
    sim.add_argument("--machine", "-m", metavar="AMP",
                     help="bundled machine name or TOML file (default: the workload's own)")
    sim.add_argument("--policy", "-p", default="all", metavar="P[,P...]",
                     help="policies to compare (default: all, every policy `sched policies` lists but "
                          "the variants); or FILE.py:ClassName")
    sim.add_argument("--quantum", type=_QUANTUM, default=0.010, metavar="T", help="scheduling quantum, 1us to 10 s (default 10ms)")
    sim.add_argument("--period", type=_PERIOD, metavar="T", help="RR's migration period, up to 1h (default 100ms)")
    sim.add_argument("--migration-cost", type=_MIGRATION, default=50e-6, metavar="T",
                     help="CPU time a thread loses when it moves to another core type, 0 to 1 s (default 50us)")
    sim.add_argument("--sf-source", choices=["true", "ipc-sampling", "model"],
                     help="where policies get speedup factors (default: EQP samples IPC, the others the true SF)")
    sim.add_argument("--sf-model", metavar="MODEL.json", help="for --sf-source model: `sched sfmodel fit -o` output")
    sim.add_argument("--sf-noise", type=_NOISE, default=0.05, metavar="SIGMA",
                     help="IPC sampling: relative noise of one sample, 0 to 1 (default 0.05)")
    sim.add_argument("--runs", type=_RUNS, metavar="N",
                     help="runs of the slowest application (default: the workload's rules, 3; at most what "
                          "[rules] runs allows)")
    sim.add_argument("--no-restart", action="store_true", help="each application runs once (a batch)")
    sim.add_argument("--seed", type=_SEED, default=1, help="seed of the random choices (default 1)")
    add_format(sim, "policy and application", json_help="print a JSON document instead of tables")
    sim.add_argument("--plot", metavar="FILE", help="grouped bar chart of slowdowns, ASP and unfairness (.png .svg .pdf)")

    paper = _Parser(prog=f"{prog} paper", formatter_class=fmt,
                    description="Reproduce the PMCTrack paper's Figures 8 (2B-2S) and 9 (2B-10S) in simulation: "
                                "ASP and unfairness of HSP, RR, A-DWRR, EQP and ACFS on the Table 2 and 3 mixes "
                                "by category, and the paper's findings checked beside its figures.")
    paper.add_argument("--figure", choices=["8", "9", "all"], default="all", help="which figure (default all)")
    paper.add_argument("--experiment", metavar="TOML", action="append",
                       help="an experiment file of the same form instead (repeatable)")
    paper.add_argument("--policies", metavar="P[,P...]", help="policies (default: the paper's five)")
    paper.add_argument("--sf-source", choices=["true", "ipc-sampling", "model"],
                       help="one SF source for every policy (default: EQP samples IPC, the others the true SF)")
    paper.add_argument("--sf-model", metavar="MODEL.json", help="for --sf-source model")
    paper.add_argument("--quantum", type=_QUANTUM, default=0.010, metavar="T", help="scheduling quantum, 1us to 10 s (default 10ms)")
    paper.add_argument("--migration-cost", type=_MIGRATION, default=50e-6, metavar="T", help="0 to 1 s (default 50us)")
    paper.add_argument("--seed", type=_SEED, default=1, help="seed of the random choices (default 1)")
    paper.add_argument("--json", action="store_true", help="print a JSON document instead of tables")
    paper.add_argument("--plot", metavar="FILE",
                       help="the figure(s) as grouped bars; with both, FILE-fig8.EXT and FILE-fig9.EXT")

    sfm = _Parser(prog=f"{prog} sfmodel", formatter_class=fmt,
                  description="Speedup-factor models: `fit` builds SF from big-core metrics and SF from small-core "
                              "metrics by regression with forward feature selection.")
    sfsub = sfm.add_subparsers(dest="sfaction", metavar="ACTION", parser_class=_Parser)
    fit = sfsub.add_parser("fit", formatter_class=fmt,
                           help="fit the two models from per-window metrics recorded on both core types",
                           description="Fit SF = b0 + Σ b_j x_j from the metrics seen on a big core, and from those "
                                       "seen on a small core; features chosen forward by the error on held-out "
                                       "applications; correlation in sample and on held-out applications; the "
                                       "phase rule (running IPC average) applied to each application.\n\n"
                                       "DATA: CSV, wide (app, window, sf, big_<metric>, small_<metric>) or long "
                                       "(app, window, core, <metrics>, ips). Or two `corecast stat --format csv` runs "
                                       "of one program with --stat-big/--stat-small.")
    fit.add_argument("data", nargs="*", metavar="DATA", help="CSV files of windows")
    fit.add_argument("--stat-big", metavar="CSV", help="a `corecast stat --format csv` run pinned to a big core")
    fit.add_argument("--stat-small", metavar="CSV", help="the same program's run pinned to a small core")
    fit.add_argument("--app", default="app", help="the application's name for --stat-big/--stat-small")
    fit.add_argument("--max-features", type=int, default=4, metavar="N", help="features per model (default 4)")
    fit.add_argument("--per-phase", action="store_true", help="fit on the phases' means, not the windows")
    fit.add_argument("--threshold", type=float, default=0.25,
                     help="phase rule: relative distance from the running IPC average that starts a new phase (default 0.25)")
    fit.add_argument("-o", "--output", metavar="MODEL.json", help="write the model (for sim --sf-source model)")
    fit.add_argument("--json", action="store_true", help="print the model as JSON")

    run = _Parser(prog=f"{prog} run", formatter_class=fmt,
                  description="Run programs together and apply a policy to their threads every quantum with "
                              "sched_setaffinity, from per-thread progress (instructions where the PMU counts "
                              "them, else the task clock; application progress files where given). The big and "
                              "small CPUs come from --big/--small, else from sysfs on a hybrid machine, else the "
                              "CPUs are split in two and the small half is slowed (an EMULATED AMP, said in "
                              "every output). Each program is first run alone, for its slowdown.")
    run.add_argument("--policy", "-p", required=True, metavar="P", help="a policy `sched policies` lists, or FILE.py:Class")
    run.add_argument("--big", metavar="CPUS", help="the big CPUs, e.g. 0-3")
    run.add_argument("--small", metavar="CPUS", help="the small CPUs, e.g. 4-7")
    run.add_argument("--emulate", choices=["auto", "cgroup", "stealer", "none"], default="auto",
                     help="how small CPUs are slowed on a machine whose CPUs are alike (default auto: a cgroup "
                          "CPU limit where a cpu controller is mounted, else a duty-cycle stealer)")
    run.add_argument("--small-speed", type=float, metavar="S", help="emulated speed of a small CPU, 0..1 (default 0.5)")
    run.add_argument("--quantum", type=_RUN_QUANTUM, default=0.05, metavar="T", help="decision period, 1ms to 10 s (default 50ms)")
    run.add_argument("--period", type=_PERIOD, metavar="T", help="RR's migration period, up to 1h (default 100ms)")
    run.add_argument("--sf", metavar="SF[,SF...]", help="declared speedup factor of each program, in order (- for none)")
    run.add_argument("--progress", choices=["auto", "instructions", "taskclock"], default="auto",
                     help="per-thread progress: instructions where countable (auto), or the task clock")
    run.add_argument("--progress-file", action="append", metavar="FILE",
                     help="a program's own progress report (its last number), in program order (repeatable)")
    run.add_argument("--no-alone", action="store_true", help="do not run the programs alone first (no slowdowns)")
    run.add_argument("--json", action="store_true", help="print a JSON document instead of tables")
    run.add_argument("commands", nargs=argparse.REMAINDER, metavar="-- 'CMD1' 'CMD2' ...",
                     help="the programs, one quoted command line each")

    lst = {}
    for name, what in (("machines", "bundled AMP machine descriptions"), ("workloads", "bundled workloads"),
                       ("policies", "built-in policies")):
        p = _Parser(prog=f"{prog} {name}", formatter_class=fmt, description=f"List the {what}, or show one.")
        p.add_argument("name", nargs="?", help="one to show")
        p.add_argument("--json", action="store_true")
        lst[name] = p
    subs = {"sim": sim, "paper": paper, "sfmodel": sfm, "run": run, **lst}
    for sub in subs.values():
        add_verbosity(sub)                  # -q and -v, as every command takes them
    return subs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", metavar="ACTION", choices=ACTIONS,
                        help="sim, paper, sfmodel fit, run, machines, workloads or policies")
    route_actions(parser, _sub_parsers(parser.prog), ACTION_HELP)


# ----------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    return {"sim": _sim, "paper": _paper, "sfmodel": _sfmodel, "run": _run, "machines": _list,
            "workloads": _list, "policies": _list}[args.action](args)


def _policies(text: str) -> list[str]:
    from ..sched.policies import POLICIES
    if text == "all":
        return list(POLICIES)
    out = [p.strip() for p in text.split(",") if p.strip()]
    if not out:
        raise UserError(f"--policy {text!r}: name at least one policy")
    return out


def _sf_model(path: str | None, source: str | None):
    if source == "model" and not path:
        raise UserError("--sf-source model needs --sf-model FILE (written by `corecast sched sfmodel fit -o`)")
    if not path:
        return None
    from ..sched.sfmodel import load_model
    return load_model(path)


def _sim(args: argparse.Namespace) -> int:
    from ..report import plots
    from ..report import sched as R
    from ..report.tables import sched_sim_rows
    from ..report.terminal import console
    from ..sched.engine import Options
    from ..sched.machine import load_machine
    from ..sched.metrics import References, evaluate
    from ..sched.policies import make_policy
    from ..sched.workload import MAX_RUNS, load_workload

    if args.plot:
        plots.check_plot_path(args.plot)
    if args.runs is not None and args.runs > MAX_RUNS:
        raise UserError(f"--runs {args.runs}: at most {MAX_RUNS} (as a workload's [rules] runs)")
    names = _policies(args.policy)
    pols = [make_policy(p) for p in names]
    if args.period is not None:
        # the period is for the periodic policies among those named (RR); none of them: a mistake
        periodic = [i for i, p in enumerate(pols) if getattr(p, "period_s", None) is not None]
        if not periodic:
            make_policy(names[0], args.period)          # says why, in one line
        for i in periodic:
            pols[i] = make_policy(names[i], args.period)
    wl = load_workload(args.workload)
    if args.runs is not None or args.no_restart:
        wl = wl.with_rules(runs=args.runs, restart=False if args.no_restart else None)
    mname = args.machine or wl.machine
    if not mname:
        raise UserError(f"{args.workload}: the workload names no machine: give --machine (`corecast sched machines` lists them)")
    machine = load_machine(mname)
    opts = Options(quantum=args.quantum, migration_cost=args.migration_cost, sf_source=args.sf_source,
                   sf_model=_sf_model(args.sf_model, args.sf_source), sf_noise=args.sf_noise, seed=args.seed)
    refs = References(wl, machine, opts)
    metrics = {}
    for pol in pols:
        _, met = evaluate(wl, machine, pol, opts, refs)
        metrics[pol.name] = met
    print_document(output_format(args), lambda: R.sim_doc(wl, machine, opts, metrics),
                   lambda: R.render_sim(console(), wl, machine, opts, metrics), rows=sched_sim_rows,
                   allow_nan=False, default=_jdefault)
    if args.plot:
        fig = R.sim_figure(metrics, f"{wl.name} on {machine.name}")
        plots.save(fig, args.plot)
        plots.pyplot().close(fig)
    return 0


def _jdefault(x):
    return None


def _paper(args: argparse.Namespace) -> int:
    from ..report import plots
    from ..report import sched as R
    from ..report.terminal import console
    from ..sched.engine import Options
    from ..sched.experiments import findings, load_experiment, run as run_exp

    if args.plot:
        plots.check_plot_path(args.plot)
    names = args.experiment or {"8": ["pmctrack-2b2s"], "9": ["pmctrack-2b10s"],
                                "all": ["pmctrack-2b2s", "pmctrack-2b10s"]}[args.figure]
    exps = [load_experiment(n) for n in names]
    pols = _policies(args.policies) if args.policies else None
    if pols:
        from ..sched.policies import POLICIES, VARIANTS
        for p in pols:
            if p not in POLICIES and p not in VARIANTS:
                raise UserError(f"--policies: unknown policy '{p}' (choose {', '.join([*POLICIES, *VARIANTS])})")
    opts = Options(quantum=args.quantum, migration_cost=args.migration_cost, seed=args.seed,
                   sf_model=_sf_model(args.sf_model, args.sf_source))
    from .. import messages
    total = sum(len(e.workloads) * len(pols or e.policies) for e in exps)
    started = [0]

    def starting(item: str, fig: str) -> None:      # run_exp names each run as it starts
        bar.update(started[0], f"{fig}: {item}")
        started[0] += 1

    with messages.Progress("simulating", total=total, unit="runs") as bar:
        results = [run_exp(e, opts, args.sf_source, pols,
                           progress=lambda item, fig=e.figure or e.name: starting(item, fig)) for e in exps]
        bar.update(total, "done")
    fnd = [findings(r) for r in results]
    print_document("json" if args.json else "table", lambda: R.paper_doc(results, fnd),
                   lambda: R.render_paper(console(), results, fnd), allow_nan=False)
    if args.plot:
        p = Path(args.plot)
        with messages.Progress("plotting", total=len(results), unit="figures") as bar:
            for res in results:
                out = p if len(results) == 1 else p.with_name(f"{p.stem}-fig{res.experiment.figure.split()[-1]}{p.suffix}")
                bar.update(bar.done, str(out))
                fig = R.paper_figure(res)
                plots.save(fig, out)
                plots.pyplot().close(fig)
                bar.advance(1)
    return 0


def _sfmodel(args: argparse.Namespace) -> int:
    from ..report import sched as R
    from ..report.terminal import console
    from ..sched import sfmodel as M

    if args.sfaction != "fit":
        raise UserError("sfmodel: give an action: fit (`corecast sched sfmodel fit -h`)")
    if not (args.threshold > 0 and math.isfinite(args.threshold)):
        raise UserError(f"--threshold {args.threshold}: must be > 0")
    if args.output:
        outputs.check(args.output)          # before the work, not after it
    parts = [M.load_windows(d) for d in args.data]
    if args.stat_big or args.stat_small:
        if not (args.stat_big and args.stat_small):
            raise UserError("--stat-big and --stat-small go together")
        parts.append(M.from_stat(args.stat_big, args.stat_small, args.app))
    if not parts:
        raise UserError("no windows: give DATA files or --stat-big/--stat-small")
    model = M.fit(M.concat(parts), args.max_features, args.per_phase, args.threshold)
    if args.output:
        M.save(model, args.output)          # named on standard error, never on standard output
    print_document("json" if args.json else "table", model.to_dict, lambda: R.render_sfmodel(console(), model),
                   allow_nan=False, default=_jdefault)
    return 0


def _run(args: argparse.Namespace) -> int:
    from ..report import sched as R
    from ..report.terminal import console
    from ..sched.enforce.runner import enforce, prepare
    from ..sched.policies import make_policy

    cmds = program(args.commands, "no programs: give them after --, e.g. -- './a' './b'")
    make_policy(args.policy, args.period)  # an unknown policy before anything starts
    sfs = None
    if args.sf:
        sfs = []
        for x in args.sf.split(","):
            x = x.strip()
            if x in ("-", ""):
                sfs.append(None)
                continue
            try:
                v = float(x)
            except ValueError:
                raise UserError(f"--sf {args.sf}: '{x}' is not a number") from None
            if not (v > 0 and math.isfinite(v)):
                raise UserError(f"--sf {args.sf}: a speedup factor must be > 0")
            sfs.append(v)
        if len(sfs) != len(cmds):
            raise UserError(f"--sf gives {len(sfs)} values for {len(cmds)} programs")
    pf = args.progress_file
    if pf and len(pf) != len(cmds):
        raise UserError(f"--progress-file given {len(pf)} times for {len(cmds)} programs")
    for f in pf or []:
        _progress_file(f)
    setup = prepare(args.big, args.small, args.emulate, args.small_speed, args.quantum)
    res = enforce(cmds, args.policy, setup, sfs, not args.no_alone, pf, args.progress, args.period)
    print_document("json" if args.json else "table", res.to_dict, lambda: R.render_run(console(), res),
                   allow_nan=False)
    return 0


def _progress_file(path: str) -> None:
    """A progress file the program will write: its folder must exist, and it must not be a
    folder (it was ignored in silence, and the run went on without it)."""
    p = Path(path)
    if p.is_dir():
        raise UserError(f"--progress-file {path}: a folder, not a file")
    if not p.parent.is_dir():
        raise UserError(f"--progress-file {path}: folder {p.parent} does not exist (the program could not write it)")


def _list(args: argparse.Namespace) -> int:
    from ..report.sched import render_listing
    from ..report.terminal import console
    from ..sched.machine import bundled_machines, load_machine
    from ..sched.policies import POLICIES, VARIANTS
    from ..sched.workload import bundled_workloads, load_workload

    items: Any
    if args.action == "policies":
        known = {**POLICIES, **VARIANTS}
        if args.name and args.name not in known:
            raise UserError(f"unknown policy '{args.name}' (choose {', '.join(known)})")
        items = {n: (c.__doc__ or "").strip().splitlines()[0] for n, c in known.items() if n == args.name or not args.name}
    elif args.action == "machines":
        items = load_machine(args.name) if args.name else [load_machine(n) for n in bundled_machines()]
    else:
        items = load_workload(args.name) if args.name else [load_workload(n) for n in bundled_workloads()]
    print_document("json" if args.json else "table",
                   lambda: items if isinstance(items, dict) else (
                       [x.to_dict() for x in items] if isinstance(items, list) else items.to_dict()),
                   lambda: render_listing(console(), args.action, items))
    return 0
