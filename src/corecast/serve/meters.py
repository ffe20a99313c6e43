"""The meters blackboard on the dashboard: the boards found in /dev/shm, and a live source that
polls one with the Python reader (`corecast.meters.Board`, no root needed).

Each poll is the document `corecast meters show --json` prints (`meters.exporter.to_json` of
a snapshot), cut in two so that a page watching for hours does not receive the board's
description (units, sources, trigger levels: fixed while its daemon runs) a thousand times:

    {"type": "header", "format": "corecast-meters", "desc": K, "description": D, "values": V}
    {"type": "meters", "desc": K, "values": V}

`join(D, V)` is the whole document again (the page does the same in meters.js); a new header
(K + 1) comes whenever the description changes -- a daemon that replaced a stale board of the
same name. Identical polls (a stale board, or a poll faster than the daemon ticks) are sent
once. A stale board is polled every second and reopened by name, so the page follows a
restarted daemon.
"""
from __future__ import annotations

import asyncio
import json
import logging
import math
import os
from pathlib import Path
from typing import Any, Callable

from ..errors import UserError

log = logging.getLogger("corecast.serve")

DEFAULT_PERIOD_S = 0.5       # how often the board is read for the page
STALE_PERIOD_S = 1.0         # a stale board: read (and reopened) this often
HISTORY_S = 600.0            # polls kept for pages that connect later: the last 10 minutes ...
HISTORY_MAX = 3000           # ... and at most this many

# the fields of a meters document that change from one snapshot to the next; everything else is
# the board's description
DYNAMIC: dict[str, tuple[str, ...]] = {
    "": ("state", "stale", "ticks", "late_ticks", "heartbeat_unix_s", "apps"),
    "meters": ("current", "avg", "min", "max", "total", "count", "t_ns", "tid"),
    "triggers": ("state", "value", "transitions", "ups", "downs", "since_ns"),
    "advice": ("allowed_workers", "high_triggers", "changes"),
}
LISTS = ("meters", "triggers", "advice")


