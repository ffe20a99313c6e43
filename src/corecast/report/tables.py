"""Tidy tables of the commands' documents, for data frames: `--format csv` (a header, one line a
row: what `pandas.read_csv` loads as it is) and `--format records` (a JSON array of objects: what
`pandas.read_json` loads as it is). Each `*_rows` function says what one row is; docs/outputs.md
lists them by command. Plain Python (no numpy): `sim machines` and `events` stay light.
"""
from __future__ import annotations

import csv
import io
import json
from typing import Any


def table_text(rows: list[dict[str, Any]], fmt: str) -> str:
    """Rows (dicts with the same keys) as a tidy table: "csv" (a header, one line a row) or
    "records" (a JSON array of objects) -- what pandas.read_csv / read_json load as they are.
    Lists inside a cell (a point's flags) are joined with ';'."""
    keys: list[str] = []
    for r in rows:
        keys.extend(k for k in r if k not in keys)
    flat = [{k: (";".join(map(str, r[k])) if isinstance(r.get(k), list) else r.get(k)) for k in keys} for r in rows]
    if fmt == "records":
        return json.dumps(flat, indent=1, allow_nan=False) + "\n"
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
    w.writeheader()
    for r in flat:
        w.writerow({k: "" if v is None else v for k, v in r.items()})
    return buf.getvalue()


def usl_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """`usl --format csv|records`: one row per measured core count (kind "measured") and per
    core count of --predict (kind "predicted")."""
    out = [{"kind": "measured", **p} for p in doc["points"]]
    out += [{"kind": "predicted", **p} for p in doc.get("predictions", [])]
    return out


def predict_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """`predict --format csv|records`: one row per predicted core count."""
    return [dict(p, method=doc["method"], metric=doc["metric"]) for p in doc["predictions"]]


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested document as one flat row: {"mm1": {"utilization": u}} -> {"mm1_utilization": u}."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, f"{key}_"))
        else:
            out[key] = v
    return out


def sim_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """`sim --format csv|records`: one row per cache and per TLB (`type`), with the run's machine,
    cores, split and instructions; accesses and misses per access class as `accesses_load`..."""
    base = {"machine": doc["machine"]["name"], "cores": doc["cores"], "split": doc["split"],
            "instructions": doc["instructions"]}
    return ([{**base, "type": "cache", **flatten(c)} for c in doc["caches"]]
            + [{**base, "type": "tlb", **flatten(t)} for t in doc["tlbs"]])


def mrc_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """`sim mrc --format csv|records`: one row per curve (`scope`) and cache size."""
    rows = []
    for c in doc["curves"]:
        sizes = c["sizes_bytes"]
        per_size = {k: v for k, v in flatten(c).items() if isinstance(v, list) and len(v) == len(sizes)}
        once = {k: v for k, v in flatten(c).items() if not isinstance(v, list)}
        for i, size in enumerate(sizes):
            rows.append({"scope": c["scope"], "size_bytes": size, **{k: v[i] for k, v in per_size.items()
                                                                      if k != "sizes_bytes"},
                         **{k: v for k, v in once.items() if k != "scope"}, "line": doc["line"]})
    return rows


def evaluation_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """`evaluate FILE --format csv|records`: one row per method and held-out core count (a
    method that could not be evaluated: one row with its error)."""
    rows = []
    for m in doc["methods"]:
        head = {"method": m["method"], "model": m.get("model")}
        if not m.get("points"):
            rows.append({**head, "error": m.get("error")})
        rows.extend({**head, **p} for p in m.get("points") or [])
    return rows


def corpus_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """`evaluate --corpus --format csv|records`: one row per source and method."""
    return [{"source": s["source"], "series": s["series"], "method": m,
             "median_abs_pct_error": s["median_abs_pct_error"].get(m), "coverage": s["coverage"].get(m)}
            for s in doc["sources"] for m in doc["methods"]]


def throughput_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """`throughput --format csv|records`: one row per core count, its queueing models flattened
    (`mm1_utilization`, `mmc_queue_mean_waiting_time`, ...)."""
    return [flatten(r) for r in doc["cores"]]


def campaign_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """`measure --format csv|records`: one row per core count: runs, failures, median time and
    memory with their min and max, throughput, speedup and the median of every stall category."""
    rows = []
    for r in doc["summary"]:
        row: dict[str, Any] = {"cores": r["cores"], "runs": r["runs"], "failed": r["failed"]}
        for name in ("time_s", "rss_bytes"):
            med, lo, hi = r.get(name) or (None, None, None)
            row.update({name: med, f"{name}_min": lo, f"{name}_max": hi})
        row["throughput"] = r.get("throughput")
        row["speedup"] = r.get("speedup")
        row.update(r.get("stalls") or {})
        rows.append(row)
    return rows


def sched_sim_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """`sched sim --format csv|records`: one row per policy and application: the application's
    completion time, alone time, slowdown and speedup, with its policy's workload figures (ASP,
    unfairness, STP, ANTT, energy, EDP, time, migrations, decisions) beside them."""
    out = []
    for r in doc["results"]:
        base = {k: v for k, v in r.items() if k not in ("apps", "notes")}
        for app in r["apps"]:
            out.append({**base, "application": app["name"], **{k: v for k, v in app.items() if k != "name"}})
    return out


def chase_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """`chase --format csv|records`: one row per measured point (`mode`: concurrency, sizes or
    loaded), its figures as in the JSON document; a range [low, high] becomes two columns
    (`latency_range_ns` -> `latency_ns_low`, `latency_ns_high`)."""
    out = []
    for mode in ("concurrency", "sizes", "loaded"):
        for p in doc.get(mode, {}).get("points", []):
            row: dict[str, Any] = {"mode": mode}
            for k, v in p.items():
                if "_range" in k and isinstance(v, list) and len(v) == 2:
                    base = k.replace("_range", "")
                    row[f"{base}_low"], row[f"{base}_high"] = v
                else:
                    row[k] = v
            out.append(row)
    return out


def machines_rows(doc: Any) -> list[dict[str, Any]]:
    """`sim machines --format csv|records`: without a name one row per bundled machine (name,
    description); with one, one row per cache and TLB of it (`type`), as `sim machines NAME --json`
    lists them."""
    if isinstance(doc, list):
        return [dict(m) for m in doc]
    out = [{"machine": doc["name"], "type": "cache", **c} for c in doc.get("caches", [])]
    out += [{"machine": doc["name"], "type": "tlb", **t} for t in doc.get("tlbs", [])]
    return out


def meters_list_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """`meters list --format csv|records`: one row per meter and scope: meter, scope, unit, status
    (measured, derived or unavailable) and source (or why it is unavailable)."""
    return [dict(m) for m in doc["meters"]]
