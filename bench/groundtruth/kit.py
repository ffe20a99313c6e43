"""The ground-truth kit: corecast set up from the working tree on a bare machine, then campaigns of
real programs at 1, 2, 4, 6, 8, 12 and 16 cores (those the machine has), 3 repetitions each,
and a summary -- all within a time budget (8 minutes on 16 cores). Started by run.sh.

    python3 bench/groundtruth/kit.py --out OUTDIR [--quick] [--cores 1,2] [--reps N]
                                     [--programs a,b] [--budget SECONDS]

What a bare machine has: Python >= 3.11 with NumPy and SciPy (no pip, no network), gcc, and
ninja for the build program. What it does not need: meson, rich, matplotlib, aiohttp.

1. Set-up (`build`): the tree's Python package is copied to OUTDIR/corecast/corecast and the C
   parts `measure` needs -- the sync shim, the launcher, the sentinel and the bundled workloads --
   are compiled with gcc into its `_native` folder, with the flags of corecast's meson build
   (the kit does not need meson, whose version on a bare machine may be older than the tree's
   build asks for). corecast then runs as `python3 -m corecast` with OUTDIR/corecast on
   PYTHONPATH. Without rich its tables are plain text; without matplotlib `predict --report`
   has no plot and `--plot` says so (report.terminal, report.plots).
2. Programs: bench/real_programs.toml, the list of real programs with their known scaling
   (bench/realprog.py reads it and makes their inputs: text, a C tree, the NumPy script), with
   their work multiplied by --scale (default: half the largest core count, 8 for 16 cores, so
   that each keeps enough independent pieces for the cores); and extra_programs.toml beside this
   file, what that list lacks: ninja building corecast's own C sources. The ones issue 24 names
   run first -- sort, xz, NumPy on its BLAS threads, the ninja build, the bundled workloads
   lockbench, pool, barrier, membw, phases -- then the rest of the list while the budget lasts.
3. Campaigns (`campaign`): `corecast measure -q --json` per program, into
   OUTDIR/campaigns/NAME.db; a program whose commands are missing is skipped with the reason;
   once the budget is spent the rest are skipped, said so.
4. Summary: OUTDIR/summary.json and summary.txt (machine, environment, per program the median
   time and speed-up at each count, the busiest lock, and `predict --json` on the campaign, which
   proves it loads).

bench/groundtruth/evaluate.py OUTDIR then fits on 1-4 cores and predicts 6-16.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TREE = HERE.parent.parent
sys.path.insert(0, str(TREE / "bench"))
import realprog  # noqa: E402  (bench/realprog.py: the list of real programs and their inputs)

CORE_COUNTS = (1, 2, 4, 6, 8, 12, 16)
BUDGET_S = 480.0
RUN_TIMEOUT_S = 120
OPTIONAL = ("rich", "matplotlib", "aiohttp", "plotly")
#: Run first, in this order (issue 24's programs); the rest of the lists after them.
FIRST = ("sort", "xz", "numpy-blas", "ninja-build", "lockbench", "pool", "barrier", "membw", "phases")
RESERVE_S = 45.0        # no campaign is started with less of the budget left
CHECK_RESERVE_S = 20.0  # a campaign still running this long before the budget's end is stopped

# the compiler flags of corecast's meson build (meson.build: gnu11, -O2, NDEBUG, warnings)
CFLAGS = ["-std=gnu11", "-O2", "-DNDEBUG", "-D_FILE_OFFSET_BITS=64", "-Wall", "-Wextra", "-Wno-unused-parameter"]
NATIVES = [  # (product, sources, extra flags): what `corecast measure` runs
    ("libcorecast_shim.so", ["native/shim/shim.c"],
     ["-fPIC", "-shared", "-fvisibility=hidden", "-fno-plt", "-pthread", "-ldl"]),
    ("corecast-launch", ["native/launch/launch.c"], []),
    ("corecast-sentinel", ["native/launch/sentinel.c"], []),
    # and every bundled workload (workloads/NAME/NAME.c)
    *[(f"corecast-{d.name}", [f"workloads/{d.name}/{d.name}.c"], ["-pthread", "-Inative/meters"])
      for d in sorted((TREE / "workloads").iterdir()) if (d / f"{d.name}.c").is_file()],
]


def python() -> list[str]:
    """This Python as a command, with the flags it runs with (-S, -s, -E, -I): the programs and
    corecast's commands run on the same interpreter and see the same packages."""
    f = sys.flags
    return [sys.executable] + (["-I"] if f.isolated else ["-E"] * f.ignore_environment + ["-s"] * f.no_user_site) + \
        ["-S"] * f.no_site


