"""What `corecast stat` monitors: a command it launches, a running process, or the system.

A command is found as `measure` finds it (`procs.find_program`: PATH, then corecast's bundled
workloads such as corecast-lockbench) and started through corecast-launch
(`corecast.collect.procs.Supervised`), stopped before it executes so that counting starts
exactly at its exec. It stays in corecast's process group (the terminal's Ctrl-C reaches it as
it reaches corecast); everything it leaves running when it exits is killed, and its whole tree
-- what escaped with setsid included -- when corecast dies, SIGKILL included. `Target.pidfd`
watches the supervisor, whose exit follows the command's and means its report is complete.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Sequence

from ...errors import UserError
from ..procs import Supervised, find_program


# ============================================================================================
# the target

#: How long a command gets to end on SIGTERM (--duration) before SIGKILL.
STOP_GRACE_S = 2.0


class Target:
    """What is monitored: a command corecast launches, a running process, or the system."""

    def __init__(self, kind: str, pid: int = -1, argv: Sequence[str] | None = None,
                 child: Supervised | None = None, env: dict[str, str] | None = None):
        self.env = env
        self.kind = kind            # command | pid | system
        self.pid = pid
        self.argv = list(argv or [])
        self.child = child
        self.pidfd: int | None = None
        self.exit_status: int | None = None
        self.program: str | None = None     # the path the command is executed by

    @classmethod
    def command(cls, argv: Sequence[str], env: dict[str, str] | None = None) -> "Target":
        return cls("command", argv=argv, env=env)

    @classmethod
    def attach(cls, pid: int) -> "Target":
        if not Path(f"/proc/{pid}").is_dir():
            raise UserError(f"-p {pid}: no such process")
        return cls("pid", pid=pid)

    @classmethod
    def system(cls) -> "Target":
        return cls("system")

    def prepare(self) -> None:
        """Start the command's supervisor (the command is stopped before exec)."""
        if self.kind == "command" and self.child is None:
            env = os.environ if self.env is None else self.env
            prog = find_program(self.argv[0], env, os.getcwd())
            if prog is None and "/" not in self.argv[0]:
                raise UserError(f"cannot run '{self.argv[0]}': not found (not in PATH, nor a bundled corecast "
                                "workload)")
            self.program = prog or self.argv[0]
            self.child = Supervised(self.argv, program=self.program, env=self.env, keep_group=True)
            self.pid = self.child.pid
        watch = self.child.sup if self.child is not None else self.pid
        if watch > 0:
            try:
                self.pidfd = os.pidfd_open(watch)
            except (OSError, AttributeError):
                self.pidfd = None

    #: The launcher's name as the kernel keeps it (15 characters) until the command's exec.
    LAUNCHER_COMM = "corecast-launch"[:15]

    def comm(self, read: str) -> str:
        """The command's name for a name `read` from /proc just after the start: the launcher's
        until its exec has run, then what the kernel sets at exec, the last component of the
        program's path cut to 15 characters -- given here at once (a short command has exited
        before its name could be read again)."""
        if self.kind != "command" or not self.program or read not in ("", self.LAUNCHER_COMM):
            return read
        return os.path.basename(self.program)[:15] or read

    def start(self) -> None:
        if self.child is not None and not self.child.started:
            self.child.start()
            if self.child.exec_error is not None:
                self.child.wait()
                raise UserError(f"cannot run '{self.argv[0]}': {os.strerror(self.child.exec_error)}")

    def alive(self) -> bool:
        if self.kind == "system":
            return True
        if self.child is not None:
            # ended: reported, or its supervisor gone without a report (SIGKILLed on its own),
            # when poll's status stays None -- which read as "running" for ever, at full CPU
            return self.child.poll() is None and not self.child.ended
        return Path(f"/proc/{self.pid}").is_dir() and _not_zombie(self.pid)

    def abort(self) -> None:
        """The monitoring failed (a write error, a bug) or its rows are no longer wanted: the
        command is killed now, with no grace -- the supervisor then kills what is left of its
        tree. `finish` still reaps it."""
        if self.child is not None and self.child.started and not self.child.ended:
            self.child.kill(signal.SIGKILL)

    def finish(self) -> None:
        """The command's exit status. A command still running (the monitoring was ended by a
        signal) gets STOP_GRACE_S to end on its own, then SIGTERM, then SIGKILL: it never
        outlives corecast."""
        if self.child is not None:
            if self.child.started:
                if self.child.poll(STOP_GRACE_S) is None:
                    self.child.stop(grace=STOP_GRACE_S)
                self.exit_status = self.child.wait()
            else:
                self.child.abandon()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def _not_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False
