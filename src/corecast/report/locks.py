"""Locks by name and call site: `corecast locks` (the campaign's per-lock table ranked by wait
share at each core count, as `perf lock contention` ranks one run), the tidy rows of its
`--format csv|records`, and the locks of `predict` (their measured share of thread time beside
the demand model's predicted share at each target count), for the terminal, HTML and the
dashboard alike.

A lock's *wait share* at a core count is the time its acquirers waited for it over the run's
thread time (threads × wall time), the median over the repetitions; its *hold share* the same
for the time it was held (acquisitions × mean hold). Plain Python over the Dataset's side table
`locks` (numpy only for the medians).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..dataset import Dataset
from ..errors import UserError
from .terminal import duration

TABLE = "locks"


def _threads(ds: Dataset, cores: float) -> float:
    tpc = float((ds.notes.get("campaign") or {}).get("threads_per_core") or 1)
    return max(1.0, cores * tpc)


def _run_times(ds: Dataset) -> dict[tuple[float, float | None], float]:
    t = ds.metrics.get("time_s")
    out: dict[tuple[float, float | None], float] = {}
    if t is None:
        return out
    for i in range(len(ds)):
        if np.isfinite(t[i]) and t[i] > 0:
            rep = None if ds.repetition is None else float(ds.repetition[i])
            out[(float(ds.cores[i]), rep)] = float(t[i])
    return out


def locks_doc(ds: Dataset, top: int | None = None) -> dict[str, Any]:
    """`corecast locks --json`: every (lock, call site) of the campaign with, per core count, its
    acquisitions, contended share, waits and holds (medians over the repetitions), ranked by
    its wait share at the largest core count, then its hold share."""
    rows = ds.tables.get(TABLE)
    if not rows:
        why = ("a campaign recorded without the sync shim (--no-shim), or by a corecast before per-lock tables"
               if ds.path and not str(ds.path).endswith((".csv", ".json")) else "a plain Dataset has none")
        acq = ds.metrics.get("lock_acquisitions")
        camp = ds.notes.get("campaign") or {}
        if camp.get("runs") and not camp.get("successful"):
            why = (f"none of its {camp['runs']} run(s) succeeded, so nothing was measured: "
                   "`corecast export` shows their exit statuses")
        elif acq is not None and np.isfinite(acq).any():
            why = "the shim saw no mutex, spin lock or rwlock acquired through pthreads"
        elif (acq is not None and (ds.notes.get("campaign") or {}).get("shim")
              and (ds.notes["campaign"].get("successful") or 0) > 0):
            why = ("the sync shim wrote no report for any successful run: it cannot see a static or "
                   "setuid program (the loader ignores LD_PRELOAD), so its locks are unknown, not absent")
        raise UserError(f"{ds.label}: no per-lock table ({why})")
    times = _run_times(ds)
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        key = (str(r.get("lock")), str(r.get("site")))
        g = groups.setdefault(key, {"lock": key[0], "site": key[1], "call": r.get("call"),
                                    "lock_kind": r.get("lock_kind"), "lock_file": r.get("lock_file"),
                                    "site_function": r.get("site_function"), "site_line": r.get("site_line"),
                                    "trylock": bool(r.get("trylock")), "instances": 0, "_runs": {}})
        g["instances"] = max(g["instances"], int(r.get("instances") or 1))
        c = float(r["cores"])
        rep = r.get("repetition")
        t = times.get((c, None if rep is None else float(rep)))
        if t is None:
            continue
        thread_time = _threads(ds, c) * t
        hold = r.get("hold_s")
        acq = float(r.get("acquisitions") or 0)
        g["_runs"].setdefault(c, []).append({
            "acquisitions": acq, "contended": float(r.get("contended") or 0),
            "trylock_failures": float(r.get("trylock_failures") or 0),
            "wait_s": float(r.get("wait_s") or 0.0), "max_wait_s": r.get("max_wait_s"),
            "hold_s": hold, "wait_share": float(r.get("wait_s") or 0.0) / thread_time,
            "hold_share": (acq * float(hold) / thread_time) if hold is not None else None})
    cores = sorted({c for g in groups.values() for c in g["_runs"]})
    out = []
    for g in groups.values():
        per = []
        for c in cores:
            runs = g["_runs"].get(c)
            if not runs:
                continue

            def med(k: str) -> float | None:
                v = [x[k] for x in runs if x[k] is not None]
                return float(np.median(v)) if v else None
            acq = med("acquisitions") or 0.0
            fails = med("trylock_failures") or 0.0
            # a trylock site waits in the program's own retries, which the shim does not time: its
            # contended share is that of its attempts that found the lock taken (it read 0.0%,
            # wait 0.0%, for a site spinning on a held lock)
            tried = acq + fails if g["trylock"] else acq
            busy = fails if g["trylock"] else (med("contended") or 0.0)
            per.append({"cores": _int(c), "runs": len(runs), "acquisitions": acq, "trylock_failures": fails,
                        "contended_pct": 100.0 * busy / tried if tried else None,
                        "wait_s": med("wait_s"), "max_wait_s": max((x["max_wait_s"] or 0.0) for x in runs),
                        "hold_s": med("hold_s"), "wait_share": med("wait_share"), "hold_share": med("hold_share")})
        g.pop("_runs")
        g["per_cores"] = per
        out.append(g)

    def rank_key(g: dict[str, Any]) -> tuple[float, float]:
        last = g["per_cores"][-1] if g["per_cores"] else {}
        return (-(last.get("wait_share") or 0.0), -(last.get("hold_share") or 0.0))

    out.sort(key=rank_key)
    for i, g in enumerate(out):
        g["rank"] = i + 1
    notes = _too_many_threads(out, cores, ds) + table_losses(ds)
    if any(g["trylock"] for g in out):
        notes.append("a trylock site's (try) contended share is that of its attempts that found the lock taken "
                     "(trylock_failures in --json); what it does then, retry or give up, is the program's, not "
                     "timed by the shim, so its wait share is 0")
    if top:
        out = out[:top]
    return {"file": ds.label, "cores": [_int(c) for c in cores],
            "threads": {str(_int(c)): _threads(ds, c) for c in cores}, "locks": out,
            "shares": "of thread time: (threads × wall time) per run, median over the repetitions", "notes": notes}


#: A lock's waits and holds over thread time above this: more threads than the campaign's
#: {threads} ran (at any moment a thread waits for a lock, holds it or neither, so they add up to
#: at most the thread time; the margin is for the sampled hold's error).
MOST_SHARE = 1.05


def _too_many_threads(groups: list[dict[str, Any]], cores: Sequence[float], ds: Dataset) -> list[str]:
    """The note for `corecast locks` where a lock's waits and holds (all its call sites) pass
    MOST_SHARE of the thread time at some count."""
    shares: dict[str, dict[float, float]] = {}
    for g in groups:
        for p in g["per_cores"]:
            d = shares.setdefault(g["lock"], {})
            d[p["cores"]] = d.get(p["cores"], 0.0) + (p["wait_share"] or 0.0) + (p["hold_share"] or 0.0)
    return _share_notes(shares, ds)


def _share_notes(shares: dict[str, dict[float, float]], ds: Dataset) -> list[str]:
    notes = []
    for c in sorted({c for d in shares.values() for c in d}):
        most, lock = max((d.get(c, 0.0), k) for k, d in shares.items())
        if most > MOST_SHARE:
            notes.append(f"at {_at(c)} {lock} was waited for and held {100 * most:.0f}% of the thread time "
                         f"of {_threads(ds, c):g} threads ({{threads}} = cores × --threads-per-core): the program "
                         "ran more threads than that, and its shares of thread time are too large")
    return notes


def _at(c: float) -> str:
    """'1 core', '2 cores': a count of cores in a note."""
    return f"{_int(c)} core" + ("" if c == 1 else "s")


def table_losses(ds: Dataset) -> list[str]:
    """Notes where the shim's per-thread tables missed acquisitions (`lock_table` in the
    Dataset's notes, from the runs' details): acquisitions that found no room in their thread's
    table (256 (lock, call site) entries) or in the busiest 200 rows a run keeps, and threads
    past its table limit, are in the run's
    totals but in no row, so the rows undercount -- said per core count, with the share of the
    run's acquisitions missed (median over the runs that missed some)."""
    losses = ds.notes.get("lock_table")
    if not isinstance(losses, list):
        return []
    in_rows: dict[tuple[float, float | None], float] = {}
    for r in ds.tables.get(TABLE, []):
        key = (float(r["cores"]), None if r.get("repetition") is None else float(r["repetition"]))
        in_rows[key] = in_rows.get(key, 0.0) + float(r.get("acquisitions") or 0)
    over: dict[float, list[tuple[float, float]]] = {}
    untracked: dict[float, list[float]] = {}
    for x in losses:
        if not isinstance(x, dict) or not isinstance(x.get("cores"), (int, float)):
            continue
        c, rep = float(x["cores"]), x.get("repetition")
        n = x.get("overflow")
        if isinstance(n, (int, float)) and n > 0:
            seen = in_rows.get((c, None if not isinstance(rep, (int, float)) else float(rep)), 0.0)
            over.setdefault(c, []).append((float(n), float(n) / (float(n) + seen)))
        u = x.get("untracked_threads")
        if isinstance(u, (int, float)) and u > 0:
            untracked.setdefault(c, []).append(float(u))
    notes = []
    for c in sorted(over):
        n = float(np.median([v[0] for v in over[c]]))
        share = float(np.median([v[1] for v in over[c]]))
        notes.append(f"at {_at(c)} {len(over[c])} run(s) had more (lock, call site) pairs than the "
                     "shim's per-thread table (256) or a run's rows (the busiest 200) hold: "
                     f"{n:,.0f} acquisitions a run ({100 * share:.0f}% of them) are in the run's totals but in "
                     "no row here, so these rows undercount the locks' acquisitions, waits and holds")
    for c in sorted(untracked):
        notes.append(f"at {_at(c)} {float(np.median(untracked[c])):,.0f} threads a run were past the shim's "
                     "table limit (16,384 tables): their locks are in no row here")
    return notes