def load_programs() -> list[realprog.Program]:
    """bench/real_programs.toml and extra_programs.toml, issue 24's programs first."""
    progs = dict(realprog.load())
    with open(HERE / "extra_programs.toml", "rb") as fh:
        for d in tomllib.load(fh)["program"]:
            progs[d["name"]] = realprog.Program(**d)
    order = [n for n in FIRST if n in progs] + [n for n in progs if n not in FIRST]
    return [progs[n] for n in order]


def log(out: Path, text: str) -> None:
    print(text, flush=True)
    with open(out / "kit.log", "a") as fh:
        fh.write(text + "\n")


# ============================================================================ set-up
def build(out: Path, tree: Path = TREE) -> Path:
    """corecast's package with the C parts measure needs, compiled with gcc; returns the folder
    to put on PYTHONPATH."""
    site = out / "corecast"
    pkg = site / "corecast"
    if pkg.exists():
        shutil.rmtree(pkg)
    shutil.copytree(tree / "src" / "corecast", pkg, ignore=shutil.ignore_patterns("__pycache__", "_native", "*.pyc"))
    native = pkg / "_native"
    native.mkdir()

    def cc(item: tuple[str, list[str], list[str]]) -> str:
        product, sources, extra = item
        cmd = ["gcc", *CFLAGS, *[str(tree / s) for s in sources], "-o", str(native / product),
               *[f"-I{tree / e[2:]}" if e.startswith("-I") else e for e in extra]]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"kit: building {product} failed:\n{p.stderr[-2000:]}")
        return product

    with cf.ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as ex:
        list(ex.map(cc, NATIVES))
    return site


def environment(py: list[str]) -> dict[str, Any]:
    """What this Python has: corecast needs NumPy and SciPy; the rest it does without."""
    code = ("import importlib.util, json, sys; print(json.dumps({'python': sys.version.split()[0], "
            "**{m: importlib.util.find_spec(m) is not None for m in %r}}))" % (("numpy", "scipy") + OPTIONAL,))
    got = json.loads(subprocess.run([*py, "-c", code], capture_output=True, text=True, check=True).stdout)
    for m in ("numpy", "scipy"):
        if not got[m]:
            raise SystemExit(f"kit: {py[0]} has no {m}: corecast needs NumPy and SciPy (its models and its Dataset)")
    for m in ("numpy", "scipy"):
        got[f"{m}_version"] = subprocess.run([*py, "-c", f"import {m}; print({m}.__version__)"], capture_output=True,
                                             text=True).stdout.strip()
    got["fallbacks"] = [f"{m} not installed: " + {
        "rich": "tables and notes as plain text, no progress bar",
        "matplotlib": "predict --report without its plot, --plot refused",
        "aiohttp": "no dashboard (corecast serve)",
        "plotly": "no dashboard plots"}[m] for m in OPTIONAL if not got[m]]
    return got


# ============================================================================ inputs
def inputs(prog: realprog.Program, work: Path, scale: int, quick: bool) -> dict[str, Any]:
    """The values of the program's @placeholders@ (its input made in `work`); @python@ is this
    Python with its flags (several words)."""
    if prog.setup == "ninja":
        nd = work / "ninja"
        nd.mkdir(parents=True, exist_ok=True)
        (nd / "build.ninja").write_text(build_ninja(TREE, nd, quick))
        vals: dict[str, Any] = {"dir": str(nd), "scale": str(scale)}
    else:
        vals = realprog.prepare(prog, work, scale)
    vals["python"] = python()
    return vals


