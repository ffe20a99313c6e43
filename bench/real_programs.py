"""Real programs through `corecast measure` -> `corecast predict`: one table.

For every program of bench/real_programs.toml (xz, zstd, pigz, sort, make, NumPy's BLAS, sysbench,
memcached under memcslap, the bundled workloads): a campaign at --cores (default 1,2) with
--reps repetitions, then `corecast predict --cores 4,8,16`; a row with what is known of its
scaling, the method `auto` chose, the predicted times at 4, 8 and 16 cores (interference-free
time at each measured count beside them), and the bottleneck verdict.

    python bench/real_programs.py                       # this machine, 1 and 2 cores
    python bench/real_programs.py --only xz,coord --reps 5
    python bench/real_programs.py --cores 1,2,4,8,16 --scale 8 --keep out/real  # a 16-core machine

--keep DIR keeps every campaign file (DIR/NAME.db) for `corecast predict`/`evaluate` later.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402
import realprog  # noqa: E402


def method_label(doc: dict) -> str:
    """What `auto` chose, in a few words."""
    chosen = doc.get("chosen") or [doc.get("method", "?")]
    if chosen == ["two-point"]:
        return "two-point stall model" if "stall model" in doc.get("model", "") else "two-point USL + corpus prior"
    return " + ".join(chosen)


def row(p: realprog.Program, vals: dict, cores: list[int], reps: int, targets: list[int], work: Path,
        keep: Path | None) -> list[str]:
    db = (keep or work) / f"{p.name}.db"
    for f in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        f.unlink(missing_ok=True)
    t0 = time.monotonic()
    r = realprog.campaign(p, vals, cores, reps, db, warmup=1)
    took = time.monotonic() - t0
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["?"])[-1]
        return [p.name, p.known, f"measure failed: {tail}", "", "", ""]
    try:
        doc = realprog.predict(db, targets)
    except RuntimeError as err:
        return [p.name, p.known, f"predict failed: {err}", "", "", ""]
    lost = doc.get("lost_core_time") or {}
    measured = ", ".join(f"{c['cores']}: {c['interference_free_wall_s']:.3g}" for c in lost.get("per_count", []))
    preds = ", ".join(f"{q['time_s']:.3g} [{q['low']:.3g}-{q['high']:.3g}]" for q in doc["predictions"])
    return [p.name, p.known, f"{method_label(doc)} ({took:.0f} s)", measured, preds, realprog.verdict(doc)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", default="1,2", help="core counts to measure (default 1,2)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--predict", default="4,8,16", help="core counts to predict (default 4,8,16)")
    ap.add_argument("--scale", type=int, default=1, help="multiply each program's work (8 for 16 cores)")
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--keep", type=Path, default=None, help="keep the campaign files in this folder")
    a = ap.parse_args()
    cores = [int(c) for c in a.cores.split(",")]
    targets = [int(c) for c in a.predict.split(",")]
    progs = realprog.load()
    names = [n for n in a.only.split(",") if n] or list(progs)
    unknown = [n for n in names if n not in progs]
    if unknown:
        ap.error(f"unknown program(s) {', '.join(unknown)} (known: {', '.join(progs)})")
    _machine.header(f"real programs through measure -> predict (bench/real_programs.py), cores {a.cores}, "
                    f"{a.reps} repetitions, scale {a.scale}")
    if a.keep:
        a.keep.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="corecast-realprog-"))
    rows = []
    try:
        for n in names:
            p = progs[n]
            if p.missing():
                rows.append([n, p.known, f"skipped: {', '.join(p.missing())} not installed", "", "", ""])
            else:
                rows.append(row(p, realprog.prepare(p, work, a.scale), cores, a.reps, targets, work, a.keep))
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    head = ["program", "known scaling", "auto chose", "measured s (interference-free)",
            f"predicted s at {a.predict} [80% band]", "bottleneck verdict"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(c.replace("|", "/") for c in r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
