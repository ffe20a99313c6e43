"""Launching a command so that counting starts exactly at its exec: the bare primitive (a fork
that waits). corecast's commands start programs through `corecast.collect.procs.Supervised`
(corecast-launch), which also kills the program's whole tree when it ends or corecast dies."""
from __future__ import annotations

import os
import signal
import time
from typing import Sequence

from ...errors import UserError

# --------------------------------------------------------------------------------------------
# launching a command so that counting starts exactly at its exec

class Launched:
    """A forked child that waits for `start()` before it execs the command."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None, cwd: str | None = None):
        if not argv:
            raise UserError("no command to run")
        self.argv = list(argv)
        go_r, go_w = os.pipe()
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:  # child
            try:
                os.close(go_w)
                os.close(err_r)
                os.read(go_r, 1)
                os.close(go_r)
                if cwd:
                    os.chdir(cwd)
                signal.signal(signal.SIGPIPE, signal.SIG_DFL)
                if env is None:
                    os.execvp(self.argv[0], self.argv)
                else:
                    os.execvpe(self.argv[0], self.argv, env)
            except BaseException as err:  # noqa: BLE001 -- report anything to the parent
                try:
                    e = getattr(err, "errno", None) or 0
                    os.write(err_w, f"{e}:{err}".encode()[:512])
                finally:
                    os._exit(127)
        os.close(go_r)
        os.close(err_w)
        self.pid = pid
        self._go = go_w
        self._err = err_r
        self.status: int | None = None
        self.rusage = None
        self.started = False

    def start(self) -> None:
        """Let the child exec. Raises UserError when the command cannot be run."""
        os.write(self._go, b"g")
        os.close(self._go)
        msg = os.read(self._err, 600)
        os.close(self._err)
        self.started = True
        if msg:
            self.wait()
            code, _, text = msg.decode(errors="replace").partition(":")
            reason = os.strerror(int(code)) if code.isdigit() and int(code) else text
            raise UserError(f"cannot run '{self.argv[0]}': {reason}")

    def poll(self) -> int | None:
        if self.status is not None:
            return self.status
        pid, status, ru = os.wait4(self.pid, os.WNOHANG)
        if pid == 0:
            return None
        self.status = os.waitstatus_to_exitcode(status)
        self.rusage = ru
        return self.status

    def wait(self) -> int:
        if self.status is None:
            _, status, ru = os.wait4(self.pid, 0)
            self.status = os.waitstatus_to_exitcode(status)
            self.rusage = ru
        return self.status

    def kill(self, sig: int = signal.SIGTERM) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, grace: float = 2.0) -> int:
        """SIGTERM, then SIGKILL if the child is still there after `grace` seconds (a program that
        ignores SIGTERM must not keep corecast waiting); returns its status."""
        self.kill(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.status is None:
            self.kill(signal.SIGKILL)
        return self.wait()

    def abandon(self) -> None:
        """Tidy up a child that was never started (an error before start)."""
        if not self.started:
            try:
                os.close(self._go)
                os.close(self._err)
            except OSError:
                pass
            self.kill(signal.SIGKILL)
            self.wait()


def launch(argv: Sequence[str], env: dict[str, str] | None = None, cwd: str | None = None) -> Launched:
    """Fork `argv` stopped before exec; open counters on `.pid` with `enable_on_exec=True`,
    then call `.start()`."""
    return Launched(argv, env, cwd)
