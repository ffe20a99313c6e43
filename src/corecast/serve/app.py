"""The dashboard's web application (aiohttp): the page, its static files, and a JSON API whose
documents are the ones the commands print with --json (report.documents, collect.catalogue,
the `stat` command's own JSON lines).

Safety (docs/serve.md): the server reads files and never writes them, and it obeys its owner
only (guard.py: the secret of the address it prints, kept in a cookie; its own Host; the
page's token on every POST). Starting a `stat` of a command from the page is allowed on a
loopback address only, unless the server was started with --allow-commands.

Each handler imports the collectors, models and documents it calls, for start-up time: the
server answers its first page before numpy, scipy or the perf layer are loaded.
"""
from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
import logging
import math
import shlex
import time
from pathlib import Path
from typing import Any, Callable

from aiohttp import web
from aiohttp_sse import sse_response

from .. import __version__
from ..errors import UserError
from ..parsing import finite, json_document
from . import files as F
from . import live as L
from . import meters as M
from .guard import QUERY, Guard

log = logging.getLogger("corecast.serve")
STATIC = Path(__file__).resolve().parent / "static"
#: The page runs only its own scripts (no inline script, no eval, nothing from elsewhere): a text
#: from a served file that ever reached the page as HTML still could not run, and so could not
#: read the POST token from the page's <meta> and start a command. Plotly sets styles inline and
#: draws images from data: and blob: URLs.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
WATCH_PERIOD_S = 0.5         # how often a watched campaign file is looked at
REPLAY_LIMIT = 200_000       # sample lines in one replay window
GRID_POINTS = 48             # points of a prediction curve


def plotly_js() -> Path:
    """plotly.min.js as the installed `plotly` package ships it."""
    import plotly
    p = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
    if not p.is_file():
        raise UserError(f"the plotly package has no {p.name} (reinstall plotly)")
    return p