def _int(c: float) -> float | int:
    return int(c) if float(c).is_integer() else float(c)


def locks_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """`locks --format csv|records`: one row per (lock, call site, core count)."""
    out = []
    for g in doc["locks"]:
        for p in g["per_cores"]:
            out.append({"rank": g["rank"], "lock": g["lock"], "site": g["site"], "call": g["call"],
                        "lock_kind": g["lock_kind"], "instances": g["instances"], **p})
    return out


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _count(v: float | None) -> str:
    """A count (a median over repetitions may be a half): whole, with thousands separators."""
    return "-" if v is None else f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}"


def render_terminal(doc: dict[str, Any], con: Any) -> None:
    from . import terminal as T

    cores = doc["cores"]
    con.print(f"{doc['file']}: {len(doc['locks'])} (lock, call site) pair{'' if len(doc['locks']) == 1 else 's'} "
              f"at {len(cores)} core count{'' if len(cores) == 1 else 's'}; "
              f"shares {doc['shares']}")
    last = cores[-1] if cores else None
    headers = ["rank", "lock", "call site"] + [f"wait @{c}" for c in cores] + [f"hold @{c}" for c in cores[-1:]] + [
        "hold/acq", f"acquisitions @{last}", "contended", "max wait"]
    rows = []
    for g in doc["locks"]:
        by = {p["cores"]: p for p in g["per_cores"]}
        lp = by.get(last, {})
        rows.append([g["rank"], _escape(g["lock"]) + (f" ×{g['instances']}" if g["instances"] > 1 else ""),
                     _escape(g["site"])]
                    + [_pct(by.get(c, {}).get("wait_share")) for c in cores]
                    + [_pct(lp.get("hold_share"))]
                    + [duration(lp.get("hold_s")), _count(lp.get("acquisitions")),
                       "-" if lp.get("contended_pct") is None else
                       f"{lp['contended_pct']:.1f}%" + (" (try)" if g.get("trylock") else ""),
                       duration(lp.get("max_wait_s"))])
    con.print(T.make_table("Locks by wait share (time waited / thread time)", headers, rows,
                           justify=["right", "left", "left"] + ["right"] * (len(headers) - 3)))
    for n in doc.get("notes", []):
        con.print(f"note: {_escape(n)}")


