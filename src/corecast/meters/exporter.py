"""`--listen`: the meters over HTTP, for Prometheus and for people.

    GET /metrics      the text exposition format (version 0.0.4)
    GET /meters.json  the whole board as JSON (null where a value is unavailable)
    GET /             a short index

Every answer is read from the blackboard with the same reader as any other program (a
snapshot, each record under its seqlock); no endpoint changes anything, and anything but GET
or HEAD is refused (405). The server listens on loopback unless told otherwise, answers only
requests whose Host is its own (421 otherwise), and runs in one thread with a bounded number
of connections (httpd.py).

Names follow Prometheus's conventions: base units in the name (`_seconds`, `_bytes`,
`_ratio`), `_total` on counters. Each meter's window statistics are one gauge family with
`scope`, `level` and `stat` (current, avg, min, max) labels; its cumulative count, where it has
one, is a counter family; `corecast_meter_info` says for every meter (the unavailable ones
too) its unit, quality and source. A value the daemon could not compute is left out, never
written as 0.
"""
from __future__ import annotations

import dataclasses
import errno
import json
import math
import os
import pwd
from pathlib import Path
from typing import Any, Callable

from ..errors import UserError
from .board import Snapshot
from .catalog import BY_NAME
from . import writer as W
from .httpd import Answer, Peer, Server

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _help(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n")


def _labels(d: dict[str, Any]) -> str:
    return "{" + ",".join(f'{k}="{_esc(str(v))}"' for k, v in d.items()) + "}"


def _val(v: float) -> str:
    return repr(float(v)) if math.isfinite(v) else ("+Inf" if v > 0 else "-Inf" if v < 0 else "NaN")


class _Families:
    def __init__(self) -> None:
        self.order: list[str] = []
        self.meta: dict[str, tuple[str, str]] = {}
        self.samples: dict[str, list[str]] = {}

    def add(self, name: str, kind: str, help_: str, labels: dict[str, Any], value: float | None) -> None:
        if name not in self.meta:
            self.order.append(name)
            self.meta[name] = (kind, help_)
            self.samples[name] = []
        if value is not None:
            self.samples[name].append(f"{name}{_labels(labels) if labels else ''} {_val(value)}")

    def text(self) -> str:
        out = []
        for n in self.order:
            kind, h = self.meta[n]
            out.append(f"# HELP {n} {_help(h)}")
            out.append(f"# TYPE {n} {kind}")
            out.extend(self.samples[n])
        return "\n".join(out) + "\n"


def exposition(snap: Snapshot) -> str:
    """The text exposition of a board's snapshot."""
    f = _Families()
    f.add("corecast_meters_up", "gauge", "1 while the daemon that writes the blackboard is live, 0 when stale",
          {"blackboard": snap.name}, 0.0 if snap.stale else 1.0)
    f.add("corecast_meters_ticks_total", "counter", "sampling ticks taken", {"blackboard": snap.name}, snap.ticks)
    f.add("corecast_meters_late_ticks_total", "counter", "ticks lost because the sampler was late by more than "
          "an interval", {"blackboard": snap.name}, snap.late_ticks)
    f.add("corecast_meters_interval_seconds", "gauge", "sampling interval", {}, snap.interval_s)
    f.add("corecast_meters_window_seconds", "gauge", "window of the avg, min and max statistics", {}, snap.window_s)
    f.add("corecast_meters_heartbeat_timestamp_seconds", "gauge", "Unix time of the last tick", {},
          snap.heartbeat_real_s)
    for m, _r in snap.meters:
        f.add("corecast_meter_info", "gauge", "every meter with its unit, quality (measured, derived or "
              "unavailable) and source or reason; value 1",
              {"meter": m.name, "scope": m.scope, "unit": m.unit, "quality": m.quality, "source": m.source}, 1.0)
    for m, r in snap.meters:
        d = BY_NAME.get(m.name)
        if d is None or m.quality == "unavailable":
            continue
        labels = {"scope": m.scope, "level": m.scope_kind}
        if m.scope_kind == "thread":
            labels["tid"] = r.aux
            if not r.aux:
                continue
        for stat in ("current", "avg", "min", "max"):
            f.add(d.prom, "gauge", f"{d.help} [{d.unit}], over the last tick (current) and the window",
                  {**labels, "stat": stat}, getattr(r, stat))
    for m, r in snap.meters:
        d = BY_NAME.get(m.name)
        if d is None or not m.has_total or not d.total_prom or (m.scope_kind == "thread" and not r.aux):
            continue
        labels = {"scope": m.scope, "level": m.scope_kind, **({"tid": r.aux} if m.scope_kind == "thread" else {})}
        f.add(d.total_prom, "counter", f"{d.help}: cumulative [{d.total_unit}] since the daemon started",
              labels, r.total)
    for t, s in snap.triggers:
        for state in ("low", "high"):
            f.add("corecast_trigger_state", "gauge", "trigger state: 1 for the state the trigger is in",
                  {"trigger": t.name, "meter": t.meter, "scope": t.scope, "state": state},
                  1.0 if s.state == state else 0.0)
    for t, s in snap.triggers:
        f.add("corecast_trigger_transitions_total", "counter", "trigger state changes",
              {"trigger": t.name, "scope": t.scope}, s.transitions)
    for a, s in snap.advice:
        f.add("corecast_allowed_workers", "gauge", f"concurrency advice: workers a runtime should run "
              f"(policy {a.policy}: on HIGH cut toward the minimum, on LOW add one)", {"scope": a.scope}, s.allowed)
    for app in snap.apps:
        f.add("corecast_app_value", "gauge", "a value a program published in the blackboard's application area",
              {"app": app.app, "pid": app.pid, "key": app.key}, app.value)
    return f.text()


def to_json(snap: Snapshot) -> dict[str, Any]:
    return {
        "blackboard": snap.name, "pid": snap.pid, "state": snap.state, "stale": snap.stale,
        "interval_s": snap.interval_s, "window_s": snap.window_s, "ticks": snap.ticks, "late_ticks": snap.late_ticks,
        "heartbeat_unix_s": snap.heartbeat_real_s, "started_unix_s": snap.started_real_s,
        "scopes": [{"name": s.name, "kind": s.kind, "parent": s.parent, "cpus": s.cpus} for s in snap.scopes],
        "meters": [{"name": m.name, "scope": m.scope, "level": m.scope_kind, "unit": m.unit, "kind": m.kind,
                    "quality": m.quality, "source": m.source,
                    **(r.to_dict() if m.quality != "unavailable" else {}),
                    **({"tid": r.aux} if m.scope_kind == "thread" else {}),
                    **({"total_unit": m.total_unit} if m.has_total else {})} for m, r in snap.meters],
        "triggers": [{"name": t.name, "meter": t.meter, "scope": t.scope, "low": t.low, "high": t.high,
                      "dwell_s": t.dwell_s, "actions": t.actions, "state": s.state, "value": s.value,
                      "transitions": s.transitions, "ups": s.ups, "downs": s.downs, "since_ns": s.since_ns}
                     for t, s in snap.triggers],
        "advice": [{"scope": a.scope, "allowed_workers": s.allowed, "min_workers": a.min_workers,
                    "max_workers": a.max_workers, "policy": a.policy, "interval_s": a.interval_s,
                    "high_triggers": s.high_triggers, "changes": s.changes} for a, s in snap.advice],
        "apps": [{"pid": a.pid, "app": a.app, "key": a.key, "value": a.value, "alive": a.alive} for a in snap.apps],
    }


INDEX = b"""<!doctype html><title>corecast meters</title>
<p>corecast meters: <a href="/metrics">/metrics</a> (Prometheus) and <a href="/meters.json">/meters.json</a>.
"""


class Exporter:
    """The endpoint: a bounded one-thread HTTP server (httpd.Server: a selector loop, idle
    connections closed, a foreign Host refused) answering from `snapshot()` (a board reader's)."""

    def __init__(self, host: str, port: int, snapshot: Callable[[], Snapshot], app_path: Path | None = None):
        self.snapshot = snapshot
        self.app_path = app_path
        try:
            self.httpd = Server(host, port, self.answer, name="corecast-meters", with_peer=True)
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise UserError(f"--listen {host}:{port}: the port is in use (give another, or 0 for any free "
                                "port)") from None
            raise UserError(f"--listen {host}:{port}: {err.strerror or err}") from None
        self.host, self.port = self.httpd.host, self.httpd.port

    def answer(self, path: str, peer: Peer | None = None) -> Answer:
        try:
            if path == "/metrics":
                return 200, CONTENT_TYPE, exposition(self.seen_by(peer)).encode()
            if path == "/meters.json":
                return 200, "application/json", json.dumps(to_json(self.seen_by(peer)), allow_nan=False,
                                                           default=str).encode()
            if path in ("/", "/index.html"):
                return 200, "text/html; charset=utf-8", INDEX
            return 404, "text/plain; charset=utf-8", b"not found: /metrics, /meters.json\n"
        except UserError as err:
            return 503, "text/plain; charset=utf-8", f"{err}\n".encode()

    def seen_by(self, peer: Peer | None) -> Snapshot:
        """The snapshot, its application slots left out unless the connecting user may read
        the application area's file (its mode guards seeing the slots as well as writing them:
        a group-only area is not shown to every local user; a connection from elsewhere sees
        them only where everyone may read the file)."""
        snap = self.snapshot()
        if not snap.apps or self.app_path is None or may_read(self.app_path, peer):
            return snap
        return dataclasses.replace(snap, apps=[])

    def start(self) -> None:
        self.httpd.start()

    def stop(self) -> None:
        self.httpd.stop()


def may_read(path: Path, peer: Peer | None) -> bool:
    """Whether the user of `peer`'s socket may read `path` by its mode (`writer.may_read`, the
    subscribers' rule: the user's primary and supplementary groups from the group database, as
    a TCP peer has no credentials of its own); anyone where others may read it."""
    try:
        st = os.stat(path)
    except OSError:
        return True                     # no area: nothing to hide
    if st.st_mode & 0o004:
        return True
    uid = peer.uid() if peer is not None else None
    if uid is None:
        return False
    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        return W.may_read(st, uid, -1, lambda: [])
    return W.may_read(st, uid, pw.pw_gid, lambda: os.getgrouplist(pw.pw_name, pw.pw_gid))