def is_loopback(host: str) -> bool:
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Dashboard:
    def __init__(self, files: list[str], host: str, port: int, allow_commands: bool = False):
        self.registry = F.Registry(files)
        self.host, self.port = host, port
        self.guard = Guard(self)
        self.sessions: dict[str, L.Session] = {}
        self.loopback = is_loopback(host)
        self.allow_commands = allow_commands or self.loopback
        self._catalogue: dict[str, Any] | None = None
        self._traces: dict[str, F.Trace] = {}
        self._next = 0

    @property
    def token(self) -> str:
        """The page's token (its POSTs carry it); the owner's secret is `guard.secret`."""
        return self.guard.token

    def url(self, shown_host: str | None = None) -> str:
        return self.guard.url(shown_host)

    # ------------------------------------------------------------------ app
    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.guard.middleware], client_max_size=1 << 20)
        r = app.router
        r.add_get("/", self.index)
        r.add_get("/static/plotly.min.js", self.plotly)
        r.add_static("/static/", STATIC, show_index=False)
        r.add_get("/api/state", self.api(self.state))
        r.add_get("/api/catalogue", self.api(self.catalogue))
        r.add_get("/api/registry", self.api(self.names))
        r.add_get("/api/campaign", self.api(self.campaign))
        r.add_get("/api/dataset", self.api(self.dataset))
        r.add_get("/api/predict", self.api(self.predict))
        r.add_get("/api/usl", self.api(self.usl))
        r.add_get("/api/replay", self.api(self.replay))
        r.add_get("/api/watch", self.watch)
        r.add_post("/api/stat", self.api(self.start_stat))
        r.add_post("/api/meters", self.api(self.start_meters))
        r.add_post("/api/sessions/{sid}/stop", self.api(self.stop_session))
        r.add_get("/api/sessions/{sid}/stream", self.stream)
        app.on_shutdown.append(self._shutdown)
        return app

    def api(self, fn: Callable[[web.Request], Any]) -> Callable[[web.Request], Any]:
        """A JSON endpoint: a UserError is a 400 with its one line; anything else (a bug) is a
        500, one line in the server log and one on the page."""
        @functools.wraps(fn)
        async def handler(request: web.Request) -> web.StreamResponse:
            try:
                doc = await fn(request)
            except UserError as err:
                log.warning("%s %s: %s", request.method, _shown(request), err)
                return web.json_response({"error": str(err)}, status=400)
            except web.HTTPException:
                raise
            except Exception as err:
                log.error("%s %s: internal error: %s: %s", request.method, request.path, type(err).__name__, err)
                return web.json_response(
                    {"error": f"internal error: {type(err).__name__}: {err} (a bug in corecast)"}, status=500)
            if isinstance(doc, web.StreamResponse):
                return doc
            return web.Response(text=json.dumps(doc, allow_nan=False, default=_jsonable),
                                content_type="application/json")
        return handler

    async def _shutdown(self, app: web.Application) -> None:
        for s in list(self.sessions.values()):
            await s.stop()

    # ------------------------------------------------------------------ page
    async def index(self, request: web.Request) -> web.Response:
        html = (STATIC / "index.html").read_text(encoding="utf-8")
        html = html.replace("{{token}}", self.guard.token).replace("{{version}}", __version__)
        return web.Response(text=html, content_type="text/html", headers={"Cache-Control": "no-store",
                                                                         "Content-Security-Policy": CSP})

    async def plotly(self, request: web.Request) -> web.FileResponse:
        return web.FileResponse(plotly_js(), headers={"Cache-Control": "max-age=86400"})

    async def state(self, request: web.Request) -> dict[str, Any]:
        ok, why = M.status()
        shm_notes: list[str] = []
        boards = await asyncio.to_thread(M.boards, shm_notes) if ok else []
        files = await self.registry.alist()      # scanned in a worker thread, never on the loop
        return {"version": __version__, "files": files, "left_out": [*self.registry.notes, *shm_notes],
                "sessions": [s.describe() for s in self.sessions.values()],
                "commands": {"allowed": self.allow_commands,
                             "reason": "" if self.allow_commands else
                             f"the server listens on {self.host}, not a loopback address: starting commands "
                             "from the page is off (start it with --allow-commands to allow it)"},
                "meters": {"available": ok, "reason": why, "default": M.default_name(), "boards": boards,
                           "period_s": M.DEFAULT_PERIOD_S},
                "machines": _bundled_machines()}

    async def names(self, request: web.Request) -> dict[str, Any]:
        """The names the page offers, from corecast's registries: the prediction methods
        (--method), the scheduling policies, the meters."""
        return _registry_names()

    async def catalogue(self, request: web.Request) -> dict[str, Any]:
        if self._catalogue is None:
            from ..collect.catalogue import catalogue
            doc = await asyncio.to_thread(catalogue)
            doc["virtual"] = _virtual_counters()
            self._catalogue = doc
        return self._catalogue

    # ------------------------------------------------------------------ datasets and campaigns
    async def _load(self, fid: str) -> tuple[F.Entry, Any]:
        from .. import dataset as ds_mod
        e = await self.registry.aget(fid, ("campaign", "dataset"))
        data = await asyncio.to_thread(ds_mod.load, e.path)
        return e, data

    async def campaign(self, request: web.Request) -> dict[str, Any]:
        """`corecast measure --json` (the summary per core count), `info --json` and the runs
        as `export --format json` writes them."""
        from ..report import documents as D
        e, data = await self._load(_arg(request, "file"))

        def build() -> dict[str, Any]:
            return {"file": e.describe(), "measure": D.campaign_summary(data, str(e.path)),
                    "info": D.dataset_summary(data), "dataset": json.loads(data.to_json())}
        return await asyncio.to_thread(build)

    async def dataset(self, request: web.Request) -> dict[str, Any]:
        from ..report import documents as D
        e, data = await self._load(_arg(request, "file"))
        return {"file": e.describe(), "info": D.dataset_summary(data), "dataset": json.loads(data.to_json())}

    async def predict(self, request: web.Request) -> dict[str, Any]:
        """`corecast predict FILE --json` with the options given; `curve`: the same document
        over a grid of core counts (the fitted predictor evaluated, not fitted again; for another
        machine, over whole thread counts). `target_machine` and
        `measured_machine` are a bundled name or the inline form (sockets=2,cores=32,smt=2,
        cpus=64), as `--target-machine` takes them; the page reads no file path."""
        from ..report import documents as D
        from ..model import usecase
        q = request.query
        cores = _cores(q.get("cores", ""))
        level = _level(q.get("level", "0.8"))
        # the options of `corecast predict`, validated once, before the file is read
        opts = usecase.PredictOptions(method=q.get("method", "auto"), kernels=q.get("kernels") or None,
                                      checkpoints=_opt_int(q, "checkpoints"), refit=q.get("refit") == "1",
                                      size=_opt_float(q, "size"), freq_ratio=_opt_float(q, "freq_ratio") or 1.0,
                                      size_ratio=_opt_float(q, "size_ratio"),
                                      target_size=_opt_float(q, "target_size"), clock=_opt_float(q, "clock"),
                                      stalls=q.get("stalls") or None)
        target = _target(q)
        e, data = await self._load(_arg(request, "file"))

        def build() -> dict[str, Any]:
            result = usecase.predict(data, opts, target)
            doc = D.predict_doc(result, str(e.path), cores, level)
            lo = float(min(data.cores.min(), min(cores)))
            hi = float(max(data.cores.max(), max(cores)))
            grid = sorted({round(lo + (hi - lo) * i / (GRID_POINTS - 1), 6) for i in range(GRID_POINTS)}
                          | set(cores) | {float(c) for c in data.distinct_cores})
            if target is not None:             # a machine runs whole threads
                grid = sorted({max(1, round(c)) for c in grid})
            try:                               # the fitted predictor evaluated over the grid, not fitted again
                curve = D.predict_doc(result, str(e.path), grid, level)
            except Exception as err:           # the table stands without the curve
                log.warning("prediction curve of %s: %s", e.path, err)
                curve = None
            return {"file": e.describe(), "doc": doc, "curve": curve, "dataset": json.loads(data.to_json())}
        return await asyncio.to_thread(build)

    async def usl(self, request: web.Request) -> dict[str, Any]:
        """`corecast usl FILE --json` (with --metric, --level, --predict); `curve`: the fitted
        law and its band over a grid (the same analysis)."""
        from ..model import usl
        from ..report import documents as D
        q = request.query
        level = _level(q.get("level", "0.95"))
        at = _cores(q["predict"]) if q.get("predict") else None
        e, data = await self._load(_arg(request, "file"))

        def build() -> dict[str, Any]:
            analysis = usl.analyze_dataset(data, metric=q.get("metric") or None, level=level)
            doc = D.usl_doc(analysis, str(e.path), predict_at=at)
            top = max([p["cores"] for p in doc["points"]] + list(at or []))
            right = top * 1.6
            if doc.get("n_max") and math.isfinite(doc["n_max"]):
                right = max(right, min(1.3 * doc["n_max"], 6 * top))
            grid = [1.0 + (right - 1.0) * i / 99 for i in range(100)]
            curve = analysis.to_dict(predict_at=grid)["predictions"]
            return {"file": e.describe(), "doc": doc, "curve": curve}
        return await asyncio.to_thread(build)

    async def watch(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: `changed` each time the file (or its write-ahead log) changes."""
        try:
            e = await self.registry.aget(_arg(request, "file"))
        except UserError as err:
            return web.json_response({"error": str(err)}, status=400)
        try:
            async with sse_response(request) as resp:
                sig = e.signature()
                await resp.send(json.dumps({"signature": repr(sig)}), event="hello")
                while resp.is_connected():
                    await asyncio.sleep(WATCH_PERIOD_S)
                    now = e.signature()
                    if now != sig:
                        sig = now
                        await resp.send(json.dumps({"signature": repr(sig), "at": time.time()}), event="changed")
        except ConnectionError:              # the page went away (aiohttp's ClientConnectionResetError)
            log.info("watch of %s: the page went away", e.path.name)
            return web.Response(status=204)
        return resp

    # ------------------------------------------------------------------ replay
    async def replay(self, request: web.Request) -> web.Response:
        """A recorded stat trace: its header, summary and the sample lines between `from` and
        `to` seconds, exactly as the command wrote them. A meters recording: `meters replay
        --json` and the rows as `export --format json` writes them."""
        e = await self.registry.aget(_arg(request, "file"), ("stat-trace", "meters-recording"))
        if e.kind == "meters-recording":
            return await self._replay_meters(e)
        t = self._traces.get(e.id)
        if t is None or t.signature != e.signature():
            t = await asyncio.to_thread(F.read_trace, e.path, "corecast-stat")
            self._traces[e.id] = t
        start = _opt_float(request.query, "from")
        end = _opt_float(request.query, "to")
        lines, cut = t.window(-math.inf if start is None else start, math.inf if end is None else end,
                              REPLAY_LIMIT)
        t0 = t.times[0] if t.times else 0.0
        t1 = t.times[-1] if t.times else 0.0
        info = json.dumps({"file": e.describe(), "kind": e.kind, "start_s": t0, "end_s": t1,
                           "samples_total": len(t.lines), "cut": cut, "notes": t.notes})
        text = (f'{{"info": {info}, "header": {t.header}, "summary": {t.summary or "null"}, '
                f'"regions": {t.regions or "null"}, "samples": [{",".join(lines)}]}}')
        return web.Response(text=text, content_type="application/json")

    async def _replay_meters(self, e: F.Entry) -> dict[str, Any]:
        from ..meters import record
        from ..report import meters as RM

        def build() -> dict[str, Any]:
            rec = record.read(e.path)
            t = [float(x) for x in rec.elapsed_s if math.isfinite(x)]
            return {"info": {"file": e.describe(), "kind": e.kind, "start_s": min(t, default=0.0),
                             "end_s": max(t, default=0.0), "samples_total": len(rec.dataset), "cut": False,
                             "notes": []},
                    "replay": RM.replay_doc(rec), "dataset": json.loads(rec.dataset.to_json())}
        return await asyncio.to_thread(build)

    # ------------------------------------------------------------------ live
    def _add(self, source: L.LiveSource) -> L.Session:
        self._next += 1
        s = L.Session(f"s{self._next}", source)
        self.sessions[s.id] = s
        s.start()
        log.info("live session %s started: %s", s.id, source.describe().get("label"))
        return s

    async def start_stat(self, request: web.Request) -> dict[str, Any]:
        body = await _body(request)
        events = _names(body, "events")
        virtual = _names(body, "virtual")
        metrics = _names(body, "metrics")
        interval = _seconds(body, "interval", 1.0)
        duration = _seconds(body, "duration", None)
        per_cpu = bool(body.get("per_cpu"))
        pid = body.get("pid")
        command = body.get("command") or ""
        if not isinstance(command, str) and not (isinstance(command, list)
                                                 and all(isinstance(a, str) for a in command)):
            raise UserError("command: a command line, or a list of its arguments")
        if pid not in (None, ""):
            try:
                if isinstance(pid, (bool, float)):
                    raise ValueError
                pid = int(pid)
            except (TypeError, ValueError):
                raise UserError(f"pid '{pid}' is not a process id") from None
            if pid <= 0:
                raise UserError(f"pid '{pid}' is not a process id")
        else:
            pid = None
        argv_cmd: list[str] = []
        if command:
            if not self.allow_commands:
                raise UserError("starting commands from the page is off on this server (--allow-commands)")
            try:
                argv_cmd = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
            except ValueError as err:
                raise UserError(f"command: {err}") from None
            if argv_cmd:
                # as `measure` does: PATH, then corecast's bundled workloads (corecast-lockbench, ...)
                from ..collect.runner import find_program
                import os
                found = find_program(argv_cmd[0], os.environ, os.getcwd())
                if found:
                    argv_cmd[0] = found
        if not events and not virtual:
            raise UserError("choose at least one event or virtual counter")
        # event specs are checked here, so that a typo is answered at once next to the form
        # (the rest -- virtual counters, metrics, the target -- by the stat command itself)
        from ..collect.events import resolve
        for spec in events:
            await asyncio.to_thread(resolve, spec)
        if argv_cmd and pid is not None:
            raise UserError("give either a command or a pid, not both")
        if not argv_cmd and pid is None and not per_cpu:
            raise UserError("nothing to monitor: give a command, a pid, or per CPU")
        argv = L.stat_argv(events=events, virtual=virtual, metrics=metrics, interval=interval,
                           per_cpu=per_cpu, pid=pid, command=argv_cmd, duration=duration)
        label = " ".join(shlex.quote(a) for a in argv_cmd) if argv_cmd else (f"pid {pid}" if pid else "all CPUs")
        s = self._add(L.StatSource(argv, label=label))
        return s.describe()

    async def start_meters(self, request: web.Request) -> dict[str, Any]:
        """Watch blackboard `blackboard` (default: $CORECAST_METERS, else "default") every
        `period` seconds. A board that is not there is the reader's one line."""
        ok, why = M.status()
        if not ok:
            raise UserError(why)
        body = await _body(request)
        name = str(body.get("blackboard") or "").strip() or None
        period = M.period(body.get("period"))
        from ..meters import Board
        board = await asyncio.to_thread(Board.open, name)
        s = self._add(M.MetersSource(board, period))
        return s.describe()

    async def stop_session(self, request: web.Request) -> dict[str, Any]:
        s = self.sessions.get(request.match_info["sid"])
        if s is None:
            raise UserError(f"no live session '{request.match_info['sid']}'")
        await s.stop()
        return s.describe()

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: `lines` events whose data is a JSON array of the source's lines
        (the backlog first), then `end`."""
        s = self.sessions.get(request.match_info["sid"])
        if s is None:
            return web.json_response({"error": f"no live session '{request.match_info['sid']}'"}, status=404)
        backlog, q = s.subscribe()
        try:
            async with sse_response(request) as resp:
                await resp.send(json.dumps(s.describe()), event="session")
                for i in range(0, len(backlog), 5000):
                    await resp.send("[" + ",".join(backlog[i:i + 5000]) + "]", event="lines")
                while True:
                    batch = await q.get()
                    if batch is None:
                        break
                    await resp.send("[" + ",".join(batch) + "]", event="lines")
                await resp.send(json.dumps(s.describe()), event="end")
        except ConnectionError:              # the page went away (aiohttp's ClientConnectionResetError)
            log.info("session %s: a page stopped watching", s.id)
            return web.Response(status=204)
        finally:
            s.unsubscribe(q)
        return resp


# ============================================================================ helpers
def _shown(request: web.Request) -> str:
    """The request's path and query for the log, the owner's secret left out."""
    q = "&".join(f"{k}={v}" for k, v in request.query.items() if k != QUERY)
    return request.path + (f"?{q}" if q else "")


def _names(body: dict[str, Any], key: str) -> list[str]:
    """A list of names (event specs, virtual counters, metrics) in a POST's JSON body."""
    v = body.get(key)
    if v in (None, ""):
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise UserError(f"{key}: a list of names, not {json.dumps(v)[:60]}")
    return [x.strip() for x in v if x.strip()]


def _seconds(body: dict[str, Any], key: str, default: float | None) -> float | None:
    """A positive, finite number of seconds in a POST's JSON body (a number or its text)."""
    v = body.get(key)
    if v in (None, ""):
        return default
    try:
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise ValueError
        x = float(v)
    except (TypeError, ValueError, OverflowError):
        raise UserError(f"{key} {json.dumps(v)[:60]} is not a number of seconds") from None
    if not (math.isfinite(x) and x > 0):
        raise UserError(f"{key} {json.dumps(v)[:60]}: give a positive number of seconds")
    return x


def _virtual_counters() -> list[dict[str, Any]]:
    """The virtual counters `stat -V` knows (name, unit, scope, description)."""
    try:
        from ..collect.stat import VIRTUAL_COUNTERS
    except ImportError:
        return []
    return [{"name": n, "unit": v[0], "scope": v[1], "description": v[2]} for n, v in VIRTUAL_COUNTERS.items()]


def _registry_names() -> dict[str, list[str]]:
    from ..meters.catalog import METERS
    from ..model.predictors import METHODS
    from ..sched.policies import POLICIES, VARIANTS
    return {"methods": list(METHODS), "policies": [*POLICIES, *VARIANTS], "meters": list(METERS)}


def _bundled_machines() -> list[str]:
    from ..target import bundled
    return bundled()


def _jsonable(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


async def _body(request: web.Request) -> dict[str, Any]:
    """A POST's JSON object (an empty body is {})."""
    if not request.can_read_body:
        return {}
    try:
        body = json_document(await request.text(), "the request")      # nesting bounded
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UserError("the request is not JSON") from None
    if not isinstance(body, dict):
        raise UserError("the request is not a JSON object")
    return body


def _machine(text: str, what: str) -> Any:
    """A MachineSpec from a bundled name or the inline form (never a file: the page sends the
    text, and the server reads no path it was not given on the command line)."""
    from ..target import bundled, parse_spec
    text = text.strip()
    if text not in bundled() and ("=" not in text or "/" in text):
        raise UserError(f"{what} '{text}': give a bundled name ({', '.join(bundled())}) or the inline form "
                        "sockets=2,cores=32,smt=2 or cpus=64 (a file: corecast predict --target-machine FILE)")
    return parse_spec(text, files=False)


def _target(q: Any) -> Any:
    """The model.usecase.Target of the page's target machine, placement, SMT yield and measured
    machine, as `predict` builds it from --target-machine and its options (None without one)."""
    from ..model.usecase import Target
    text = (q.get("target_machine") or "").strip()
    smt_yield = _opt_float(q, "smt_yield")
    measured_text = (q.get("measured_machine") or "").strip()
    if not text:
        if smt_yield is not None or measured_text:
            raise UserError("the SMT yield and the measured machine are for a target machine")
        return None
    return Target(_machine(text, "target machine"), q.get("placement") or None, smt_yield,
                  _machine(measured_text, "measured machine") if measured_text else None)


def _arg(request: web.Request, name: str) -> str:
    v = request.query.get(name)
    if not v:
        raise UserError(f"missing '{name}'")
    return v


def _cores(text: str) -> list[float]:
    import argparse
    from ..parsing import core_list
    try:
        return core_list(text)
    except argparse.ArgumentTypeError as err:
        raise UserError(f"cores: {err}") from None


def _level(text: str) -> float:
    import argparse
    from ..parsing import level
    try:
        return level(text)
    except argparse.ArgumentTypeError as err:
        raise UserError(f"level: {err}") from None


def _opt_float(q: Any, name: str) -> float | None:
    v = q.get(name)
    return None if v in (None, "") else finite(v, name)


def _opt_int(q: Any, name: str) -> int | None:
    v = q.get(name)
    if v in (None, ""):
        return None
    try:
        return int(v)
    except ValueError:
        raise UserError(f"{name}: '{v}' is not a whole number") from None
