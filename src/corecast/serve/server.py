"""Starting and stopping the dashboard's server."""
from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from aiohttp import web

from .. import messages
from ..errors import UserError
from ..parsing import listen_address as parse_listen
from .app import Dashboard
from .guard import KEEPALIVE_S, MAX_HEADERS

log = logging.getLogger("corecast.serve")
DEFAULT_LISTEN = "127.0.0.1:8765"


WORKERS = 8                  # threads reading files and boards for the handlers
EXIT_GRACE_S = 2.0           # after the server stopped, how long a worker may take to finish


class OneLine(logging.Formatter):
    """One line per record: an exception is its type and message, never a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        exc = record.exc_info
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        try:
            line = super().format(record)
        finally:
            record.exc_info = exc
        if exc and exc[1] is not None:
            line += f": {type(exc[1]).__name__}: {exc[1]}"
        return messages.visible(" ".join(line.splitlines()))     # a file's text may carry escapes


def run(files: list[str], listen: str = DEFAULT_LISTEN, allow_commands: bool = False,
        ready: Callable[[str], None] | None = None) -> int:
    """Serve until interrupted. `ready(url)` is called once the server listens."""
    host, port = parse_listen(listen)
    dash = Dashboard(files, host, port, allow_commands=allow_commands)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLine("corecast serve: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    # -v: a line per request (aiohttp's access log); else only what goes wrong
    logging.getLogger("aiohttp.access").setLevel(logging.INFO if messages.level() >= messages.VERBOSE
                                                 else logging.WARNING)
    loop = asyncio.new_event_loop()
    pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="corecast-serve")
    loop.set_default_executor(pool)
    try:
        rc = loop.run_until_complete(_serve(dash, host, port, ready))
    finally:
        try:
            tasks = asyncio.all_tasks(loop)
            for t in tasks:
                t.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            loop.close()
    _leave(pool, rc)
    return rc


def _leave(pool: ThreadPoolExecutor, rc: int) -> None:
    """A worker still inside a read that never returns (a file turned into a pipe nobody
    writes) must not keep a stopped server alive: give the workers EXIT_GRACE_S, then end the
    process without waiting for them (the server has stopped and its sessions are ended)."""
    workers = list(getattr(pool, "_threads", ()))
    end = time.monotonic() + EXIT_GRACE_S
    for t in workers:
        t.join(max(0.0, end - time.monotonic()))
    if any(t.is_alive() for t in workers):
        logging.getLogger("corecast.serve").warning("a read did not end; stopping without it")
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(rc)


async def _serve(dash: Dashboard, host: str, port: int, ready: Callable[[str], None] | None) -> int:
    verbose = messages.level() >= messages.VERBOSE
    runner = web.AppRunner(dash.app(), handle_signals=False, shutdown_timeout=2.0,
                           max_headers=MAX_HEADERS, keepalive_timeout=KEEPALIVE_S,
                           **({} if verbose else {"access_log": None}))
    await runner.setup()
    if runner.server is not None:
        dash.guard.doorman.attach(runner.server)      # strangers' connections bounded (guard.Doorman)
    site = web.TCPSite(runner, host, port, reuse_address=True)
    try:
        await site.start()
    except OSError as err:
        await runner.cleanup()
        if err.errno == errno.EADDRINUSE:
            raise UserError(f"--listen {host}:{port}: the port is in use (choose another with --listen)") from None
        if err.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) or isinstance(err, __import__("socket").gaierror):
            raise UserError(f"--listen {host}:{port}: not an address of this machine") from None
        if err.errno == errno.EACCES:
            raise UserError(f"--listen {host}:{port}: permission denied (ports below 1024 need privileges)") from None
        raise UserError(f"--listen {host}:{port}: {err.strerror or err}") from None
    # the port actually bound (port 0: the kernel's choice)
    srv = getattr(site, "_server", None)
    sockets = list(getattr(srv, "sockets", None) or [])
    if sockets:
        port = sockets[0].getsockname()[1]
        dash.port = port
    url = dash.url()
    # the owner's secret goes to this terminal only (docs/serve.md, "Safety")
    print(f"corecast serve: {url} (Ctrl-C to stop)", file=sys.stderr, flush=True)
    if not dash.loopback:
        messages.warning(f"listening on {host}, reachable from other machines; the server is read-only"
                         + ("" if not dash.allow_commands else ", and the page can start commands"))
    if ready:
        ready(url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            # No signal handlers for this loop (it runs outside the main thread, or the platform
            # has none): the server then stops with its loop or its process, not by a handler.
            pass
    try:
        await stop.wait()
    finally:
        messages.note("stopping")
        await runner.cleanup()
    return 0