# ============================================================================ in predict
def predicted_locks(ds: Dataset, cores: Sequence[float], outlook: tuple[Any, list[dict[str, Any]]],
                    top: int = 5) -> dict[str, Any] | None:
    """The locks of `predict`: each hot lock with its call site, its measured share of thread
    time (wait + hold) at each measured count and the demand model's predicted share at each
    target count (`outlook`: the demands and model.mva.lock_outlook at those counts, from
    model.usecase.lock_outlook). None when no lock is hot."""
    dem, outlook = outlook
    if not dem.locks:
        return None
    measured = {(g["lock"]): g for g in _by_lock(ds)}
    out = []
    for o in outlook[:top]:
        m = measured.get(o["lock"], {})
        out.append({"lock": o["lock"], "call": o["call"], "site": o["site"], "label": o["label"],
                    "lock_file": o["lock_file"], "hold_s": o["hold_s"], "instances": o["instances"],
                    "measured": m.get("shares", []),
                    "predicted": [{"cores": _int(c), "share": s} for c, s in zip(cores, o["share"])]})
    notes = _share_notes({k: {p["cores"]: p["share"] for p in g.get("shares", [])} for k, g in measured.items()},
                         ds) + table_losses(ds)
    return {"locks": out, "source": f"demands of the {dem.runs} run(s) at {dem.cores:g} cores: "
                                    "the mva closed network (CPU cores, one server per hot lock, off-CPU delay)",
            "share": "of thread time, waiting for the lock or holding it", "notes": notes}