def split(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(description, values) of a meters document; join(description, values) == doc."""
    top = DYNAMIC[""]
    desc = {k: v for k, v in doc.items() if k not in top and k not in LISTS}
    values = {k: doc[k] for k in top if k in doc}
    for name in LISTS:
        dyn = DYNAMIC[name]
        items = doc.get(name) or []
        desc[name] = [{k: v for k, v in it.items() if k not in dyn} for it in items]
        values[name] = [{k: it[k] for k in dyn if k in it} for it in items]
    return desc, values


def join(desc: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    doc = {**desc, **{k: v for k, v in values.items() if k not in LISTS}}
    for name in LISTS:
        doc[name] = [{**d, **v} for d, v in zip(desc.get(name) or [], values.get(name) or [])]
    return doc


def status() -> tuple[bool, str]:
    """Whether the blackboard can be read here: (available, why not)."""
    try:
        from ..meters import layout
        layout.lib()
    except (ImportError, OSError, UserError) as err:
        return False, f"the meters reader cannot be loaded: {err}"
    return True, ""


def default_name() -> str:
    from ..meters.board import default_name as dn
    return dn()


#: The names of /dev/shm the board list reads at most: anyone may make files there, and a list
#: that opened each of 100,000 planted names kept a worker for 2.6 s on every /api/state.
MAX_SHM_NAMES = 100_000


def boards(notes: list[str] | None = None) -> list[dict[str, Any]]:
    """The blackboards in /dev/shm (files starting with the layout's magic), each with its
    daemon's pid and why it is stale (None when live). Only a regular file of this user's or
    root's (`board.refusal`, from the directory entry's lstat) is opened: another user's file is
    never a board this user may trust, whatever its name. At most MAX_SHM_NAMES names are read;
    when there were more, `notes` gets a line saying so."""
    from ..meters import Board, layout
    from ..meters.board import SHM, read_head, refusal
    out: list[dict[str, Any]] = []
    found: list[str] = []
    try:
        with os.scandir(SHM) as it:
            for n, d in enumerate(it):
                if n >= MAX_SHM_NAMES:
                    if notes is not None:
                        notes.append(f"{SHM}: more than {MAX_SHM_NAMES:,} names: only the first "
                                     f"{MAX_SHM_NAMES:,} were looked at for blackboards")
                    break
                if not d.name.startswith("corecast-"):
                    continue
                try:
                    if refusal(Path(d.path), d.stat(follow_symlinks=False)):
                        continue        # not a file this user may trust (Board.open says why)
                except OSError:
                    continue
                found.append(d.name)
    except OSError:
        return out
    for p in (SHM / n for n in sorted(found)):
        try:                            # never follows a link, never waits on a FIFO
            if read_head(p, len(layout.MAGIC)) != layout.MAGIC:
                continue                # an application area, or something else
        except UserError:
            continue                    # changed since it was listed
        name = p.name[len("corecast-"):]
        try:
            with Board.open(name) as b:
                out.append({"name": name, "pid": b.pid, "stale": b.stale(), "meters": len(b.meters()),
                            "triggers": len(b.triggers())})
        except UserError as err:
            out.append({"name": name, "pid": None, "stale": str(err), "meters": 0, "triggers": 0})
    return out


def period(value: Any) -> float:
    if value in (None, ""):
        return DEFAULT_PERIOD_S
    try:
        p = float(value)
    except (TypeError, ValueError):
        raise UserError(f"period '{value}' is not a number of seconds") from None
    if not (math.isfinite(p) and 0.05 <= p <= 10):
        raise UserError(f"period {value}: give 0.05 to 10 seconds")
    return p


class MetersSource:
    """Polls blackboard `name` every `period_s` seconds (see the module's docstring for what it
    publishes); `board` is an open `corecast.meters.Board` (whose `open` is the reader's one-line
    UserError for a board that is not there)."""

    kind = "meters"

    def __init__(self, board: Any, period_s: float = DEFAULT_PERIOD_S):
        self.board = board
        self.name = board.name
        self.period_s = period_s
        self.history_lines = max(100, min(HISTORY_MAX, int(HISTORY_S / period_s)))
        self._stop = asyncio.Event()

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "label": f"meters {self.name}", "argv": None, "blackboard": self.name,
                "period_s": self.period_s}

    def _read(self) -> dict[str, Any]:
        from ..meters.exporter import to_json
        return to_json(self.board.snapshot())

    def _reopen(self) -> bool:
        """A live board under the same name, other than the one held: switch to it."""
        from ..meters import Board
        try:
            b = Board.open(self.name)
        except UserError:
            return False
        if b.stale() or (b.pid == self.board.pid and b.header.started_real_ns == self.board.header.started_real_ns):
            b.close()
            return False
        self.board.close()
        self.board = b
        log.info("meters %s: a new daemon (pid %d) writes the board", self.name, b.pid)
        return True

    async def run(self, publish: Callable[[str], None]) -> int | None:
        desc: dict[str, Any] | None = None
        k = 0
        last = ""
        said = ""
        try:
            while not self._stop.is_set():
                stale = None
                try:
                    doc = await asyncio.to_thread(self._read)
                except UserError as err:           # a record left in the middle of a write: the daemon died
                    if str(err) != said:
                        said = str(err)
                        log.warning("meters %s: %s", self.name, err)
                        publish(json.dumps({"type": "error", "message": str(err)}))
                    doc, stale = None, str(err)
                if doc is not None:
                    stale = doc["stale"]
                    d, v = split(doc)
                    if d != desc:
                        desc, k = d, k + 1
                        last = json.dumps({"type": "meters", "desc": k, "values": v}, allow_nan=False)
                        publish(json.dumps({"type": "header", "format": "corecast-meters", "desc": k,
                                            "description": d, "values": v}, allow_nan=False))
                    else:
                        line = json.dumps({"type": "meters", "desc": k, "values": v}, allow_nan=False)
                        if line != last:
                            last = line
                            publish(line)
                if stale and await asyncio.to_thread(self._reopen):
                    said = ""
                    continue
                try:
                    await asyncio.wait_for(self._stop.wait(), STALE_PERIOD_S if stale else self.period_s)
                except asyncio.TimeoutError:
                    pass
        finally:
            self.board.close()
        return 0

    async def stop(self) -> None:
        self._stop.set()
