"""Triggers (TOML) and the concurrency-advice policy.

    [advice]                 # optional: how allowed_workers follows the triggers
    policy = "halve"         # on HIGH: "halve" (toward min_workers) or "one" (one fewer); on LOW: one more
    min_workers = 1
    max_workers = 0          # 0: the scope's CPUs
    interval = "100ms"       # at most one change per interval (default: the window)

    [[trigger]]
    name = "cpu-saturated"   # optional; default METER@SCOPE
    meter = "cpu_busy"
    scope = "node"           # node, socket, core (each of them), socket1, core3, process, thread
    low = 0.5                # HIGH -> LOW when the window average stays below `low` ...
    high = 0.9               # LOW -> HIGH when it stays above `high` ...
    dwell = "200ms"          # ... for at least this long (default 0)
    command = "logger -t corecast \"$CORECAST_TRIGGER $CORECAST_STATE\""   # optional, run by /bin/sh
    log = true               # a log line at each change (default true)
    advise = true            # feeds allowed_workers of its scope (default true)

A trigger starts LOW and changes state only when the window average of its meter crosses the
other level and stays across it for `dwell` (hysteresis: between the levels nothing changes).
Every change is written to the blackboard (the trigger's record, and the futex word and the
subscribers' socket a runtime waits on), logged, and given to the command in its environment:
CORECAST_TRIGGER, CORECAST_METER, CORECAST_SCOPE, CORECAST_STATE (low|high),
CORECAST_PREVIOUS_STATE, CORECAST_VALUE, CORECAST_LOW, CORECAST_HIGH, CORECAST_BLACKBOARD,
CORECAST_TIME (Unix seconds).

A mistake in the file (TOML syntax, an unknown key, meter or scope, levels the wrong way round)
is one line naming the file and the trigger, and exit status 2.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..parsing import read_document, seconds
from .tree import Scope, Tree

TRIGGER_KEYS = {"name", "meter", "scope", "low", "high", "dwell", "command", "log", "advise"}
ADVICE_KEYS = {"policy", "min_workers", "max_workers", "interval"}
POLICIES = ("halve", "one")


def duration(text: Any, what: str) -> float:
    """Seconds >= 0 from 0.2, "200ms", "0.2s", "250us" (ValueError otherwise)."""
    return seconds(text, what, allow_zero=True)


@dataclass(frozen=True)
class TriggerDef:
    name: str
    meter: str
    scope: str            # as written
    low: float
    high: float
    dwell_s: float
    command: str | None
    log: bool
    advise: bool


@dataclass(frozen=True)
class Policy:
    policy: str = "halve"
    min_workers: int = 1
    max_workers: int = 0
    interval_s: float | None = None


@dataclass(frozen=True)
class Trigger:
    """A trigger at one scope (a `scope = "core"` trigger has one per core)."""

    definition: TriggerDef
    scope: Scope

    @property
    def name(self) -> str:
        return self.definition.name


def load(path: str | Path) -> tuple[list[TriggerDef], Policy]:
    return parse(read_document(path, "trigger file", "toml"), str(path))


def parse(doc: dict[str, Any], where: str) -> tuple[list[TriggerDef], Policy]:
    unknown = set(doc) - {"trigger", "advice"}
    if unknown:
        raise UserError(f"{where}: unknown table '{sorted(unknown)[0]}' (a trigger file has [[trigger]] and [advice])")
    policy = _policy(doc.get("advice", {}), where)
    items = doc.get("trigger", [])
    if not isinstance(items, list) or not all(isinstance(t, dict) for t in items):
        raise UserError(f"{where}: 'trigger' must be an array of tables ([[trigger]])")
    out: list[TriggerDef] = []
    names: set[tuple[str, str]] = set()
    for i, t in enumerate(items, 1):
        label = f"{where}: trigger {i}" + (f" ('{t['name']}')" if isinstance(t.get("name"), str) else "")
        bad = set(t) - TRIGGER_KEYS
        if bad:
            raise UserError(f"{label}: unknown key '{sorted(bad)[0]}' (keys: {', '.join(sorted(TRIGGER_KEYS))})")
        for k in ("meter", "low", "high"):
            if k not in t:
                raise UserError(f"{label}: '{k}' is missing")
        if not isinstance(t["meter"], str):
            raise UserError(f"{label}: 'meter' must be a name such as \"cpu_busy\"")
        low, high = _level(t["low"], "low", label), _level(t["high"], "high", label)
        if low > high:
            raise UserError(f"{label}: low ({low:g}) is above high ({high:g}); the state goes HIGH above high "
                            "and back LOW below low")
        try:
            dwell = duration(t.get("dwell", 0), "dwell")
        except ValueError as err:
            raise UserError(f"{label}: {err}") from None
        scope = t.get("scope", "node")
        if not isinstance(scope, str) or not scope:
            raise UserError(f"{label}: 'scope' must be a name such as \"node\" or \"core\"")
        name = t.get("name") or f"{t['meter']}@{scope}"
        if not isinstance(name, str) or len(name.encode()) >= 40 or not re.fullmatch(r"[\w.@:-]+", name):
            raise UserError(f"{label}: 'name' must be 1 to 39 letters, digits, '_', '-', '.', '@', ':'")
        if (name, scope) in names:
            raise UserError(f"{label}: a second trigger named '{name}' at scope '{scope}'")
        names.add((name, scope))
        cmd = t.get("command")
        if cmd is not None and (not isinstance(cmd, str) or not cmd.strip()):
            raise UserError(f"{label}: 'command' must be a shell command line")
        for k in ("log", "advise"):
            if not isinstance(t.get(k, True), bool):
                raise UserError(f"{label}: '{k}' must be true or false")
        out.append(TriggerDef(name, t["meter"], scope, low, high, dwell, cmd, t.get("log", True),
                              t.get("advise", True)))
    return out, policy


def _level(v: Any, what: str, label: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise UserError(f"{label}: '{what}' must be a number (got {v!r})")
    return float(v)


def _policy(d: Any, where: str) -> Policy:
    if not isinstance(d, dict):
        raise UserError(f"{where}: [advice] must be a table")
    bad = set(d) - ADVICE_KEYS
    if bad:
        raise UserError(f"{where}: [advice]: unknown key '{sorted(bad)[0]}' (keys: {', '.join(sorted(ADVICE_KEYS))})")
    pol = d.get("policy", "halve")
    if pol not in POLICIES:
        raise UserError(f"{where}: [advice]: policy '{pol}' is not one of {', '.join(POLICIES)}")
    mn, mx = d.get("min_workers", 1), d.get("max_workers", 0)
    for k, v, lo in (("min_workers", mn, 1), ("max_workers", mx, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise UserError(f"{where}: [advice]: {k} must be a whole number >= {lo}")
    if mx and mx < mn:
        raise UserError(f"{where}: [advice]: max_workers ({mx}) is below min_workers ({mn})")
    iv = None
    if "interval" in d:
        try:
            iv = duration(d["interval"], "interval")
        except ValueError as err:
            raise UserError(f"{where}: [advice]: {err}") from None
    return Policy(pol, mn, mx, iv)


def expand(defs: list[TriggerDef], tree: Tree, where: str) -> list[Trigger]:
    """Each definition at each scope it names."""
    out = []
    kinds = {"node", "socket", "core", "process", "thread"}
    for d in defs:
        if d.scope in kinds:
            scopes = tree.of_kind(d.scope)
        else:
            s = tree.named(d.scope)
            scopes = [s] if s else []
        if not scopes:
            known = sorted({s.kind for s in tree.scopes}) + [s.name for s in tree.scopes if s.kind in ("socket", "core")][:8]
            raise UserError(f"{where}: trigger '{d.name}': no scope '{d.scope}' here (scopes: {', '.join(known)}, ...)")
        out += [Trigger(d, s) for s in scopes]
    return out