def _by_lock(ds: Dataset) -> list[dict[str, Any]]:
    """Measured share of thread time (wait + hold) per lock (all its sites) per core count."""
    times = _run_times(ds)
    acc: dict[str, dict[float, list[float]]] = {}
    per_run: dict[tuple[str, float, float | None], float] = {}
    for r in ds.tables.get(TABLE, []):
        c = float(r["cores"])
        rep = r.get("repetition")
        key = (str(r["lock"]), c, None if rep is None else float(rep))
        hold = r.get("hold_s")
        per_run[key] = per_run.get(key, 0.0) + float(r.get("wait_s") or 0.0) + (
            float(r.get("acquisitions") or 0) * float(hold) if hold is not None else 0.0)
    for (lock, c, rep), v in per_run.items():
        t = times.get((c, rep))
        if t:
            acc.setdefault(lock, {}).setdefault(c, []).append(v / (_threads(ds, c) * t))
    return [{"lock": k, "shares": [{"cores": _int(c), "share": float(np.median(v))} for c, v in sorted(d.items())]}
            for k, d in acc.items()]


def lock_lines(block: dict[str, Any]) -> list[str]:
    """One line a lock: `pool.c:41 worker: pthread_mutex_lock(&queue_lock): 12% of thread time at
    2 cores (measured), 31% at 16, 71% at 64 (predicted)`."""
    out = []
    for lk in block["locks"]:
        parts = [f"{100 * p['share']:.0f}% of thread time at {p['cores']} cores (measured)"
                 for p in lk["measured"][-1:]]
        pred = [f"{100 * p['share']:.0f}% at {p['cores']}" for p in lk["predicted"]]
        if pred:
            if not parts:
                pred[0] = pred[0].replace(" at ", " of thread time at ", 1)
            pred[-1] += " (predicted)"
        out.append(f"{lk['label']}: " + ", ".join(parts + pred))
    return out


def render_predicted(block: dict[str, Any] | None, con: Any) -> None:
    """predict's terminal: the locks, one line each, below the stall categories."""
    if not block:
        return
    con.print("Locks (share of thread time waiting for or holding each; predicted by the demand model):")
    for line in lock_lines(block):
        con.print(f"  {_escape(line)}")
    for n in block.get("notes", []):
        con.print(f"  note: {_escape(n)}")


def _escape(text: str) -> str:
    """What rich would read as markup, escaped (`&locks[3]` prints as it is)."""
    from .terminal import escape

    return escape(text)


def html_section(block: dict[str, Any] | None) -> str:
    if not block:
        return ""
    from . import html as H

    lk0 = block["locks"][0]
    headers = ["lock (call site)"] + [f"measured @{p['cores']}" for p in lk0["measured"][-1:]] + [
        f"@{p['cores']}" for p in lk0["predicted"]]
    rows = [[lk["label"]] + [_pct(p["share"]) for p in lk["measured"][-1:]] + [_pct(p["share"]) for p in lk["predicted"]]
            for lk in block["locks"]]
    return H.section("Locks", H.table(headers, rows), H.paragraph(
        f"Share {block['share']}; predicted from the {block['source']}."),
        *[H.paragraph(f"Note: {n}") for n in block.get("notes", [])])