def build_ninja(tree: Path, nd: Path, quick: bool) -> str:
    """corecast's C sources (not the simulator, whose one file would be the whole build, nor the
    QEMU plugin, which needs QEMU's headers), compiled twice (release, debug)."""
    srcs = sorted(p for p in (tree / "native").rglob("*.c")
                  if p.parent.name not in ("sim", "qemu") and p.name != "locktab.c")
    srcs += sorted((tree / "workloads").rglob("*.c"))
    if quick:
        srcs = [p for p in srcs if p.parent.name == "launch"]
    inc = f"-I{tree / 'native' / 'include'} -I{tree / 'native' / 'meters'} -I{tree / 'native' / 'region'}"
    out = [f"rule cc\n  command = gcc -std=gnu11 $flags -w {inc} -fPIC -c $in -o $out\n"]
    for variant, flags in (("release", "-O2 -DNDEBUG"), ("debug", "-O0 -g")):
        for s in srcs:
            rel = s.relative_to(tree).with_suffix(".o")
            out.append(f"build {variant}/{str(rel).replace('/', '_')}: cc {s}\n  flags = {flags}\n")
    return "".join(out)


# ============================================================================ campaigns
def substitute(argv: list[str], vals: dict[str, Any]) -> list[str]:
    out: list[str] = []
    text_vals = {k: v for k, v in vals.items() if isinstance(v, str)}
    for a in argv:
        if a == "@python@":                       # a command of several words
            out.extend(vals["python"])
        else:
            out.append(realprog.fill(a, text_vals))
    return out


