"""The old forms of a machine description, read as the schema (schema.py; docs/machines.md).

Before one schema there were three, and a user may have files in any of them:

- `target`: predict's targets, flat keys (`sockets`, `cores_per_socket`, `threads_per_core`,
  `numa_nodes`, `ghz`, `memory_bandwidth_gbs_per_socket`, `chase_profile`);
- `sim`: sim's machines (`frequency_hz`, `cores`, `[penalties]` in cycles beside the
  `[[cache]]`, `[[tlb]]`, `[branch]` and `[pipeline]` tables the schema kept);
- `calibrate`: the JSON `corecast calibrate` wrote first (`"kind": "corecast-target"`).

(sched's machines, `[[core_type]]` tables, are the schema as they were.) `form_of` tells which
form a parsed file is in; `upgrade` rewrites it as the schema's tables, checking what only the
old form can name (its keys and penalties), so that a mistake names the key the user wrote.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from ..errors import UserError

FORMS = {"target": "a predict target", "sim": "a sim machine", "calibrate": "a calibration file"}

TARGET_KEYS = {"name", "description", "model", "sockets", "cores_per_socket", "threads_per_core", "numa_nodes",
               "ghz", "memory_bandwidth_gbs_per_socket", "source", "notes", "chase_profile"}
SIM_KEYS = {"name", "frequency_hz", "cores", "description", "source", "penalties", "pipeline", "cache", "tlb",
            "branch"}
PENALTY_KEYS = ("l2_hit", "l3_hit", "dram", "itlb_miss", "dtlb_miss", "stlb_hit", "branch_mispredict",
                "misaligned_load", "coherence_miss")
_TARGET_ONLY = {"sockets", "cores_per_socket", "threads_per_core", "numa_nodes", "ghz",
                "memory_bandwidth_gbs_per_socket", "chase_profile"}
_SIM_ONLY = {"frequency_hz", "cores", "penalties"}


def form_of(data: Mapping[str, Any]) -> str:
    """"target", "sim" or "calibrate" for an old form; "" for the schema."""
    if data.get("kind") == "corecast-target":
        return "calibrate"
    if "topology" in data or "clock" in data:
        return ""
    if _TARGET_ONLY & set(data):
        return "target"
    if _SIM_ONLY & set(data):
        return "sim"
    return ""


def hint(form: str) -> str:
    """What the new form says instead, in a few words."""
    return {"target": "[topology] sockets, cores_per_socket, threads_per_core, numa_nodes; [clock] frequency = "
                      "\"2.4GHz\"; [memory] bandwidth_gbs_per_socket, profile",
            "sim": "[clock] frequency = \"2.5GHz\"; a cache's latency_cycles, [memory] latency_cycles, "
                   "[costs]; [sim] cores",
            "calibrate": "`corecast calibrate` writes \"kind\": \"corecast-machine\" now"}[form]


def upgrade(data: Mapping[str, Any], form: str, where: str) -> dict[str, Any]:
    """The schema's tables for a file in an old form."""
    return {"target": _target, "sim": _sim, "calibrate": _calibrate}[form](data, where)


def _keys(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(sorted(allowed))})")


