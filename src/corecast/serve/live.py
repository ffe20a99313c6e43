"""Live data sources of the dashboard, and the sessions that fan their data out to pages.

A live source produces JSON lines -- the very lines a corecast command prints -- and hands
them to `publish` as they come:

    class LiveSource(Protocol):
        kind: str                                   # "stat" | "meters"
        def describe(self) -> dict: ...             # what it watches, for the page's list
        async def run(self, publish) -> int | None: ...   # until done; returns an exit status
        async def stop(self) -> None: ...           # ask it to end (it still publishes its end)

`StatSource` runs `corecast stat --format json` in a child process, so that a live stat on the
page is exactly the command's JSON-lines output (header, samples, summary, regions), and the
monitor keeps its own signal handling in its own process. `meters.MetersSource` polls the
`meters` blackboard with its Python reader.

A `Session` keeps the recent lines of one source (a page that connects late gets them first;
a source may keep fewer than HISTORY_LINES with a `history_lines` attribute) and its header
lines (the last HEADERS of them), and sends each subscriber the new lines in batches, at most
every BATCH_S seconds.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from collections import deque
from typing import Any, Callable, Protocol, Sequence

from ..native import ending_with_parent

log = logging.getLogger("corecast.serve")

BATCH_S = 0.1            # lines are sent to pages in batches, at most this often
HISTORY_LINES = 100_000  # per session: lines kept for pages that connect later
HEADERS = 16             # per session: header lines kept (a meters board replaced by a new daemon)
OUTPUT_LINES = 2000      # per session: lines of the monitored program's own output shown
QUEUE_BATCHES = 600      # per subscriber: batches waiting; a page this far behind is cut off


class LiveSource(Protocol):
    kind: str

    def describe(self) -> dict[str, Any]: ...
    async def run(self, publish: Callable[[str], None]) -> int | None: ...
    async def stop(self) -> None: ...


# ============================================================================ stat
def stat_argv(*, events: Sequence[str] = (), virtual: Sequence[str] = (), metrics: Sequence[str] = (),
              interval: float = 1.0, per_cpu: bool = False, pid: int | None = None,
              command: Sequence[str] = (), duration: float | None = None) -> list[str]:
    """The `corecast stat` arguments for a live session (after `corecast`)."""
    argv = ["stat", "--format", "json", "-T", repr(float(interval))]
    for s in events:
        argv += ["-c", s]
    if virtual:
        argv += ["-V", ",".join(virtual)]
    for m in metrics:
        argv += ["-m", m]
    if per_cpu:
        argv.append("-S")
    if duration is not None:
        argv += ["--duration", repr(float(duration))]
    if pid is not None:
        argv += ["-p", str(int(pid))]
    if command:
        argv += ["--", *command]
    return argv


class StatSource:
    """`corecast stat --format json ARGS` in a child process; its stdout lines are published as
    they come, its stderr lines as `{"type": "log"}` objects (an error line as `"error"`)."""

    kind = "stat"

    def __init__(self, argv: Sequence[str], label: str = ""):
        self.argv = list(argv)
        self.label = label or " ".join(argv)
        self.proc: asyncio.subprocess.Process | None = None
        self.stopping = False

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "label": self.label, "argv": ["corecast", *self.argv],
                "pid": self.proc.pid if self.proc else None}

    async def run(self, publish: Callable[[str], None]) -> int | None:
        # stat writes its JSON lines into a pipe of their own (-o /dev/fd/N); its standard
        # output carries the monitored command's output, shown as `output` lines
        # a whole corecast of its own, which corecast-launch cannot hold (its tree kill would take
        # that corecast's sentinel with it, leaving its temporary files): it gets SIGTERM when the
        # server dies, and ends as it does on SIGTERM, cleaning up
        loop = asyncio.get_running_loop()
        r, w = os.pipe()
        os.set_inheritable(w, True)
        argv = list(self.argv)
        cut = argv.index("--") if "--" in argv else len(argv)
        argv[cut:cut] = ["-o", f"/dev/fd/{w}"]
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-P", "-m", "corecast", *argv, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
                pass_fds=(w,), limit=1 << 24, preexec_fn=ending_with_parent(signal.SIGTERM))
        finally:
            os.close(w)
        data = asyncio.StreamReader(limit=1 << 24)
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(data),
                                                    os.fdopen(r, "rb", 0))

        async def out() -> None:
            try:
                while line := await data.readline():
                    text = line.decode("utf-8", "replace").strip()
                    if text:
                        publish(text)
            finally:
                transport.close()

        async def program() -> None:
            assert self.proc and self.proc.stdout
            shown = 0
            while line := await self.proc.stdout.readline():
                text = line.decode("utf-8", "replace").rstrip()
                if not text:
                    continue
                shown += 1
                if shown <= OUTPUT_LINES:
                    publish(json.dumps({"type": "output", "message": text}))
            if shown > OUTPUT_LINES:
                publish(json.dumps({"type": "output", "message": f"(the program wrote {shown} lines; "
                                                                   f"the first {OUTPUT_LINES} are shown)"}))

        async def err() -> None:
            assert self.proc and self.proc.stderr
            while line := await self.proc.stderr.readline():
                text = line.decode("utf-8", "replace").rstrip()
                if not text:
                    continue
                kind = "error" if ": error: " in text or ": internal error: " in text else "log"
                log.info("stat %s: %s", self.proc.pid, text)
                publish(json.dumps({"type": kind, "message": text}))

        await asyncio.gather(out(), err(), program())
        return await self.proc.wait()

    async def stop(self) -> None:
        """SIGTERM: stat passes it on to a command it launched and ends with its last rows and
        the totals. A stat still there 5 s later is killed."""
        if self.proc is None or self.proc.returncode is not None or self.stopping:
            return
        self.stopping = True
        try:
            self.proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            await asyncio.wait_for(self.proc.wait(), 5.0)
        except asyncio.TimeoutError:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# ============================================================================ sessions
class Session:
    """One live source, its recent lines and its subscribers."""

    def __init__(self, sid: str, source: LiveSource):
        self.id = sid
        self.source = source
        self.started = time.time()
        self.state = "starting"
        self.exit_status: int | None = None
        self.error: str | None = None
        self.history: deque[str] = deque(maxlen=getattr(source, "history_lines", HISTORY_LINES))
        self.head: deque[str] = deque(maxlen=HEADERS)    # header lines: kept for late subscribers
        self.dropped = 0
        self.subscribers: set[asyncio.Queue[list[str] | None]] = set()
        self._pending: list[str] = []
        self._flush_handle: asyncio.TimerHandle | None = None
        self.task: asyncio.Task[None] | None = None

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, **self.source.describe(), "started": self.started, "state": self.state,
                "exit_status": self.exit_status, "error": self.error, "lines": len(self.history) + self.dropped}

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        self.state = "running"
        try:
            self.exit_status = await self.source.run(self.publish)
        except Exception as err:           # the source failed: say so on the page and in the log
            log.exception("live session %s failed", self.id)
            self.error = f"{type(err).__name__}: {err}"
            self.publish(json.dumps({"type": "error", "message": f"the live source failed: {self.error}"}))
        self.state = "ended"
        self.publish(json.dumps({"type": "end", "exit_status": self.exit_status}))
        self._flush()
        for q in list(self.subscribers):
            _put(q, None)

    def publish(self, line: str) -> None:
        if line.startswith('{"type": "header"'):
            self.head.append(line)
        else:
            if len(self.history) == self.history.maxlen:
                self.dropped += 1
            self.history.append(line)
        self._pending.append(line)
        if self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_later(BATCH_S, self._flush)

    def _flush(self) -> None:
        self._flush_handle = None
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        for q in list(self.subscribers):
            if not _put(q, batch):
                self.subscribers.discard(q)

    def subscribe(self) -> tuple[list[str], asyncio.Queue[list[str] | None]]:
        """(the lines so far, a queue of the batches to come; None ends it)."""
        q: asyncio.Queue[list[str] | None] = asyncio.Queue(QUEUE_BATCHES)
        backlog = list(self.head) + list(self.history)
        self.subscribers.add(q)
        if self.state == "ended":
            _put(q, None)
        return backlog, q

    def unsubscribe(self, q: asyncio.Queue[list[str] | None]) -> None:
        self.subscribers.discard(q)

    async def stop(self) -> None:
        await self.source.stop()


def _put(q: asyncio.Queue[list[str] | None], item: list[str] | None) -> bool:
    try:
        q.put_nowait(item)
        return True
    except asyncio.QueueFull:            # a page that does not keep up: end its stream
        while not q.empty():
            q.get_nowait()
        q.put_nowait(None)
        return False