def corecast_env(site: Path) -> dict[str, str]:
    """The environment with the kit's corecast first on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(site) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def corecast(py: list[str], site: Path, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*py, "-m", "corecast", *args], capture_output=True, text=True, env=corecast_env(site),
                          timeout=timeout)


def campaign(py: list[str], site: Path, prog: realprog.Program, vals: dict[str, Any], cores: list[int], reps: int,
             db: Path, deadline: float | None = None) -> dict[str, Any]:
    """`corecast measure` of one program into `db`; at `deadline` (epoch seconds) it is stopped
    with SIGINT and keeps the runs it finished."""
    argv = substitute(prog.command, vals)
    text_vals = {k: v for k, v in vals.items() if isinstance(v, str)}
    opts = ["measure", "-q", "--json", "--cores", ",".join(map(str, cores)), "--reps", str(reps), "--warmup", "0",
            "--timeout", str(RUN_TIMEOUT_S), "-o", str(db)]
    if prog.throughput:
        opts += ["--throughput", prog.throughput]
    for k, v in prog.env.items():
        opts += ["--env", f"{k}={realprog.fill(v, text_vals)}"]
    t0 = time.monotonic()
    proc = subprocess.Popen([*py, "-m", "corecast", *opts, "--", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=corecast_env(site))
    cut = False
    try:
        stdout, stderr = proc.communicate(timeout=None if deadline is None else max(1.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        # the budget is spent: measure stops at SIGINT and keeps the runs it finished (a whole
        # sweep of the counts per repetition), which the campaign file holds
        cut = True
        proc.send_signal(signal.SIGINT)
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
    res: dict[str, Any] = {"elapsed_s": round(time.monotonic() - t0, 2), "exit_status": proc.returncode,
                           "command": argv}
    if cut:
        res["cut_short"] = "the time budget ran out during the campaign; the runs it finished are in the file"
    if proc.returncode in (0, 1) and stdout.strip():
        res["measure"] = json.loads(stdout)
    else:
        res["error"] = (stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
    return res


def probe_pinning(seconds: float = 0.4) -> dict[str, Any]:
    """Whether this machine enforces CPU affinity (a sandbox may accept sched_setaffinity and
    ignore it, and then every count runs on all CPUs): two processes pinned to one CPU spin for
    `seconds` of wall time; enforced, they share it (CPU time about `seconds` in all), else each
    gets its own (about twice)."""
    cpu = min(os.sched_getaffinity(0))
    t0 = time.monotonic()
    kids = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:                              # child: pin, spin, leave without cleanup
            try:
                os.sched_setaffinity(0, {cpu})
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    pass
            finally:
                os._exit(0)
        kids.append(pid)
    cpu_s = 0.0
    for pid in kids:
        _, _, ru = os.wait4(pid, 0)
        cpu_s += ru.ru_utime + ru.ru_stime
    wall = time.monotonic() - t0
    return {"cpu_s": round(cpu_s, 3), "wall_s": round(wall, 3), "enforced": cpu_s < 1.5 * seconds}


def probes() -> dict[str, Any]:
    """What the machine gives a campaign: affinity enforced, per-thread schedstat, PSI."""
    return {"pinning": probe_pinning(), "schedstat": os.path.exists(f"/proc/self/task/{os.getpid()}/schedstat"),
            "psi": os.path.exists("/proc/pressure/cpu"), "perf": shutil.which("perf") is not None}


def check(py: list[str], site: Path, db: Path, cores: list[int]) -> dict[str, Any]:
    """What corecast makes of the campaign: predict (auto, and mva where it is offered) at twice
    the largest count, and the busiest lock."""
    out: dict[str, Any] = {}
    target = str(2 * max(cores))
    for method in ("auto", "mva"):
        p = corecast(py, site, "predict", str(db), "--cores", target, "--method", method, "--json", timeout=300)
        if p.returncode == 0:
            doc = json.loads(p.stdout)
            pr = doc["predictions"][0]
            out[f"predict_{method}"] = {"cores": pr["cores"], "time_s": pr["time_s"], "model": doc["model"]}
            if method == "auto" and doc.get("locks"):
                out["locks_predicted"] = doc["locks"]["locks"][:2]
        else:
            out[f"predict_{method}"] = {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    p = corecast(py, site, "locks", str(db), "--json", "--top", "3", timeout=120)
    if p.returncode == 0:
        out["locks"] = [{"lock": g["lock"], "site": g["site"], "call": g["call"],
                         "wait_share": [x["wait_share"] for x in g["per_cores"]]} for g in json.loads(p.stdout)["locks"]]
    return out


# ============================================================================ summary
def summary_text(doc: dict[str, Any]) -> str:
    cores = doc["cores"]
    lines = [f"corecast ground-truth kit: {doc['machine']['cpu']} ({doc['machine']['cpus']} CPUs), "
             f"Python {doc['environment']['python']}, NumPy {doc['environment']['numpy_version']}, "
             f"SciPy {doc['environment']['scipy_version']}",
             f"core counts {','.join(map(str, cores))}, {doc['reps']} repetitions; {doc['elapsed_s']:.0f} s in all "
             f"(budget {doc['budget_s']:.0f} s)"]
    lines += [f"fallback: {f}" for f in doc["environment"]["fallbacks"]]
    pin = (doc.get("probes") or {}).get("pinning")
    if pin and not pin["enforced"]:
        lines.append(f"WARNING: CPU affinity is not enforced here ({pin['cpu_s']} s of CPU in {pin['wall_s']} s by two "
                     "processes pinned to one CPU): every count may have run on all CPUs")
    head = f"{'program':<12} {'kind':<10} " + " ".join(f"{'t@' + str(c):>8}" for c in cores) + "  speed-up  busiest lock"
    lines += ["", head, "-" * len(head)]
    for p in doc["programs"]:
        if p.get("skipped"):
            lines.append(f"{p['name']:<12} {p['kind']:<10} skipped: {p['skipped']}")
            continue
        rows = {r["cores"]: r for r in (p.get("measure") or {}).get("summary", [])}
        ts = [rows.get(c, {}).get("time_s") for c in cores]
        cells = " ".join(f"{t[0]:>8.3g}" if t else f"{'-':>8}" for t in ts)
        sp = rows.get(cores[-1], {}).get("speedup")
        lk = (p.get("check") or {}).get("locks") or []
        lock = f"{lk[0]['site']}: {lk[0]['call']}" if lk else "-"
        err = f"  ({p['error']})" if p.get("error") else ""
        err += "  (cut short by the budget: the rows are in its campaign file)" if p.get("cut_short") else ""
        sp_text = f"{sp:8.2f}" if sp is not None else f"{'-':>8}"
        lines.append(f"{p['name']:<12} {p['kind']:<10} {cells}  {sp_text}  {lock}{err}")
    return "\n".join(lines) + "\n"


def tree_version() -> str | None:
    """The working tree's commit (with -dirty), where it is a git checkout and git is there."""
    try:
        return subprocess.run(["git", "-C", str(TREE), "describe", "--always", "--dirty"], capture_output=True,
                              text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_model() -> str:
    try:
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--quick", action="store_true", help="small inputs: scale 1, a small build (the kit's own test)")
    ap.add_argument("--scale", type=int, default=None,
                    help="work of the real programs x K (default: half the largest core count, at least 1)")
    ap.add_argument("--cores", default=None, help="core counts (default: 1,2,4,6,8,12,16 up to the CPUs)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--programs", default=None,
                    help="names from bench/real_programs.toml and extra_programs.toml (default: all)")
    ap.add_argument("--budget", type=float, default=BUDGET_S, help="seconds in all, set-up included")
    ap.add_argument("--started", type=float, default=None, help="when run.sh started (epoch seconds)")
    a = ap.parse_args(argv)
    started = a.started or time.time()
    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "campaigns").mkdir(exist_ok=True)
    ncpu = len(os.sched_getaffinity(0))
    cores = [int(c) for c in a.cores.split(",")] if a.cores else [c for c in CORE_COUNTS if c <= ncpu]
    py = python()
    env = environment(py)
    log(out, f"kit: {ncpu} CPUs, core counts {cores}, {a.reps} repetitions; Python {env['python']}")
    probed = probes()
    pin = probed["pinning"]
    log(out, f"kit: CPU affinity {'enforced' if pin['enforced'] else 'NOT enforced'} (two processes pinned to one "
             f"CPU used {pin['cpu_s']} s of CPU in {pin['wall_s']} s); per-thread schedstat "
             f"{'yes' if probed['schedstat'] else 'no'}, PSI {'yes' if probed['psi'] else 'no'}, "
             f"perf {'yes' if probed['perf'] else 'no'}")
    if not (TREE / "bench" / "real_programs.toml").is_file():
        raise SystemExit("kit: bench/real_programs.toml is missing from the tree")
    for f in env["fallbacks"]:
        log(out, f"kit: fallback: {f}")
    site = build(out)
    log(out, f"kit: corecast built with gcc into {site} ({time.time() - started:.0f} s)")
    scale = a.scale or (1 if a.quick else max(1, max(cores) // 2))
    work = out / "work"
    progs = load_programs()
    if a.programs:
        want = a.programs.split(",")
        unknown = sorted(set(want) - {p.name for p in progs})
        if unknown:
            raise SystemExit(f"kit: unknown programs {', '.join(unknown)}")
        progs = [p for p in progs if p.name in want]
    results = []
    for prog in progs:
        res: dict[str, Any] = {"name": prog.name, "kind": prog.kind, "known": prog.known}
        missing = prog.missing()
        if missing:
            res["skipped"] = f"not on this machine: {', '.join(missing)}"
        elif time.time() - started > a.budget - RESERVE_S:
            res["skipped"] = f"the time budget ({a.budget:.0f} s) was spent"
        else:
            db = out / "campaigns" / f"{prog.name}.db"
            for old in out.glob(f"campaigns/{prog.name}.db*"):
                old.unlink()
            res.update(campaign(py, site, prog, inputs(prog, work, scale, a.quick), cores, a.reps, db,
                                deadline=started + a.budget - CHECK_RESERVE_S))
            if db.exists():
                res["campaign"] = str(db.relative_to(out))
        log(out, f"kit: {prog.name}: " + (res.get("skipped") or f"{res.get('elapsed_s')} s, exit {res.get('exit_status')}"
                                          + (f" ({res['error']})" if res.get("error") else "")
                                          + (" (cut short by the budget)" if res.get("cut_short") else "")))
        results.append(res)
    # then, while the budget lasts, what corecast makes of each campaign (the campaigns first:
    # they are what cannot be had later; evaluate.py analyses them anywhere)
    for res in results:
        if res.get("campaign") and time.time() - started < a.budget:
            res["check"] = check(py, site, out / res["campaign"], cores)
    doc = {"machine": {"cpu": cpu_model(), "cpus": ncpu, "kernel": platform.release(), "host": platform.node()},
           "environment": env, "probes": probed, "cores": cores, "reps": a.reps, "quick": a.quick, "scale": scale, "budget_s": a.budget,
           "elapsed_s": time.time() - started, "programs": results,
           "tree": tree_version()}
    (out / "summary.json").write_text(json.dumps(doc, indent=1) + "\n")
    text = summary_text(doc)
    (out / "summary.txt").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