def _hz_of_ghz(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise UserError(f"{where}: ghz must be a positive number (got {v!r})")
    return float(round(v * 1e9))


def _target(d: Mapping[str, Any], where: str) -> dict[str, Any]:
    _keys(d, TARGET_KEYS, where)
    for k in ("sockets", "cores_per_socket"):
        if k not in d:
            raise UserError(f"{where}: '{k}' is missing")
    out: dict[str, Any] = {k: d[k] for k in ("name", "description", "model", "source", "notes") if k in d}
    out["topology"] = {k: d[k] for k in ("sockets", "cores_per_socket", "threads_per_core", "numa_nodes") if k in d}
    if d.get("ghz") is not None:
        out["clock"] = {"frequency": _hz_of_ghz(d["ghz"], where)}
    mem = {}
    if "memory_bandwidth_gbs_per_socket" in d:
        v = d["memory_bandwidth_gbs_per_socket"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise UserError(f"{where}: memory_bandwidth_gbs_per_socket must be a positive number (got {v!r})")
        mem["bandwidth_gbs_per_socket"] = v
    if "chase_profile" in d:
        if not isinstance(d["chase_profile"], str) or not d["chase_profile"]:
            raise UserError(f"{where}: chase_profile must name a file")
        mem["profile"] = d["chase_profile"]
    if mem:
        out["memory"] = mem
    return out


def _sim(d: Mapping[str, Any], where: str) -> dict[str, Any]:
    for k in d:
        if k not in SIM_KEYS:
            raise UserError(f"{where}: {k}: unknown key (known: {', '.join(sorted(SIM_KEYS))})")
    if "frequency_hz" not in d:
        raise UserError(f"{where}: frequency_hz: missing")
    out: dict[str, Any] = {k: d[k] for k in ("name", "description", "source", "pipeline", "branch", "tlb") if k in d}
    f = d["frequency_hz"]
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f) or f <= 0:
        raise UserError(f"{where}: frequency_hz: {f!r} must be a positive number")
    out["clock"] = {"frequency": f}
    if "cores" in d:
        out["sim"] = {"cores": d["cores"]}
    caches = d.get("cache", [])
    if not isinstance(caches, list):
        raise UserError(f"{where}: cache: must be an array of tables ([[...]])")
    caches = [dict(c) if isinstance(c, Mapping) else c for c in caches]
    pens = d.get("penalties", {})
    if not isinstance(pens, Mapping):
        raise UserError(f"{where}: penalties: must be a table")
    costs: dict[str, Any] = {}
    for k, v in pens.items():
        if k not in PENALTY_KEYS:
            raise UserError(f"{where}: penalties.{k}: unknown key (known: {', '.join(sorted(PENALTY_KEYS))})")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise UserError(f"{where}: penalties.{k}: {v!r} is not a number")
        if v < 0:
            raise UserError(f"{where}: penalties.{k}: {v} must not be negative")
        if k in ("l2_hit", "l3_hit"):
            level = int(k[1])
            at = [c for c in caches if isinstance(c, dict) and c.get("level") == level]
            if not at:
                raise UserError(f"{where}: penalties.{k}: the machine has no level-{level} cache (the new form "
                                "gives a cache's latency_cycles in its [[cache]] table)")
            for c in at:
                c["latency_cycles"] = v
        elif k == "dram":
            out["memory"] = {"latency_cycles": v}
        else:
            costs[k] = v
    if caches:
        out["cache"] = caches
    if costs:
        out["costs"] = costs
    return out


def _calibrate(doc: Mapping[str, Any], where: str) -> dict[str, Any]:
    m = doc.get("machine") or {}
    try:
        model = str(m.get("model", ""))
        out: dict[str, Any] = {
            "name": model, "model": model,
            "topology": {"sockets": _whole(m["sockets"]), "cores_per_socket": _whole(m["cores_per_socket"]),
                         "threads_per_core": _whole(m.get("threads_per_core") or 1)}}
        if m.get("numa_nodes"):
            out["topology"]["numa_nodes"] = _whole(m["numa_nodes"])
        if m.get("ghz"):
            out["clock"] = {"frequency": float(round(float(m["ghz"]) * 1e9))}
    except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as err:
        raise UserError(f"{where}: calibration file without a usable machine block ({err})") from None
    if doc.get("memory") is not None:
        out["memory"] = {"profile": doc["memory"]}
    if doc.get("core_to_core_ns") is not None:
        out["costs"] = {"core_to_core_ns": doc["core_to_core_ns"]}
    out["provenance"] = {k: doc[k] for k in ("elapsed_s", "created", "corecast_version", "warnings", "host")
                         if k in doc}
    return out


def _whole(v: Any) -> int:
    """int() as the first calibrate reader took counts (1e9 from JSON is a whole number)."""
    if isinstance(v, bool):
        raise TypeError(f"{v!r} is not a count")
    return int(v)
