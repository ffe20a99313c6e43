"""Signals during `stat` (the `Monitor`'s signal handling): SIGINT, SIGTERM and SIGHUP end the
run as the target's exit does -- a last row for every thread, then the totals; SIGTERM and
SIGHUP are passed on to a command corecast launched; a second signal raises KeyboardInterrupt.
A signal wakes the tick loop through a wakeup descriptor (`_sigfd`) that the waits watch.
What ended the monitoring -- the target's exit, --duration or a signal -- labels the last row
of whatever still ran then (END_CAUSES), and a process attached with -p that runs on is said to.

`SignalHandling` is a part of `monitor.Monitor` (a mixin: it works on the monitor's state).
"""
from __future__ import annotations

import os
import signal
from typing import Any


#: What ended the monitoring, which labels the last row of a thread, process or CPU that was
#: still running then (`exit`: the target ended; a thread that ended is always `exit`).
END_CAUSES = {"exit": "the target ended", "duration": "--duration reached",
              "interrupt": "interrupted by SIGINT", "detach": "corecast stopped by a signal: it detached",
              "stop": "corecast stopped by a signal, passed on to the command"}


class SignalHandling:
    """Signals: end the run cleanly, with every row and the totals."""

    def _catch_signals(self) -> None:
        try:
            r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return
        try:
            old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
            old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        except (ValueError, OSError):         # not the main thread
            os.close(r)
            os.close(w)
            return
        self._sigfd = r
        self._sig_saved = (r, w, old_fd, old)
        # a launched command's end ends the sleep between ticks (see wake_on_records)
        hook = getattr(self.backend, "catch_sigchld", None)
        self._sigchld = bool(hook is not None and self.target.kind == "command" and not self.wake_on_records
                             and hook(True))

    def _release_signals(self) -> None:
        if self._sig_saved is None:
            return
        r, w, old_fd, old = self._sig_saved
        self._sig_saved = None
        self._sigfd = None
        if self._sigchld:
            self.backend.catch_sigchld(False)  # type: ignore[attr-defined]
            self._sigchld = False
        for s, h in old.items():
            signal.signal(s, h)
        signal.set_wakeup_fd(old_fd)
        os.close(r)
        os.close(w)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._stop is not None:
            raise KeyboardInterrupt
        self._stop = signum
        name = signal.Signals(signum).name
        child = self.target.child if self.target.kind == "command" else None
        if signum != signal.SIGINT and child is not None and child.started:
            child.kill(signum)
            self.notes.append(f"stopped by {name} (passed on to the command)")
        else:
            self.notes.append("interrupted" if signum == signal.SIGINT else f"stopped by {name}")

    def _drain_sigfd(self) -> None:
        if self._sigfd is None:
            return
        try:
            while os.read(self._sigfd, 512):
                pass
        except OSError:
            pass

    def _end_cause(self, ended: bool) -> str:
        """What ended the monitoring (END_CAUSES): a signal, the target's end (`ended`), or
        else --duration."""
        if self._stop is not None:
            if self._stop == signal.SIGINT:
                return "interrupt"
            return "stop" if self.target.kind == "command" else "detach"
        return "exit" if ended else "duration"

    def _still_running(self) -> None:
        """Say that a process attached with -p runs on after the monitoring ended."""
        if self.ended_by == "exit" or self.target.kind != "pid" or not self.target.alive():
            return
        self.notes.append(f"process {self.target.pid} still runs: the monitoring ended "
                          f"({END_CAUSES[self.ended_by]}), not at its exit; its last rows are labelled "
                          f"'{self.ended_by}'")
